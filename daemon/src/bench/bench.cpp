// `bgexec bench` (see bench.hpp and bench/README.md).
//
// Phases, each on its own queue (bench-<pid>-<phase>) so they never mix:
//   reference  pgbench, one-row UPDATE at 16 clients on a scratch table
//   enqueue    N noop jobs through bgexec.submit_many in batches
//   drain      W `bgexec worker` processes x C slots burn the backlog down;
//              commits (pg_stat_database) and WAL bytes around it
//   (these three --rounds times, interleaved; the figures are the medians)
//   pickup     jobs submitted one at a time to idle workers; started_at - created_at,
//              interleaved with its reference: one-row INSERT commits, timed
//   rss        an idle worker with 64 slots, then with 64 sleeping jobs in flight
//   scaling    (--scaling) claim latency and drain rate, empty vs 1M finished
//              + 100k queued rows, at 1/4/16/64 workers; and at each worker
//              count, idle workers under a trickle of single submits
// Every drain ends with the exactly-once check (missing, duplicates).
// The bench's statements name pg_catalog's built-ins a user could shadow
// (pg/connection.hpp): the = of the enum job_status, an int times an
// interval, percentile_cont, jsonb_build_object, pg_total_relation_size...
#include "bench/bench.hpp"

#include "bench/procs.hpp"
#include "core/config.hpp"
#include "core/output.hpp"
#include "pg/sync.hpp"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

namespace bgexec::bench {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* usage_text = R"(usage: bgexec bench [options]

A burn-down benchmark against a given database (bgexec installed; a superuser
for the reference table and the --scaling history).  Prints a table.

  --db CONNINFO          database (else BGEXEC_DB, else libpq PG* variables)
  --jobs N               jobs to enqueue and drain (default 20000)
  --rounds R             reference, enqueue and drain R times, interleaved;
                         each figure is the median of the rounds (default 3)
  --batch N              jobs per submit_many call (default 1000)
  --enqueue-clients N    connections enqueueing in parallel (default 1)
  --workers W            worker processes for the drain and pickup (default 2)
  --concurrency C        slots per worker (default 16)
  --pickup-jobs N        jobs submitted one at a time to idle workers (default 500)
  --pickup-gap-ms MS     gap between those submits (default 5); each is
                         followed, as far apart, by a one-row INSERT commit
                         (the pickup's reference)
  --ref-clients N        pgbench clients of the reference (default 16)
  --ref-seconds S        pgbench duration (default 10)
  --pgbench PATH         default /usr/lib/postgresql/15/bin/pgbench
  --skip-reference       no pgbench run (ratios are then omitted)
  --skip-rss             no worker memory measurement
  --scaling              also run the scaling mode (and, at each of its worker
                         counts, --pickup-jobs single submits 2 ms apart to
                         idle workers: commits and host CPU per job)
  --scaling-jobs N       jobs drained per scaling run (default 5000)
  --scaling-workers LIST worker counts (default 1,4,16,64)
  --scaling-concurrency C  slots per worker in scaling runs (default 4)
  --history N            finished jobs for the loaded state (default 1000000)
  --backlog N            queued jobs for the loaded state (default 100000)
  --claim-iterations N   claim+finish round trips per state (default 1000)
  --json FILE            write the figures as JSON
  --log-dir DIR          keep worker logs there (default: discarded)
  --keep                 leave the bench's jobs in the database (default: deleted)
)";

// Benchmark settings; member defaults are the documented defaults.
struct Options {
  std::string db;
  int jobs = 20000;
  int rounds = 3;
  int batch = 1000;
  int enqueue_clients = 1;
  int workers = 2;
  int concurrency = 16;
  int pickup_jobs = 500;
  double pickup_gap_ms = 5;
  int ref_clients = 16;
  double ref_seconds = 10;
  std::string pgbench = "/usr/lib/postgresql/15/bin/pgbench";
  bool skip_reference = false;
  bool skip_rss = false;
  bool scaling = false;
  int scaling_jobs = 5000;
  std::vector<int> scaling_workers{1, 4, 16, 64};
  int scaling_concurrency = 4;
  long history = 1000000;
  long backlog = 100000;
  int claim_iterations = 1000;
  std::string json_path;
  std::string log_dir;
  bool keep = false;
};

// Progress lines on stderr; the table goes to stdout.
void note(const std::string& s) {
  std::cerr << "bench: " << s << std::endl;
}

double secs_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double to_d(const std::string& s) { return s.empty() ? 0.0 : std::strtod(s.c_str(), nullptr); }
long long to_ll(const std::string& s) { return s.empty() ? 0 : std::strtoll(s.c_str(), nullptr, 10); }

// p-quantile of an unsorted sample (nearest rank).
double quantile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto idx = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size()))) ;
  return v[std::min(v.size() - 1, idx == 0 ? 0 : idx - 1)];
}

double round3(double x) { return std::round(x * 1000) / 1000; }

// The median of one figure over the rounds (the mean of the middle two for
// an even count), rounded as the figure is; null when a round lacks it.
json median_of(const json& rounds, const json::json_pointer& key) {
  std::vector<double> v;
  for (const auto& x : rounds) {
    if (!x.contains(key) || !x[key].is_number()) return nullptr;
    v.push_back(x[key].get<double>());
  }
  if (v.empty()) return nullptr;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  double m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  bool integral = std::all_of(v.begin(), v.end(), [](double x) { return std::floor(x) == x; });
  return integral ? json(std::round(m)) : json(round3(m));
}

// The bench's own process: names its queues and worker ids.
std::string tag() {
  static std::string t = "bench-" + std::to_string(::getpid());
  return t;
}

// ------------------------------------------------------------- workers

// A set of `bgexec worker` processes, stopped by pid when it goes out of scope.
class WorkerSet {
 public:
  WorkerSet(const Options& o, const std::string& queue, int n, int concurrency, const std::string& phase)
      : app_("bgexec " + tag() + "-" + phase + " worker") {
    std::string exe = self_exe();
    for (int i = 0; i < n; ++i) {
      std::string id = tag() + "-" + phase + "-" + std::to_string(i);
      std::vector<std::string> argv = {exe, "worker", "--id", id, "--queue", queue,
                                       "--concurrency", std::to_string(concurrency)};
      if (!o.db.empty()) {
        argv.push_back("--db");
        argv.push_back(o.db);
      }
      std::string log = o.log_dir.empty() ? "" : o.log_dir + "/" + id + ".log";
      // PGAPPNAME labels this set's connections, so the drain can find their backends.
      pids_.push_back(spawn(argv, {"BGEXEC_LOG_LEVEL=warn", "PGAPPNAME=" + app_}, log));
      ids_.push_back(id);
    }
  }
  ~WorkerSet() { stop(); }
  WorkerSet(const WorkerSet&) = delete;
  WorkerSet& operator=(const WorkerSet&) = delete;

  void stop() {
    if (!pids_.empty()) cpu_s_ += stop_pids(pids_);
    pids_.clear();
  }
  const std::vector<pid_t>& pids() const { return pids_; }
  // The application_name of every connection of this set.
  const std::string& app() const { return app_; }
  // CPU seconds (user + system) the stopped workers used.
  double cpu_seconds() const { return cpu_s_; }

