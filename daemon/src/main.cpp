// bgexec: the worker daemon and the client subcommands, one binary.
#include "bench/bench.hpp"
#include "client/client.hpp"
#include "core/config.hpp"
#include "core/limits.hpp"
#include "core/logfmt.hpp"
#include "core/output.hpp"
#include "http/serve.hpp"
#include "pg/connection.hpp"
#include "proc/guard.hpp"
#include "worker/worker.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <boost/system/system_error.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <optional>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

extern char** environ;

namespace {

// Why the worker failed, for its last line: a thread it could not create
// (EAGAIN from pthread_create, which said only "thread: Resource
// temporarily unavailable") is named by its cause, the limit on processes.
std::string failure_text(const std::exception& ex) {
  int code = 0;
  if (const auto* b = dynamic_cast<const boost::system::system_error*>(&ex))
    code = std::string_view(ex.what()).starts_with("thread") ? b->code().value() : 0;
  else if (const auto* s = dynamic_cast<const std::system_error*>(&ex))
    code = s->code().value();
  if (code != EAGAIN) return ex.what();
  rlimit rl{};
  std::string nproc = "?";
  if (::getrlimit(RLIMIT_NPROC, &rl) == 0)
    nproc = rl.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(rl.rlim_cur);
  return "cannot start a thread: the process limit is reached (RLIMIT_NPROC=" + nproc + " for uid " +
         std::to_string(::getuid()) + ", or the cgroup's pids.max): " + ex.what();
}

constexpr const char* usage_text = R"(usage: bgexec COMMAND [ARGS] [--help]

Commands:
  worker                 run jobs (see bgexec worker --help)
  serve                  HTTP gateway: API, event streams, metrics, dashboard (see bgexec serve --help)
  submit KIND [JSON|@FILE] [options]
                         enqueue a job (--idempotency-key, --unique-key, ...); --wait/--follow wait for its end
  status ID              show a job
  tail ID [--from SEQ]   print a job's events until it ends or suspends
  stop ID                cancel a job (a running one is stopped by its worker)
  resume ID [JSON|@FILE] resume a suspended job; JSON becomes the approval's output
  retry ID               re-queue a failed, cancelled or timed-out job
  reschedule ID [--run-after TIMESTAMP|+DUR] [--priority N]
                         move a queued job: when it runs, at what priority
  stop | retry [--queue Q] [--kind K] [--status S[,S...]] [--limit N]
                         many jobs at once
  jobs [--queue Q] [--kind K] [--status S[,S...]] [--limit N] [--before ID]
                         list your jobs, newest first
  queues                 per-queue counts
  pause-queue NAME       stop workers claiming a queue's jobs (administrators)
  resume-queue NAME      let workers claim a paused queue's jobs again
  configure-queue NAME [--max-queued N|none] [--max-running N|none] [...]
                         set a queue's caps, rate limit and retry backoff (administrators)
  workers [--all]        the live workers (--all: every one registered) and their jobs in flight
  schedule NAME CRON KIND [JSON|@FILE] [options]
                         create or replace a recurring job (cron; --time-zone, UTC by default)
  unschedule NAME        delete a recurring job
  pause-schedule NAME    stop a recurring job firing, keeping it
  resume-schedule NAME   let a paused recurring job fire again
  run-schedule NAME      submit a recurring job's job now (--wait/--follow as submit)
  schedules              list your recurring jobs
  purge OLDER_THAN [--batch N] [--status S[,S...]]
                         delete your jobs that ended (so) longer ago than OLDER_THAN, in batches
  bench [options]        burn-down benchmark (see bgexec bench --help)
  version                print the version

Client commands take --db CONNINFO (else BGEXEC_DB, else libpq PG* variables)
and --json (machine-readable output).

Exit codes: 0 ok / job completed; 1 job failed, cancelled or timed out (or resume/retry refused);
2 usage error; 3 database error; 4 job or schedule not found; 5 job suspended (waits for resume);
6 output could not be written; 141 (quietly) the output's reader has gone (a closed pipe).
stop exits 0 whenever the job exists: "stop requested" for a running job, else its status.
)";

std::map<std::string, std::string> environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string s(*e);
    auto eq = s.find('=');
    if (eq != std::string::npos) env[s.substr(0, eq)] = s.substr(eq + 1);
  }
  return env;
}

int run_worker(const std::vector<std::string>& args) {
  if (bgexec::core::help_requested(args)) return bgexec::core::print("bgexec worker", bgexec::core::worker_usage());
  bgexec::core::WorkerConfig cfg;
  try {
    cfg = bgexec::core::parse_worker_config(args, environment());
  } catch (const std::exception& e) {
    std::cerr << "bgexec worker: " << e.what() << "\n";
    return 2;
  }
  // A connection string libpq cannot parse fails every connect alike: the
  // worker would retry it for ever as if the database were down.
  if (auto err = bgexec::pg::conninfo_error(cfg.db)) {
    std::cerr << "bgexec worker: " << cfg.db_source << ": invalid connection string: " << *err << "\n";
    return 2;
  }
  if (cfg.id.empty()) {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    cfg.id = std::string(host) + ":" + std::to_string(::getpid());
  }
  // Each step process holds three pipes, each sql step a session, beside
  // the worker's own connections: at a login shell's 1024, --concurrency
  // 1024 failed its steps with EMFILE, and so did one workflow of 600
  // parallel action steps.  Step processes are capped (--step-processes,
  // by default what the limit holds); a soft limit still short of what the
  // worker may open (a cap set above it, many sql steps) is named at start.
  const std::size_t nofile = bgexec::core::raise_nofile();
  if (cfg.step_processes == 0) cfg.step_processes = bgexec::core::default_step_processes(nofile, cfg.sql_steps);
  const std::size_t needs = bgexec::core::files_wanted(cfg.sql_steps, cfg.step_processes);
  if (nofile > 0 && nofile < needs)
    bgexec::core::log("warn", "open-file limit is low for the concurrency: steps may fail to start (EMFILE)",
                      {{"limit", std::to_string(nofile)}, {"wanted", std::to_string(needs)},
                       {"concurrency", std::to_string(cfg.concurrency)},
                       {"step_processes", std::to_string(cfg.step_processes)},
                       {"sql_steps", std::to_string(cfg.sql_steps)}});
  boost::asio::io_context io;
  std::optional<bgexec::worker::Worker> worker;
  int code = 1;
  // What the worker's own resources fail with (the signal set's pipe at an
  // open-file limit of 7: EMFILE) ends it as any other error does, logged
  // and exit 1: uncaught, it aborted (exit 134).
  try {
    worker.emplace(io, cfg);
    boost::asio::co_spawn(io, worker->run(), [&](std::exception_ptr e, int rc) {
      code = rc;
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          bgexec::core::log("error", "worker failed", {{"error", failure_text(ex)}});
        }
        code = 1;
      }
      io.stop();
    });
    io.run();
  } catch (const std::exception& ex) {
    bgexec::core::log("error", "worker failed", {{"error", failure_text(ex)}});
    code = 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  bgexec::core::flush_log();
  // Coroutine frames still parked in the loop are not unwound: exit now.
  std::_Exit(code);
}

int run_command(const std::string& cmd, std::vector<std::string>& args);

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  // --help and version print on stdout, failing as the client commands do
  // when it cannot be written (core::print): `bgexec version >/dev/full`
  // exited 0.  No command is a usage error, its usage on stderr as for an
  // unknown command: exit 2 whatever stdout is (to /dev/full it was 6).
  if (args.empty()) {
    std::cerr << usage_text;
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") return bgexec::core::print("bgexec", usage_text);
  // Like every other setting, a bad value is refused, not silently ignored;
  // empty counts as unset, names are case-insensitive.
  if (const char* lvl = std::getenv("BGEXEC_LOG_LEVEL"); lvl && *lvl) {
    std::string name(lvl);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!bgexec::core::set_level(name)) {
      std::cerr << "bgexec: BGEXEC_LOG_LEVEL: expected debug, info, warn or error, got \"" << lvl << "\"\n";
      return 2;
    }
  }
  std::string cmd = args[0];
  args.erase(args.begin());
  // The last resort for an error no command expected (an io_context that
  // cannot get its descriptors at an open-file limit of 3): one line and
  // exit 1, never an abort.
  try {
    return run_command(cmd, args);
  } catch (const std::exception& e) {
    std::cerr << "bgexec " << cmd << ": " << e.what() << "\n";
    return 1;
  }
}

namespace {

int run_command(const std::string& cmd, std::vector<std::string>& args) {
  bgexec::pg::set_program("bgexec " + cmd);  // application_name of every connection
  if (cmd == "__guard") return bgexec::proc::guard::main(args);  // started by the worker
  if (cmd == "worker") return run_worker(args);
  if (cmd == "bench") return bgexec::bench::run_bench(args);
  if (cmd == "serve") return bgexec::http::run_serve(args);
  if (cmd == "version" || cmd == "--version") {
    if (bgexec::core::help_requested(args)) return bgexec::core::print("bgexec version", "usage: bgexec version\n");
    if (!args.empty()) {  // as every command with an argument too many
      std::cerr << "bgexec version: version takes no arguments\n";
      return 2;
    }
    return bgexec::core::print("bgexec version", std::string("bgexec ") + BGEXEC_VERSION + "\n");
  }
  if (bgexec::client::is_command(cmd)) return bgexec::client::run(cmd, args, environment());
  std::cerr << "bgexec: unknown command \"" << cmd << "\"\n\n" << usage_text;
  return 2;
}

}  // namespace