  // Waits until every worker registered in bgexec.worker (or times out).
  void wait_registered(pg::SyncConnection& c, double timeout_s = 30) {
    std::string arr = "{";
    for (std::size_t i = 0; i < ids_.size(); ++i) arr += (i ? ",\"" : "\"") + ids_[i] + "\"";
    arr += "}";
    auto t0 = Clock::now();
    while (secs_since(t0) < timeout_s) {
      auto n = to_ll(c.scalar("SELECT count(*) FROM bgexec.worker WHERE id = ANY ($1::text[]) AND stopped_at IS NULL",
                              {arr}));
      if (n >= static_cast<long long>(ids_.size())) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    throw std::runtime_error("workers did not register within " + std::to_string(timeout_s) + " s");
  }

 private:
  std::string app_;
  std::vector<pid_t> pids_;
  std::vector<std::string> ids_;
  double cpu_s_ = 0;
};

// CPU seconds used so far by the backends whose application_name is `app`,
// or -1 when the server does not run on this host (the session's own backend
// is then not a local process named postgres).  One statement either way.
double backends_cpu(pg::SyncConnection& c, const std::string& app) {
  auto r = c.exec("SELECT pid FROM pg_stat_activity WHERE application_name = $1", {app});
  if (cpu_seconds(c.backend_pid(), "postgres") < 0) return -1;
  double sum = 0;
  for (int i = 0; i < r.rows(); ++i)
    sum += std::max(0.0, cpu_seconds(static_cast<pid_t>(to_ll(r.get(i, 0).value_or("0"))), "postgres"));
  return r.rows() > 0 ? sum : -1;
}

// ------------------------------------------------------------- phases

// Enqueues `n` noop jobs into `queue` with submit_many in batches, from
// `clients` connections in parallel; returns the elapsed seconds.
double enqueue(const Options& o, const std::string& queue, long n, int batch, int clients,
               const std::string& kind = "noop", const json& payload = json::object()) {
  json one = {{"kind", kind}, {"queue", queue}};
  if (!payload.empty()) one["payload"] = payload;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<std::size_t>(clients));
  std::vector<std::unique_ptr<pg::SyncConnection>> conns;
  for (int i = 0; i < clients; ++i) conns.push_back(std::make_unique<pg::SyncConnection>(o.db));
  auto t0 = Clock::now();
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      try {
        long share = n / clients + (t < n % clients ? 1 : 0);
        while (share > 0) {
          long b = std::min<long>(share, batch);
          json arr = json::array();
          for (long i = 0; i < b; ++i) arr.push_back(one);
          auto got = to_ll(conns[static_cast<std::size_t>(t)]->scalar(
              "SELECT count(*) FROM bgexec.submit_many($1::jsonb)", {arr.dump()}));
          if (got != b) throw std::runtime_error("submit_many returned " + std::to_string(got) + " ids");
          share -= b;
        }
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(t)] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  double el = secs_since(t0);
  for (auto& e : errors)
    if (!e.empty()) throw std::runtime_error("enqueue: " + e);
  return el;
}

// Counts of the exactly-once check for a queue that received `expected` jobs.
struct Check {
  long long jobs = 0, completed = 0, missing = 0, duplicates = 0;
};

// Every job completed, exactly one `started` event per attempt, exactly one
// terminal event, attempt = 1 (noop jobs have max_attempts 1: a second
// attempt would be a second claim).
Check check_exactly_once(pg::SyncConnection& c, const std::string& queue, long long expected) {
  // Hash joins whatever the statistics say: right after a drain they still
  // describe the queue as it was, and a nested loop over the event aggregate
  // is quadratic (a 100 000-job check ran for over ten minutes).
  c.exec("SET enable_nestloop = off");
  auto r = c.exec(R"(
    WITH j AS (SELECT id, status, attempt FROM bgexec.job WHERE queue = $1),
    e AS (SELECT ev.job_id,
                 count(*) FILTER (WHERE ev.kind = 'started') AS started,
                 count(*) FILTER (WHERE ev.kind IN ('completed', 'failed', 'cancelled', 'timed_out')) AS terminal
            FROM bgexec.job_event ev WHERE ev.job_id IN (SELECT id FROM j) GROUP BY ev.job_id)
    SELECT count(*),
           count(*) FILTER (WHERE j.status OPERATOR(pg_catalog.=) 'completed' AND coalesce(e.started, 0) >= 1
                              AND coalesce(e.terminal, 0) >= 1),
           coalesce(sum(greatest(coalesce(e.started, 0) - j.attempt, 0)
                        + greatest(coalesce(e.terminal, 0) - 1, 0)
                        + greatest(j.attempt - 1, 0)), 0)
      FROM j LEFT JOIN e ON e.job_id = j.id)",
                  {queue});
  c.exec("RESET enable_nestloop");
  Check k;
  k.jobs = to_ll(r.get(0, 0).value_or("0"));
  k.completed = to_ll(r.get(0, 1).value_or("0"));
  k.duplicates = to_ll(r.get(0, 2).value_or("0"));
  k.missing = expected - k.completed;
  return k;
}

// Database-wide counters read around a drain.
struct Counters {
  long long commits = 0;
  std::string lsn;
};

Counters read_counters(pg::SyncConnection& c) {
  c.exec("SELECT pg_stat_clear_snapshot()");
  auto r = c.exec("SELECT xact_commit, pg_current_wal_lsn() FROM pg_stat_database WHERE datname = current_database()");
  return {to_ll(r.get(0, 0).value_or("0")), r.get(0, 1).value_or("0/0")};
}

// Result of one drain.
struct Drain {
  double seconds = 0, jobs_per_s = 0;
  long long commits = 0;
  double wal_bytes = 0;
  double worker_cpu_s = 0;    // the worker processes, start to exit
  double server_cpu_s = -1;   // their backends, -1 when the server is not on this host
  double host_busy = -1;      // share of this host's CPU busy during the drain (every process)
  Check check;
};

// Drains `n` jobs already queued in `queue` with `w` workers x `c` slots.
// Timed on the database clock, from just before the workers start to the
// last finished_at.  Commits: pg_stat_database.xact_commit delta, read after
// the workers exited (their backends flush stats on exit), minus the
// monitor's own statements.  WAL: pg_current_wal_lsn delta at completion.
// CPU: the workers' own (rusage at exit) and their backends' (/proc, read
// when the last job completed; a local server only).
Drain drain(const Options& o, const std::string& queue, long long n, int w, int c, const std::string& phase) {
  Drain d;
  pg::SyncConnection stats(o.db);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // earlier sessions' stats flushed
  Counters before = read_counters(stats);
  long long monitor_stmts = 0;
  std::string lsn_after;
  {
    auto mon = std::make_unique<pg::SyncConnection>(o.db);
    std::string t0 = mon->scalar("SELECT clock_timestamp()");
    ++monitor_stmts;
    HostCpu host0 = host_cpu();
    WorkerSet ws(o, queue, w, c, phase);
    auto last_progress = Clock::now();
    auto last_count = Clock::now();
    std::string last_newest = "-";
    for (;;) {
      // The monitor must not load the server it measures: counting a deep
      // queue every 25 ms took ~15 % of the server's CPU during a drain, and
      // even once a second its 0.1 s scan held back the xmin horizon, so the
      // workers' claim scans met index entries of claimed jobs they could
      // not yet mark dead.  So every 25 ms only "is anything left?" (the
      // first live entry of each partial index), and once a second the
      // newest finished_at (the end of job_finished_idx) for stall detection:
      // the drain has stalled when no job has finished for 60 s.
      bool busy = mon->scalar(
                      "SELECT EXISTS (SELECT FROM bgexec.job"
                      "                WHERE queue = $1 AND status OPERATOR(pg_catalog.=) 'queued')"
                      " OR EXISTS (SELECT FROM bgexec.job"
                      "             WHERE queue = $1 AND status OPERATOR(pg_catalog.=) 'running')",
                      {queue}) == "t";
      ++monitor_stmts;
      if (!busy) break;
      if (secs_since(last_count) >= 1) {
        last_count = Clock::now();
        // Any queue's: the last entry of job_finished_idx is one index probe,
        // where a filter on the queue lets the planner scan the table.
        auto newest = mon->scalar(
            "SELECT finished_at FROM bgexec.job WHERE finished_at IS NOT NULL"
            " ORDER BY finished_at DESC LIMIT 1");
        ++monitor_stmts;
        if (newest != last_newest) {
          last_newest = newest;
          last_progress = Clock::now();
        } else if (secs_since(last_progress) > 60) {
          auto left = mon->scalar(
              "SELECT count(*) FROM bgexec.job"
              " WHERE queue = $1 AND status OPERATOR(pg_catalog.=) ANY ('{queued,running}')",
              {queue});
          ++monitor_stmts;
          note("drain stalled with " + left + " jobs left");
          break;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    lsn_after = mon->scalar("SELECT pg_current_wal_lsn()");
    ++monitor_stmts;
    HostCpu host1 = host_cpu();
    if (host1.total > host0.total)
      d.host_busy = static_cast<double>(host1.busy - host0.busy) / static_cast<double>(host1.total - host0.total);
    d.server_cpu_s = backends_cpu(*mon, ws.app());
    ++monitor_stmts;
    d.seconds = to_d(mon->scalar(
        "SELECT extract(epoch FROM max(finished_at) - $2::timestamptz) FROM bgexec.job WHERE queue = $1",
        {queue, t0}));
    ++monitor_stmts;
    d.wal_bytes = to_d(mon->scalar("SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)", {lsn_after, before.lsn}));
    ++monitor_stmts;
    ws.stop();
    d.worker_cpu_s = ws.cpu_seconds();
  }  // monitor session ends: its stats are flushed
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  Counters after = read_counters(stats);
  d.commits = after.commits - before.commits - monitor_stmts - 1;  // -1: the stats session's own read
  d.jobs_per_s = d.seconds > 0 ? static_cast<double>(n) / d.seconds : 0;
  d.check = check_exactly_once(stats, queue, n);
  return d;
}

// Reference: pgbench TPS of a one-row UPDATE at `clients` clients on a
// 1000-row scratch table, created and dropped here.
double reference_tps(const Options& o) {
  pg::SyncConnection c(o.db);
  std::string table = "bench_ref_" + std::to_string(::getpid());
  c.exec("SET client_min_messages = warning");
  c.exec("DROP TABLE IF EXISTS " + table);
  c.exec("CREATE TABLE " + table + " (id int PRIMARY KEY, v bigint NOT NULL DEFAULT 0)");
  c.exec("INSERT INTO " + table + " (id) SELECT g FROM generate_series(1, 1000) g");
  c.exec("VACUUM ANALYZE " + table);
  char script[] = "/tmp/bgexec-bench-ref.XXXXXX";
  int fd = ::mkstemp(script);
  if (fd < 0) throw std::runtime_error("cannot create the pgbench script");
  std::string body = "\\set id random(1, 1000)\nUPDATE " + table + " SET v = v + 1 WHERE id = :id;\n";
  if (::write(fd, body.data(), body.size()) != static_cast<ssize_t>(body.size())) {
    ::close(fd);
    throw std::runtime_error("cannot write the pgbench script");
  }
  ::close(fd);
  std::vector<std::string> argv = {o.pgbench, "-n", "-c", std::to_string(o.ref_clients), "-j", "2",
                                   "-T", std::to_string(static_cast<int>(std::max(1.0, o.ref_seconds))),
                                   "-f", script};
  if (!o.db.empty()) argv.push_back(o.db);
  int code = 0;
  std::string out;
  try {
    out = run_capture(argv, code);
  } catch (...) {
    ::unlink(script);
    c.exec("DROP TABLE IF EXISTS " + table);
    throw;
  }
  ::unlink(script);
  c.exec("DROP TABLE IF EXISTS " + table);
  std::smatch m;
  static const std::regex tps_re(R"(tps = ([0-9.]+) \(without initial connection time\))");
  if (code != 0 || !std::regex_search(out, m, tps_re))
    throw std::runtime_error("pgbench failed (exit " + std::to_string(code) + "): " + out);
  return std::strtod(m[1].str().c_str(), nullptr);
}

// Latencies are measured on an idle system (pickup, and the scaling mode's
// claims), but a drain before them leaves `bgexec.job` with a vacuum's
// worth of dead rows, which the watchdog (or autovacuum) would otherwise
// vacuum during the timed calls, on one of the cores they need.  So the
// bench vacuums it first and waits (up to 30 s) until no vacuum of this
// database is running.
void settle(pg::SyncConnection& c) {
  c.exec("VACUUM bgexec.job");
  auto t0 = Clock::now();
  while (to_ll(c.scalar("SELECT count(*) FROM pg_stat_progress_vacuum WHERE datname = current_database()")) > 0 &&
         secs_since(t0) < 30)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

// Waits (20 ms apart, up to `timeout_s`) until `queue` has no queued or
// running job; returns the statements it ran.
long long wait_settled(pg::SyncConnection& c, const std::string& queue, double timeout_s) {
  auto t0 = Clock::now();
  long long stmts = 0;
  for (;;) {
    ++stmts;
    if (c.scalar("SELECT EXISTS (SELECT FROM bgexec.job"
                 "               WHERE queue = $1 AND status OPERATOR(pg_catalog.=) ANY ('{queued,running}'))",
                 {queue}) != "t" ||
        secs_since(t0) > timeout_s)
      return stmts;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Percentiles of started_at - created_at (the DB clock) over `queue`'s
// started jobs, in ms: p50, p95, p99, max, min.
json pickup_ms(pg::SyncConnection& c, const std::string& queue) {
  auto r = c.exec(
      "SELECT pg_catalog.percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY ms), max(ms), min(ms)"
      "  FROM (SELECT extract(epoch FROM started_at - created_at) OPERATOR(pg_catalog.*) 1000 AS ms"
      "          FROM bgexec.job WHERE queue = $1 AND started_at IS NOT NULL) s",
      {queue});
  std::string arr = r.get(0, 0).value_or("{0,0,0}");
  std::vector<double> p;
  std::stringstream ss(arr.substr(1, arr.size() - 2));
  for (std::string x; std::getline(ss, x, ',');) p.push_back(to_d(x));
  while (p.size() < 3) p.push_back(0);
  return {{"p50", round3(p[0])}, {"p95", round3(p[1])}, {"p99", round3(p[2])},
          {"max", round3(to_d(r.get(0, 1).value_or("0")))}, {"min", round3(to_d(r.get(0, 2).value_or("0")))}};
}

// Pickup latency: `n` jobs submitted one at a time, `gap_ms` apart, to idle
// workers (after settle); percentiles of started_at - created_at (both the
// DB clock).
//
// Its reference, interleaved with it (`gap_ms` after each submit, so both
// see the same idle machine): a one-row INSERT into a scratch table, in
// autocommit, timed round trip on the client.  A job can start only after
// its submit's commit reached the disk, and on a virtual disk an isolated
// flush can take several times one in a busy stream (the bench/README's
// twelfth round): the reference is the part of the pickup the machine sets.
json pickup(const Options& o, Check& check, json& commit_ref) {
  std::string queue = tag() + "-pickup";
  std::string table = "bench_commit_" + std::to_string(::getpid());
  pg::SyncConnection c(o.db);
  settle(c);
  c.exec("SET client_min_messages = warning");
  c.exec("DROP TABLE IF EXISTS " + table);
  c.exec("CREATE TABLE " + table + " (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())");
  struct DropAtExit {  // on the error paths too
    pg::SyncConnection& c;
    std::string table;
    ~DropAtExit() {
      try {
        c.exec("DROP TABLE IF EXISTS " + table);
      } catch (...) {
      }
    }
  } drop{c, table};
  WorkerSet ws(o, queue, o.workers, o.concurrency, "pickup");
  ws.wait_registered(c);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // LISTEN in place, first claim done
  auto gap = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(o.pickup_gap_ms));
  std::vector<double> commit_ms;
  // Both as prepared statements, as a driver sends them: with the extended
  // protocol a transaction starts at the Parse message, so an unprepared
  // submit counted the parsing and planning of its own text in its
  // created_at (now()) to started_at (bench/README, twenty-seventh round).
  c.prepare("bench_submit", "SELECT bgexec.submit('noop', '{}'::jsonb, $1)");
  c.prepare("bench_commit", "INSERT INTO " + table + " DEFAULT VALUES");
  auto next = Clock::now();
  for (int i = 0; i < o.pickup_jobs; ++i) {
    c.exec_prepared("bench_submit", {queue});
    next += gap;
    std::this_thread::sleep_until(next);
    auto t0 = Clock::now();
    c.exec_prepared("bench_commit");
    commit_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    next += gap;
    std::this_thread::sleep_until(next);
  }
  commit_ref = {{"p50", round3(quantile(commit_ms, 0.5))},
                {"p95", round3(quantile(commit_ms, 0.95))},
                {"p99", round3(quantile(commit_ms, 0.99))}};
  wait_settled(c, queue, 60);
  ws.stop();
  check = check_exactly_once(c, queue, o.pickup_jobs);
  return pickup_ms(c, queue);
}

// Worker memory: RSS of an idle worker with 64 slots, then with 64 jobs in
// flight (each a workflow whose one step sleeps), per job in flight.
json worker_rss(const Options& o) {
  const int slots = 64;
  std::string queue = tag() + "-rss";
  pg::SyncConnection c(o.db);
  WorkerSet ws(o, queue, 1, slots, "rss");
  ws.wait_registered(c);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  long idle = rss_kib(ws.pids()[0]);
  // The worker's step guard: its RSS is mostly the same files' pages as the
  // worker's; what it adds is its private memory.
  pid_t guard = guard_of(ws.pids()[0]);
  long guard_rss = guard ? rss_kib(guard) : -1, guard_private = guard ? private_kib(guard) : -1;
  json payload = {{"steps", json::array({{{"id", "nap"}, {"sleep", 4}}})}};
  enqueue(o, queue, slots, slots, 1, "workflow", payload);
  auto t0 = Clock::now();
  long long running = 0;
  while (secs_since(t0) < 10) {
    running = to_ll(c.scalar(
        "SELECT count(*) FROM bgexec.job WHERE queue = $1 AND status OPERATOR(pg_catalog.=) 'running'", {queue}));
    if (running >= slots) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  long busy = rss_kib(ws.pids()[0]);
  while (to_ll(c.scalar("SELECT count(*) FROM bgexec.job"
                        " WHERE queue = $1 AND status OPERATOR(pg_catalog.=) ANY ('{queued,running}')",
                        {queue})) > 0 &&
         secs_since(t0) < 30)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ws.stop();
  double per_job = running > 0 ? static_cast<double>(busy - idle) / static_cast<double>(running) : 0;
  return {{"slots", slots},       {"idle_rss_kib", idle},   {"busy_rss_kib", busy},
          {"in_flight", running}, {"per_job_kib", round3(per_job)}, {"guard_rss_kib", guard_rss},
          {"guard_private_kib", guard_private}};
}

// Claim latency: `iters` round trips of claim(1 job) then finish, from one
// session with no worker running; per-call client-side latency in ms.
json claim_latency(const Options& o, const std::string& queue, int iters, Check* check) {
  pg::SyncConnection c(o.db);
  std::vector<double> claim_ms, finish_ms;
  std::string worker = tag() + "-claimer";
  c.exec("SELECT bgexec.register_worker($1, ARRAY[$2], 1, '{}'::jsonb)", {worker, queue});
  for (int i = 0; i < iters; ++i) {
    auto t0 = Clock::now();
    auto r = c.exec("SELECT job_id, lease FROM bgexec.claim($1, ARRAY[$2], 1, '30 seconds')", {worker, queue});
    auto t1 = Clock::now();
    if (r.rows() != 1) throw std::runtime_error("claim returned " + std::to_string(r.rows()) + " rows");
    auto st = c.scalar("SELECT bgexec.finish($1, $2, 'completed', '{}'::jsonb)",
                       {r.get(0, 0), r.get(0, 1)});
    auto t2 = Clock::now();
    if (st != "completed") throw std::runtime_error("finish returned \"" + st + "\"");
    claim_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    finish_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  if (check) *check = check_exactly_once(c, queue, iters);
  return {{"claim_p50_ms", round3(quantile(claim_ms, 0.5))}, {"claim_p99_ms", round3(quantile(claim_ms, 0.99))},
          {"finish_p50_ms", round3(quantile(finish_ms, 0.5))}, {"finish_p99_ms", round3(quantile(finish_ms, 0.99))},
          {"iterations", iters}};
}

// Loads the history: `history` completed jobs with their started/completed
// events and their queue_stats count (direct inserts: generation, not
// measurement), and `backlog` queued jobs through submit_many; then VACUUM
// ANALYZE, as autovacuum would.
void load_state(const Options& o, const std::string& history_q, const std::string& backlog_q) {
  pg::SyncConnection c(o.db);
  auto t0 = Clock::now();
  const long chunk = 200000;
  for (long done = 0; done < o.history; done += chunk) {
    long n = std::min(chunk, o.history - done);
    c.exec("BEGIN");
    c.exec(R"(
      WITH ins AS (
        INSERT INTO bgexec.job (queue, kind, owner, status, payload, result, attempt, run_after,
                                created_at, started_at, finished_at, last_seq)
        SELECT $1, 'noop', current_user, 'completed', '{}', '{}', 1, ts, ts, ts, ts + interval '1 ms', 2
          FROM (SELECT now() - interval '2 days' + (g OPERATOR(pg_catalog.*) interval '100 ms') AS ts
                  FROM generate_series(1, $2::int) g) s
        RETURNING id, started_at, finished_at)
      INSERT INTO bgexec.job_event (job_id, seq, kind, data, created_at)
      SELECT id, 1, 'started', pg_catalog.jsonb_build_object('attempt', 1, 'worker', 'history', 'lease', 0),
             started_at FROM ins
      UNION ALL
      SELECT id, 2, 'completed', '{"result": {}}', finished_at FROM ins)",
           {history_q, std::to_string(n)});
    // What finish would have counted for queue_stats (bgexec.queue_count).
    c.exec("INSERT INTO bgexec.queue_count (queue, status, n) VALUES ($1, 'completed', $2::bigint)",
           {history_q, std::to_string(n)});
    c.exec("COMMIT");
  }
  note("history: " + std::to_string(o.history) + " finished jobs in " + std::to_string(secs_since(t0)) + " s");
  double el = enqueue(o, backlog_q, o.backlog, o.batch, 1);
  note("backlog: " + std::to_string(o.backlog) + " queued jobs in " + std::to_string(el) + " s");
  c.exec("VACUUM ANALYZE bgexec.job");
  c.exec("VACUUM ANALYZE bgexec.job_event");
}

// Sizes of the hot tables, for the record.
json table_sizes(pg::SyncConnection& c) {
  auto r = c.exec(
      "SELECT (SELECT count(*) FROM bgexec.job),"
      " (SELECT count(*) FROM bgexec.job WHERE status OPERATOR(pg_catalog.=) 'queued'),"
      " (SELECT count(*) FROM bgexec.job_event),"
      " pg_catalog.pg_total_relation_size('bgexec.job'), pg_catalog.pg_total_relation_size('bgexec.job_event')");
  return {{"jobs", to_ll(r.get(0, 0).value_or("0"))}, {"queued", to_ll(r.get(0, 1).value_or("0"))},
          {"events", to_ll(r.get(0, 2).value_or("0"))}, {"job_bytes", to_ll(r.get(0, 3).value_or("0"))},
          {"job_event_bytes", to_ll(r.get(0, 4).value_or("0"))}};
}

// One scaling state: claim latency, then a drain per worker count.
json scaling_state(const Options& o, const std::string& state, const std::string& claim_queue,
                   bool claim_queue_prefilled, long long& bad) {
  json out;
  pg::SyncConnection c(o.db);
  out["tables"] = table_sizes(c);
  if (!claim_queue_prefilled) enqueue(o, claim_queue, o.claim_iterations, o.batch, 1);
  // Both states are timed on a quiet server: the loaded state's bulk load
  // writes about a gigabyte of WAL, and the checkpoint it starts went on
  // writing through the timed claims (seen in the server log: 9 s from the
  // load to past the claims).  So no vacuum running, then a checkpoint now.
  settle(c);
  c.exec("CHECKPOINT");
  Check ck;
  out["claim"] = claim_latency(o, claim_queue, o.claim_iterations, claim_queue_prefilled ? nullptr : &ck);
  note(state + ": claim p50 " + out["claim"]["claim_p50_ms"].dump() + " ms, p99 " +
       out["claim"]["claim_p99_ms"].dump() + " ms");
  out["drain"] = json::array();
  for (int w : o.scaling_workers) {
    std::string q = tag() + "-s-" + state + "-" + std::to_string(w);
    enqueue(o, q, o.scaling_jobs, o.batch, 1);
    Drain d = drain(o, q, o.scaling_jobs, w, o.scaling_concurrency, "s" + state + std::to_string(w));
    bad += d.check.missing + d.check.duplicates;
    note(state + ": " + std::to_string(w) + " workers: " + std::to_string(static_cast<long>(d.jobs_per_s)) +
         " jobs/s, missing " + std::to_string(d.check.missing) + ", duplicates " + std::to_string(d.check.duplicates));
    out["drain"].push_back({{"workers", w}, {"concurrency", o.scaling_concurrency}, {"jobs", o.scaling_jobs},
                            {"jobs_per_s", std::round(d.jobs_per_s)}, {"seconds", round3(d.seconds)},
                            {"commits_per_job", round3(static_cast<double>(d.commits) / o.scaling_jobs)},
                            {"wal_bytes_per_job", std::round(d.wal_bytes / o.scaling_jobs)},
                            {"missing", d.check.missing}, {"duplicates", d.check.duplicates}});
  }
  return out;
}

// An idle fleet under a trickle: `w` workers x `c` slots wait on one queue
// while `n` jobs are submitted one at a time, `gap_ms` apart (each submit
// wakes every worker listening on the queue; one gets the job).  Commits per
// job (pg_stat_database, the bench's own statements taken off, the submits
// too), the host's CPU per job (every process), pickup p50/p99, and the
// exactly-once check.
json trickle(const Options& o, int w, int c, int n, double gap_ms, long long& bad) {
  std::string queue = tag() + "-t-" + std::to_string(w);
  pg::SyncConnection s(o.db);
  WorkerSet ws(o, queue, w, c, "t" + std::to_string(w));
  ws.wait_registered(s);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // LISTEN in place, stats flushed
  Counters before = read_counters(s);
  long long own = 0;
  HostCpu h0 = host_cpu();
  auto gap = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(gap_ms));
  auto next = Clock::now();
  for (int i = 0; i < n; ++i) {
    s.exec("SELECT bgexec.submit('noop', '{}'::jsonb, $1)", {queue});
    ++own;
    next += gap;
    std::this_thread::sleep_until(next);
  }
  own += wait_settled(s, queue, 60);
  HostCpu h1 = host_cpu();
  ws.stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // the workers' backends flushed their stats
  Counters after = read_counters(s);
  long long commits = after.commits - before.commits - own - 1;
  long hz = ::sysconf(_SC_CLK_TCK);
  json pk = pickup_ms(s, queue);
  Check ck = check_exactly_once(s, queue, n);
  bad += ck.missing + ck.duplicates;
  return {{"workers", w},
          {"concurrency", c},
          {"jobs", n},
          {"gap_ms", gap_ms},
          {"commits_per_job", round3(static_cast<double>(commits) / n)},
          {"host_cpu_ms_per_job",
           hz > 0 ? json(round3(1000.0 * static_cast<double>(h1.busy - h0.busy) / hz / n)) : json(nullptr)},
          {"pickup_p50_ms", pk["p50"]},
          {"pickup_p99_ms", pk["p99"]},
          {"missing", ck.missing},
          {"duplicates", ck.duplicates}};
}

json run_scaling(const Options& o, long long& bad) {
  json out;
  {
    pg::SyncConnection c(o.db);
    // "Empty" means without the bench's own earlier rows: those of every
    // run (queues bench-PID-...), and no one else's (a queue bench-mine).
    c.exec("DELETE FROM bgexec.job WHERE queue ~ '^bench-[0-9]+-'");
    c.exec("VACUUM ANALYZE bgexec.job");
    c.exec("VACUUM ANALYZE bgexec.job_event");
  }
  out["empty"] = scaling_state(o, "empty", tag() + "-claim-empty", false, bad);
  out["trickle"] = json::array();
  for (int w : o.scaling_workers) {
    out["trickle"].push_back(trickle(o, w, o.scaling_concurrency, o.pickup_jobs, 2, bad));
    const auto& t = out["trickle"].back();
    note("trickle: " + std::to_string(w) + " idle workers, " + std::to_string(o.pickup_jobs) +
         " single submits 2 ms apart: " +
         t["commits_per_job"].dump() + " commits/job, host CPU " + t["host_cpu_ms_per_job"].dump() +
         " ms/job, pickup p50 " + t["pickup_p50_ms"].dump() + " ms");
  }
  std::string backlog_q = tag() + "-backlog";
  load_state(o, tag() + "-history", backlog_q);
  // Loaded: claims come from the 100k-deep backlog queue itself.
  out["loaded"] = scaling_state(o, "loaded", backlog_q, true, bad);
  double e99 = out["empty"]["claim"]["claim_p99_ms"].get<double>();
  double l99 = out["loaded"]["claim"]["claim_p99_ms"].get<double>();
  out["claim_p99_loaded_over_empty"] = e99 > 0 ? round3(l99 / e99) : 0;
  return out;
}

// ------------------------------------------------------------- options

int to_int(const std::string& flag, const std::string& v, long lo, long hi) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || x < lo || x > hi)
    throw core::ConfigError(flag + " must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  return static_cast<int>(x);
}

double to_pos(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || !(x >= 0)) throw core::ConfigError(flag + " must be a non-negative number");
  return x;
}

Options parse_options(const std::vector<std::string>& args) {
  static const std::set<std::string> values = {
      "--db", "--jobs", "--rounds", "--batch", "--enqueue-clients", "--workers", "--concurrency", "--pickup-jobs",
      "--pickup-gap-ms", "--ref-clients", "--ref-seconds", "--pgbench", "--scaling-jobs", "--scaling-workers",
      "--scaling-concurrency", "--history", "--backlog", "--claim-iterations", "--json", "--log-dir"};
  static const std::set<std::string> flags = {"--skip-reference", "--skip-rss", "--scaling", "--keep"};
  auto p = core::parse_args(args, values, flags);
  if (!p.positional.empty()) throw core::ConfigError("unexpected argument \"" + p.positional[0] + "\"");
  // One value each, as the worker and the client commands take theirs: of
  // two, the last won unnoticed; a switch once too (--keep --keep).
  for (const auto& [name, given] : p.options)
    if (given.size() > 1) throw core::ConfigError(name + " is given more than once");
  for (const auto& name : p.flags)
    if (p.flags.count(name) > 1) throw core::ConfigError(name + " is given more than once");
  Options o;
  if (const char* e = std::getenv("BGEXEC_DB"); e && *e) o.db = e;
  auto get = [&](const std::string& k) -> const std::string* {
    auto it = p.options.find(k);
    return it == p.options.end() || it->second.empty() ? nullptr : &it->second.back();
  };
  if (auto v = get("--db")) o.db = *v;
  if (auto v = get("--jobs")) o.jobs = to_int("--jobs", *v, 1, 100000000);
  if (auto v = get("--rounds")) o.rounds = to_int("--rounds", *v, 1, 100);
  if (auto v = get("--batch")) o.batch = to_int("--batch", *v, 1, 100000);
  if (auto v = get("--enqueue-clients")) o.enqueue_clients = to_int("--enqueue-clients", *v, 1, 64);
  if (auto v = get("--workers")) o.workers = to_int("--workers", *v, 1, 256);
  if (auto v = get("--concurrency")) o.concurrency = to_int("--concurrency", *v, 1, 1024);
  if (auto v = get("--pickup-jobs")) o.pickup_jobs = to_int("--pickup-jobs", *v, 1, 1000000);
  if (auto v = get("--pickup-gap-ms")) o.pickup_gap_ms = to_pos("--pickup-gap-ms", *v);
  if (auto v = get("--ref-clients")) o.ref_clients = to_int("--ref-clients", *v, 1, 256);
  if (auto v = get("--ref-seconds")) o.ref_seconds = to_pos("--ref-seconds", *v);
  if (auto v = get("--pgbench")) o.pgbench = *v;
  if (auto v = get("--scaling-jobs")) o.scaling_jobs = to_int("--scaling-jobs", *v, 1, 100000000);
  if (auto v = get("--scaling-concurrency")) o.scaling_concurrency = to_int("--scaling-concurrency", *v, 1, 1024);
  if (auto v = get("--history")) o.history = to_int("--history", *v, 0, 100000000);
  if (auto v = get("--backlog")) o.backlog = to_int("--backlog", *v, 0, 100000000);
  if (auto v = get("--claim-iterations")) o.claim_iterations = to_int("--claim-iterations", *v, 1, 10000000);
  if (auto v = get("--json")) o.json_path = *v;
  if (auto v = get("--log-dir")) o.log_dir = *v;
  if (auto v = get("--scaling-workers")) {
    o.scaling_workers.clear();
    std::stringstream ss(*v);
    for (std::string x; std::getline(ss, x, ',');) o.scaling_workers.push_back(to_int("--scaling-workers", x, 1, 256));
  }
  o.skip_reference = p.flags.count("--skip-reference") > 0;
  o.skip_rss = p.flags.count("--skip-rss") > 0;
  o.scaling = p.flags.count("--scaling") > 0;
  o.keep = p.flags.count("--keep") > 0;
  if (o.scaling && o.backlog < o.claim_iterations)
    throw core::ConfigError("--backlog must be at least --claim-iterations");
  return o;
}

// ------------------------------------------------------------- report

std::string fmt(double x, int prec = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, x);
  return buf;
}

// The results table, printed by run_bench as one text (core::print: a
// failed write is its exit status, as for every command that prints).
std::string results_table(const json& r) {
  std::string out;
  auto add = [&out](const char* format, auto... args) {
    const int n = std::snprintf(nullptr, 0, format, args...);
    if (n <= 0) return;
    const std::size_t at = out.size();
    out.resize(at + static_cast<std::size_t>(n) + 1);
    std::snprintf(out.data() + at, static_cast<std::size_t>(n) + 1, format, args...);
    out.pop_back();  // snprintf's '\0'
  };
  auto row = [&](const std::string& k, const std::string& v, const std::string& target = "") {
    add("  %-40s %18s   %s\n", k.c_str(), v.c_str(), target.c_str());
  };
  add("\nbgexec bench  (%s)\n", r["config"]["summary"].get<std::string>().c_str());
  row("metric", "value", "target");
  if (r.contains("reference_update_tps")) row("reference UPDATE tps (pgbench)", fmt(r["reference_update_tps"], 0));
  row("enqueue jobs/s", fmt(r["enqueue_jobs_per_s"], 0));
  if (r.contains("enqueue_over_reference"))
    row("  enqueue / reference", fmt(r["enqueue_over_reference"], 2) + "x", ">= 5x");
  row("drain jobs/s", fmt(r["drain_jobs_per_s"], 0));
  if (r.contains("drain_over_reference"))
    row("  drain / reference", fmt(r["drain_over_reference"], 2) + "x", ">= 2.4x");
  if (r["rounds"].size() > 1) {
    std::string per;
    for (const auto& x : r["rounds"])
      per += (per.empty() ? "" : " ") + (x.contains("drain_over_reference") ? fmt(x["drain_over_reference"], 2) + "x"
                                                                             : fmt(x["drain_jobs_per_s"], 0));
    row("  drain, each round", per);
  }
  row("commits per job (drain)", fmt(r["commits_per_job"], 2));
  row("WAL bytes per job (drain)", fmt(r["wal_bytes_per_job"], 0));
  const auto& cpu = r["drain_cpu_us_per_job"];
  row("worker CPU per job, us (drain)", fmt(cpu["workers"], 1));
  row("their backends' CPU per job, us", cpu["backends"].is_null() ? "n/a (remote)" : fmt(cpu["backends"], 1));
  if (!r["drain_host_cpu_busy"].is_null())
    row("host CPU busy during the drain", fmt(100 * r["drain_host_cpu_busy"].get<double>(), 0) + " %");
  row("pickup p50 ms", fmt(r["pickup_ms"]["p50"], 2), "<= 0.7");
  row("pickup p95 ms", fmt(r["pickup_ms"]["p95"], 2));
  row("pickup p99 ms", fmt(r["pickup_ms"]["p99"], 2), "<= 2");
  if (r.contains("pickup_reference_commit_ms")) {
    const auto& cr = r["pickup_reference_commit_ms"];
    row("  commit reference p50 / p95 / p99 ms",
        fmt(cr["p50"], 2) + " / " + fmt(cr["p95"], 2) + " / " + fmt(cr["p99"], 2));
    if (r.contains("pickup_p50_over_commit_p50"))
      row("  pickup p50 / commit reference p50", fmt(r["pickup_p50_over_commit_p50"], 2) + "x");
  }
  row("missing", std::to_string(r["missing"].get<long long>()), "0");
  row("duplicates", std::to_string(r["duplicates"].get<long long>()), "0");
  if (r.contains("worker_rss")) {
    const auto& m = r["worker_rss"];
    row("idle worker RSS, 64 slots (KiB)", std::to_string(m["idle_rss_kib"].get<long>()), "<= 20480");
    if (m.value("guard_private_kib", -1L) >= 0) {
      row("  its step guard: RSS / private (KiB)",
          std::to_string(m["guard_rss_kib"].get<long>()) + " / " + std::to_string(m["guard_private_kib"].get<long>()));
      row("  worker RSS + guard private (KiB)",
          std::to_string(m["idle_rss_kib"].get<long>() + m["guard_private_kib"].get<long>()), "<= 20480");
    }
    row("RSS per job in flight (KiB)", fmt(m["per_job_kib"], 1), "<= 200");
  }
  if (r.contains("scaling")) {
    const auto& s = r["scaling"];
    for (const char* st : {"empty", "loaded"}) {
      const auto& x = s[st];
      add("\n  scaling: %s (jobs %lld, queued %lld, events %lld)\n", st, x["tables"]["jobs"].get<long long>(),
                  x["tables"]["queued"].get<long long>(), x["tables"]["events"].get<long long>());
      row("claim p50 / p99 ms", fmt(x["claim"]["claim_p50_ms"], 3) + " / " + fmt(x["claim"]["claim_p99_ms"], 3));
      row("finish p50 / p99 ms", fmt(x["claim"]["finish_p50_ms"], 3) + " / " + fmt(x["claim"]["finish_p99_ms"], 3));
      for (const auto& d : x["drain"])
        row("drain " + std::to_string(d["workers"].get<int>()) + " workers x " +
                std::to_string(d["concurrency"].get<int>()) + " jobs/s (miss/dup)",
            fmt(d["jobs_per_s"], 0) + " (" + std::to_string(d["missing"].get<long long>()) + "/" +
                std::to_string(d["duplicates"].get<long long>()) + ")",
            "0/0");
    }
    row("claim p99 loaded / empty", fmt(s["claim_p99_loaded_over_empty"], 2) + "x", "<= 2x");
    if (s.contains("trickle")) {
      add("\n  scaling: idle workers, single submits 2 ms apart (commits/job, host CPU ms/job, pickup p50/p99 ms)\n");
      for (const auto& t : s["trickle"])
        row("trickle " + std::to_string(t["workers"].get<int>()) + " workers x " +
                std::to_string(t["concurrency"].get<int>()),
            fmt(t["commits_per_job"], 1) + ", " +
                (t["host_cpu_ms_per_job"].is_null() ? std::string("n/a") : fmt(t["host_cpu_ms_per_job"], 2)) + ", " +
                fmt(t["pickup_p50_ms"], 2) + "/" + fmt(t["pickup_p99_ms"], 2));
    }
  }
  add("\n");
  return out;
}

}  // namespace

int run_bench(const std::vector<std::string>& args) {
  if (core::help_requested(args)) return core::print("bgexec bench", usage_text);
  Options o;
  try {
    o = parse_options(args);
  } catch (const std::exception& e) {
    std::cerr << "bgexec bench: " << e.what() << "\n";
    return 2;
  }
  install_interrupt_handler();
  json r;
  long long bad = 0;
  try {
    pg::SyncConnection c(o.db);
    c.exec("SET client_min_messages = warning");
    c.exec("CREATE EXTENSION IF NOT EXISTS bgexec");
    auto settings = c.exec(
        "SELECT pg_catalog.current_setting('server_version'), pg_catalog.current_setting('fsync'),"
        " pg_catalog.current_setting('synchronous_commit'), pg_catalog.current_setting('shared_buffers'),"
        " pg_catalog.current_setting('wal_level'), pg_catalog.current_setting('max_connections')");
    r["config"] = {{"jobs", o.jobs}, {"rounds", o.rounds}, {"batch", o.batch}, {"enqueue_clients", o.enqueue_clients},
                   {"workers", o.workers}, {"concurrency", o.concurrency}, {"pickup_jobs", o.pickup_jobs},
                   {"pickup_gap_ms", o.pickup_gap_ms}, {"ref_clients", o.ref_clients},
                   {"ref_seconds", o.ref_seconds}, {"cpus", std::thread::hardware_concurrency()},
                   {"server_version", settings.get(0, 0).value_or("")},
                   {"fsync", settings.get(0, 1).value_or("")},
                   {"synchronous_commit", settings.get(0, 2).value_or("")},
                   {"shared_buffers", settings.get(0, 3).value_or("")},
                   {"wal_level", settings.get(0, 4).value_or("")}};
    r["config"]["summary"] = "N=" + std::to_string(o.jobs) + " x " + std::to_string(o.rounds) + " rounds, W=" + std::to_string(o.workers) +
                             " C=" + std::to_string(o.concurrency) + ", PG " + settings.get(0, 0).value_or("") +
                             ", fsync=" + settings.get(0, 1).value_or("") +
                             ", synchronous_commit=" + settings.get(0, 2).value_or("") +
                             ", shared_buffers=" + settings.get(0, 3).value_or("") + ", " +
                             std::to_string(std::thread::hardware_concurrency()) + " CPUs";

    // Reference, enqueue and drain, --rounds times in turn: the machine's
    // speed drifts within minutes, so each round pairs a drain with a
    // reference taken just before it, and the figures reported are the
    // medians of the rounds (each round's are in "rounds").
    Check dc;
    for (int i = 1; i <= o.rounds; ++i) {
      json x = {{"round", i}};
      std::string at = o.rounds > 1 ? "round " + std::to_string(i) + ": " : "";
      if (!o.skip_reference) {
        note(at + "reference: pgbench one-row UPDATE, " + std::to_string(o.ref_clients) + " clients, " +
             fmt(o.ref_seconds) + " s");
        x["reference_update_tps"] = std::round(reference_tps(o));
        note(at + "reference: " + x["reference_update_tps"].dump() + " tps");
      }

      std::string suffix = o.rounds > 1 ? "-" + std::to_string(i) : "";
      std::string dq = tag() + "-drain" + suffix;
      note(at + "enqueue: " + std::to_string(o.jobs) + " jobs in batches of " + std::to_string(o.batch));
      double el = enqueue(o, dq, o.jobs, o.batch, o.enqueue_clients);
      x["enqueue_jobs_per_s"] = std::round(o.jobs / el);
      note(at + "enqueue: " + x["enqueue_jobs_per_s"].dump() + " jobs/s");

      note(at + "drain: " + std::to_string(o.workers) + " workers x " + std::to_string(o.concurrency));
      Drain d = drain(o, dq, o.jobs, o.workers, o.concurrency, "drain" + suffix);
      x["drain_jobs_per_s"] = std::round(d.jobs_per_s);
      x["drain_seconds"] = round3(d.seconds);
      x["commits_per_job"] = round3(static_cast<double>(d.commits) / o.jobs);
      x["wal_bytes_per_job"] = std::round(d.wal_bytes / o.jobs);
      x["drain_cpu_us_per_job"] = {
          {"workers", std::round(d.worker_cpu_s * 1e7 / o.jobs) / 10},
          {"backends", d.server_cpu_s < 0 ? json(nullptr) : json(std::round(d.server_cpu_s * 1e7 / o.jobs) / 10)}};
      x["drain_host_cpu_busy"] = d.host_busy < 0 ? json(nullptr) : json(round3(d.host_busy));
      if (x.contains("reference_update_tps") && x["reference_update_tps"].get<double>() > 0) {
        double ref = x["reference_update_tps"].get<double>();
        x["drain_over_reference"] = round3(x["drain_jobs_per_s"].get<double>() / ref);
        x["enqueue_over_reference"] = round3(x["enqueue_jobs_per_s"].get<double>() / ref);
      }
      x["missing"] = d.check.missing;
      x["duplicates"] = d.check.duplicates;
      note(at + "drain: " + x["drain_jobs_per_s"].dump() + " jobs/s, " + x["commits_per_job"].dump() +
           " commits/job, " + x["wal_bytes_per_job"].dump() + " WAL bytes/job");
      dc.jobs += d.check.jobs;
      dc.completed += d.check.completed;
      dc.missing += d.check.missing;
      dc.duplicates += d.check.duplicates;
      r["rounds"].push_back(std::move(x));
    }
    for (const char* k : {"reference_update_tps", "enqueue_jobs_per_s", "drain_jobs_per_s", "drain_seconds",
                          "commits_per_job", "wal_bytes_per_job", "drain_host_cpu_busy", "drain_over_reference",
                          "enqueue_over_reference"})
      if (r["rounds"][0].contains(k)) r[k] = median_of(r["rounds"], json::json_pointer(std::string("/") + k));
    r["drain_cpu_us_per_job"] = {{"workers", median_of(r["rounds"], json::json_pointer("/drain_cpu_us_per_job/workers"))},
                                 {"backends", median_of(r["rounds"], json::json_pointer("/drain_cpu_us_per_job/backends"))}};

    note("pickup: " + std::to_string(o.pickup_jobs) + " jobs, one every " + fmt(o.pickup_gap_ms, 1) + " ms");
    Check pk;
    json commit_ref;
    r["pickup_ms"] = pickup(o, pk, commit_ref);
    r["pickup_reference_commit_ms"] = commit_ref;
    if (commit_ref["p50"].get<double>() > 0)
      r["pickup_p50_over_commit_p50"] = round3(r["pickup_ms"]["p50"].get<double>() / commit_ref["p50"].get<double>());
    note("pickup: " + r["pickup_ms"].dump() + "; its commit reference: " + commit_ref.dump());

    r["exactly_once"] = {{"drain", {{"jobs", dc.jobs}, {"completed", dc.completed},
                                    {"missing", dc.missing}, {"duplicates", dc.duplicates}}},
                         {"pickup", {{"jobs", pk.jobs}, {"completed", pk.completed},
                                     {"missing", pk.missing}, {"duplicates", pk.duplicates}}}};
    r["missing"] = dc.missing + pk.missing;
    r["duplicates"] = dc.duplicates + pk.duplicates;
    bad += dc.missing + pk.missing + dc.duplicates + pk.duplicates;

    if (!o.skip_rss) {
      note("rss: one worker with 64 slots, idle then 64 jobs in flight");
      r["worker_rss"] = worker_rss(o);
    }

    if (o.scaling) {
      note("scaling: claim latency and drain rate, empty vs loaded");
      r["scaling"] = run_scaling(o, bad);
    }

    if (!o.keep) {
      pg::SyncConnection k(o.db);
      k.exec("DELETE FROM bgexec.job WHERE queue LIKE $1", {tag() + "-%"});
      k.exec("DELETE FROM bgexec.worker WHERE id LIKE $1", {tag() + "-%"});
    }
  } catch (const pg::Error& e) {
    std::cerr << "bgexec bench: database error: " << e.what() << " (SQLSTATE " << e.sqlstate() << ")\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "bgexec bench: " << e.what() << "\n";
    return 3;
  }

  // A table that could not be written whole is exit 6 (141 to a closed
  // pipe), as for every command: its printf calls failed unnoticed, exit 0.
  const int printed = core::print("bgexec bench", results_table(r), bad == 0 ? 0 : 1);
  if (!o.json_path.empty()) {
    std::ofstream f(o.json_path);
    f << r.dump(2) << "\n";
    if (!f) {
      std::cerr << "bgexec bench: cannot write " << o.json_path << "\n";
      return 3;
    }
  }
  return printed;
}

}  // namespace bgexec::bench
