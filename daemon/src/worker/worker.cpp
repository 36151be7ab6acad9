// `bgexec worker` components (see worker.hpp).
#include "worker/worker.hpp"

#include "core/backoff.hpp"
#include "core/duration.hpp"
#include "core/logfmt.hpp"
#include "core/read_capped.hpp"
#include "core/sqlstate.hpp"
#include "core/utf8.hpp"
#include "proc/child.hpp"
#include "proc/guard.hpp"
#include "proc/procfs.hpp"
#include "util/hangup.hpp"
#include "util/scope_exit.hpp"
#include "worker/http_call.hpp"
#include "worker/job.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <climits>
#include <cstdlib>

extern char** environ;

namespace bgexec::worker {

using nlohmann::json;

namespace {

constexpr std::size_t max_secret_bytes = 64 * 1024;  // a --secrets-dir file
// The reconnect backoff: 0.1 s, doubling to 5 s, each wait +-25% (a fleet
// that lost its server together does not come back in lockstep).
constexpr auto backoff_first = std::chrono::milliseconds(100);
constexpr auto backoff_cap = std::chrono::seconds(5);
constexpr double backoff_jitter = 0.25;
// A claim from a queue with caps refused for its transaction's isolation
// level (feature_not_supported): the session's default, read from the
// login role's settings when it logged in.  The session is closed, so the
// next claim logs in again and reads them: an `ALTER ROLE … SET
// default_transaction_isolation = 'read committed'` mends a running worker.
constexpr std::string_view isolation_refused = "0A000";

// Whether a failed connect's text is the server refusing this login for
// good, as configured (authentication, pg_hba.conf, a role or database
// that does not exist, CONNECT denied), rather than an outage (the server
// down, starting, full).  libpq gives a failed connect no SQLSTATE of the
// server's: its FATAL's text is all there is.
bool login_refused(std::string_view error) {
  if (error.find("FATAL:") == std::string_view::npos) return false;
  for (std::string_view said : {"authentication failed", "no pg_hba.conf entry", "does not exist",
                                "permission denied for database", "is not permitted to log in"})
    if (error.find(said) != std::string_view::npos) return true;
  return false;
}
core::Backoff reconnect_backoff() { return core::Backoff(backoff_first, backoff_cap, backoff_jitter); }

std::string host_name() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return host;
}

// Whether no process of this pid runs on this host (none, or a zombie
// nobody has reaped yet).
bool process_gone(long pid) {
  if (pid <= 0 || pid == ::getpid()) return false;
  proc::ProcStat st;
  if (!proc::proc_stat(static_cast<pid_t>(pid), st)) return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
  return st.state == 'Z';
}

// claim's columns, as claim_on and start_claimed read them (await_claim
// returns the same, then its flags woken and stop, and how long ago, at the
// row's output, the claim was made: it may be up to the wait's timeout
// after the statement was sent).
#define BGEXEC_CLAIM_COLUMNS                                                                  \
  "c.job_id, c.lease, c.queue, c.kind, c.owner, c.payload, c.attempt, c.max_attempts,"        \
  " extract(epoch FROM c.deadline - c.lease_expires_at) AS deadline_after_lease,"             \
  " c.completed_steps, c.completed_stdout, c.started_seq"
constexpr const char* claim_sql =
    "SELECT " BGEXEC_CLAIM_COLUMNS " FROM bgexec.claim($1, $2::text[], $3, $4::interval, $5::jsonb) c";
constexpr const char* await_claim_sql =
    "SELECT " BGEXEC_CLAIM_COLUMNS ", c.woken, c.stop,"
    " extract(epoch FROM pg_catalog.clock_timestamp() - (c.lease_expires_at - $5::interval)) AS claimed_ago"
    " FROM bgexec.await_claim($1, $2::text[], $3, $4::interval, $5::interval, $6, $7, $8::jsonb) c";
constexpr int col_woken = 12, col_stop = 13, col_claimed_ago = 14;
// The heartbeat, with a row 'holder' when the worker row is another
// process's (see heartbeater).
constexpr const char* heartbeat_sql =
    "SELECT lease, action, NULL::text FROM bgexec.heartbeat($1, $2::bigint[], $3::interval, $6::jsonb)"
    " UNION ALL SELECT NULL, 'holder', pg_catalog.format('pid %s on host %s', pid, host)"
    " FROM bgexec.worker_stats"
    " WHERE id = $1 AND (pid IS DISTINCT FROM $4::int OR host IS DISTINCT FROM $5)";

// A worker's own sessions: control, finish, heartbeat and listen (a sql
// step opens its own, --sql-steps at most); without the listen session it
// still claims, by polling on the control session.
constexpr int sessions_needed = 4;
constexpr int sessions_to_claim = 3;
const std::string room_gate = "connection limit";  // the claim gate's name for it
constexpr auto room_recheck = std::chrono::seconds(5);
// The connection limits on the worker's login (check_room): its role's
// CONNECTION LIMIT and its database's (NULL: none, or a superuser, whom
// neither binds), and the slots max_connections leaves it (less
// superuser_reserved_connections, and reserved_connections from PG 16, for
// a role that is not a superuser).  A row of the catalogs each: cheap.
constexpr const char* room_sql =
    "SELECT CASE WHEN r.rolsuper OR r.rolconnlimit < 0 THEN NULL ELSE r.rolconnlimit END,"
    " CASE WHEN r.rolsuper OR d.datconnlimit < 0 THEN NULL ELSE d.datconnlimit END,"
    " pg_catalog.current_setting('max_connections')::int - CASE WHEN r.rolsuper THEN 0 ELSE"
    " pg_catalog.current_setting('superuser_reserved_connections')::int + coalesce(NULLIF("
    "pg_catalog.current_setting('reserved_connections', true), '')::int, 0) END,"
    " r.rolname::text, d.datname::text"
    " FROM pg_catalog.pg_roles r, pg_catalog.pg_database d"
    " WHERE r.rolname = current_user AND d.datname = pg_catalog.current_database()";
constexpr std::size_t unfinished_kept = 4096;

// Postgres array literal of strings: {"a","b"}.
std::string text_array(const std::vector<std::string>& v) {
  std::string out = "{";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += '"';
    for (char ch : v[i]) {
      if (ch == '"' || ch == '\\') out += '\\';
      out += ch;
    }
    out += '"';
  }
  return out + "}";
}

// Postgres array literal of bigints: {1,2}.
std::string bigint_array(const std::vector<std::int64_t>& v) {
  std::string out = "{";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "}";
}

// Logs and ignores exceptions of detached component coroutines.
auto log_exit(const char* component) {
  return [component](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      core::log("error", "component ended", {{"component", component}, {"error", ex.what()}});
    }
  };
}

}  // namespace

Worker::Worker(asio::io_context& io, core::WorkerConfig cfg)
    : io_(io), cfg_(std::move(cfg)), ctl_(io.get_executor(), cfg_.db, "control"),
      fin_(io.get_executor(), cfg_.db, "finish"), hb_(io.get_executor(), cfg_.db, "heartbeat"), listen_(io.get_executor(), cfg_.db, "listen"),
      signals_(io, SIGTERM, SIGINT), fetch_wake_(io.get_executor()), fetch_idle_(io.get_executor()), hb_wake_(io.get_executor()), drained_(io.get_executor()),
      fin_down_(io.get_executor()), gate_up_(io.get_executor()), spawn_down_(io.get_executor()),
      beat_ended_(io.get_executor()), room_check_(io.get_executor()), claim_ended_(io, asio::steady_timer::time_point::max()),
      completer_(std::make_unique<Completer>(
          *this, [this] { return backlog_ || jobs_.size() > completer_->waiting(); },
          [this] { fetch_wake_.notify(); })),
      // Unset (0) only where main() did not resolve them: a test's Worker.
      sql_sessions_(io.get_executor(), cfg_.sql_steps > 0 ? cfg_.sql_steps : cfg_.concurrency),
      step_processes_(io.get_executor(), cfg_.step_processes > 0 ? cfg_.step_processes : 1024) {
  add_hangup(signals_);  // a closed terminal drains as SIGTERM does
  // A pool smaller than --concurrency bounds the claims (step_room); a
  // slot it gives back is a reason to claim, as a job's end is.
  for (Slots* pool : {&sql_sessions_, &step_processes_})
    if (pool->limit() < cfg_.concurrency) {
      ++tight_pools_;
      pool->released = [this] {
        if (free_slots() > 0) pool_freed();
      };
    }
  // A call the database leaves unanswered (a backend stopped or stuck, the
  // server's host alive but the server not) is dropped and made again on a
  // fresh connection.  The heartbeat's bound is a quarter of the lease, so
  // its retry renews the leases before lease_guard gives them up (it never
  // waits for a lock).  The finish's too, so its retries fit in the lease
  // they are fenced by, but at least 2 s: finish_many waits up to 500 ms
  // for a job row another transaction holds before it gives up on that row
  // (its lock_timeout), an answer that must not be cut short.  The others
  // wait longer (await_claim waits up to a second by design, append_events
  // for a row lock as finish_many does).
  hb_.set_call_timeout(seconds(cfg_.lease_s / 4));
  fin_.set_call_timeout(seconds(std::max(cfg_.lease_s / 4, 2.0)));
  ctl_.set_call_timeout(seconds(std::max(cfg_.lease_s, 5.0)));
  listen_.set_call_timeout(seconds(std::max(cfg_.lease_s, 5.0)));
  // Their sessions hold nothing but prepared statements: one the server
  // ended while idle (idle_session_timeout) is opened again before the next
  // call.  Not the notifier's, which may LISTEN.
  for (auto* c : {&hb_, &fin_, &ctl_}) c->set_reopen_when_ended_idle(true);
  // A statement_timeout (lock_timeout, idle_in_transaction_session_timeout)
  // of the worker's role, its database or the server's configuration is
  // not theirs: their calls are bounded above, and a finish of a large
  // result cancelled by one was made again for as long as the lease lasted.
  for (auto* c : {&hb_, &fin_, &ctl_, &listen_}) c->set_own_timeouts(true);
  // Each is closed after a call of more than 8 MiB (a claim of a resumed
  // job's large outputs, a large append or finish), its buffers given back;
  // the notifier's too, whose large calls (await_claim) are never made
  // while it LISTENs.
  for (auto* c : {&hb_, &fin_, &ctl_, &listen_}) c->set_recycle_after_large_calls(true);
  // Step processes get the worker's environment but for its secrets and
  // its own database credentials: an action's program that runs psql, its
  // PGHOST set by a tenant's step env, sent the worker's PGPASSWORD to the
  // tenant's server.
  for (char** e = environ; e && *e; ++e) {
    std::string_view var(*e);
    if (var.rfind("BGEXEC_SECRET_", 0) == 0 || var.rfind("BGEXEC_DB=", 0) == 0 ||
        var.rfind("PGPASSWORD=", 0) == 0)
      continue;
    child_env_.emplace_back(var);
  }
}

Worker::~Worker() {
  // Not after: a step's ticket given back as its frame is destroyed with
  // the io_context (a job abandoned at the end of a drain).
  sql_sessions_.released = nullptr;
  step_processes_.released = nullptr;
}

std::optional<std::string> Worker::secret(const std::string& name) const {
  if (name.empty() || name.find_first_of("/\\") != std::string::npos || name[0] == '.') return std::nullopt;
  if (const char* v = std::getenv(("BGEXEC_SECRET_" + name).c_str()); v && *v) return std::string(v);
  if (cfg_.secrets_dir.empty()) return std::nullopt;
  // A small regular file, read on the event loop.  Opened without
  // blocking and refused unless regular: a FIFO in the directory held the
  // loop in open() (no heartbeats: every job of the worker lost its
  // lease), and /dev/zero linked there would have been read for ever.
  const int fd = ::open((cfg_.secrets_dir + "/" + name).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return std::nullopt;
  auto r = core::read_capped(fd, max_secret_bytes, /*regular_only=*/true);
  ::close(fd);
  if (r.status != core::CappedRead::Status::ok) {
    core::log("warn", "secret file not read: not a regular file of at most 64 KiB",
              {{"secret", name}, {"dir", cfg_.secrets_dir}});
    return std::nullopt;
  }
  std::string v = std::move(r.text);
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
  return v;
}

asio::awaitable<pg::Result> Worker::ctl_exec(const std::string& sql, const pg::Params& params, Until until,
                                             bool* retried) {
  co_return co_await exec_on(ctl_, sql, params, until, retried);
}

asio::awaitable<pg::Result> Worker::fin_exec(const std::string& sql, const pg::Params& params, Until until,
                                             bool* retried) {
  // Not 55P03: finish_many gives up on a job row another transaction holds,
  // and the completer writes the batch's other items without it.
  co_return co_await exec_on(fin_, sql, params, until, retried, /*retry_locked=*/false);
}

asio::awaitable<pg::Result> Worker::exec_on(pg::Connection& conn, const std::string& sql,
                                            const pg::Params& params, const Until& until, bool* retried,
                                            bool retry_locked) {
  // The finish connection's state gates claims: it works when the server
  // answered, whatever the answer.
  const bool gates = &conn == &fin_;
  // `until` moves (a job's lease, renewed by each heartbeat, is shorter
  // than the backoff's cap): the wait for a retry ends by it, and the call
  // gives up only once it has passed.  Given up when the next retry would
  // come after it (a time copied at the call), a finish stopped at the
  // lease of the claim while heartbeats went on renewing it.
  auto passed = [&until] { return until && Clock::now() >= until(); };
  auto backoff = reconnect_backoff();
  // In the session's count of calls waiting while it retries (RetryLog).
  struct Waiting {
    core::RetryLog& log;
    const std::string& session;
    bool in = false;
    void enter() {
      if (!std::exchange(in, true)) log.waiting(session, 1);
    }
    ~Waiting() {
      if (in) log.waiting(session, -1);
    }
  } waiting{retry_log_, conn.name()};
  for (bool first = true;; first = false) {
    if (!first && retried) *retried = true;
    std::exception_ptr failed;
    try {
      auto r = co_await conn.query(sql, params, /*prepare=*/true);  // fixed texts, hot path
      if (gates) write_path(conn.name(), std::nullopt);
      if (retry_log_.any_down())
        if (auto n = retry_log_.recovered(conn.name()); n > 0)
          core::log("info", "database calls succeed again", {{"session", conn.name()}, {"failed_calls", std::to_string(n)}});
      co_return r;
    } catch (const pg::Error& e) {
      auto cls = e.classify();
      if (gates) write_path(conn.name(), cls == core::ErrorClass::connection ? std::optional<std::string>(e.what())
                                                                            : std::nullopt);
      // A statement the server cancelled (a DBA's pg_cancel_backend, a
      // statement_timeout on the worker's role) or refused for a resource
      // (class 53) is made again as after a lost connection: given up, a
      // finish "completed" cancelled so became the job's failure.
      if (cls != core::ErrorClass::connection && cls != core::ErrorClass::retry && !core::transient(e.sqlstate()))
        throw;
      if (!retry_locked && e.sqlstate() == "55P03") throw;
      if (stopping_ || passed()) throw;
      // One line per session and SQLSTATE every 10 s, with the calls
      // waiting: each job in flight wrote its own every 5 s.
      waiting.enter();
      const auto line = retry_log_.failed(conn.name(), e.sqlstate(), Clock::now());
      if (line.write || core::level_enabled("debug"))
        core::log(line.write ? "warn" : "debug", "database call failed, retrying",
                  {{"error", e.what()}, {"sqlstate", e.sqlstate()}, {"backoff_s", backoff.seconds()},
                   {"session", conn.name()}, {"calls_waiting", std::to_string(line.waiting)},
                   {"held_back", std::to_string(line.held_back)}});
      failed = std::current_exception();
    }
    auto pause = backoff.next();
    if (until) {
      auto at = until(), now = Clock::now();
      pause = at > now ? std::min(pause, at - now) : Clock::duration::zero();
    }
    co_await sleep_for(pause);
    if (stopping_ || passed()) std::rethrow_exception(failed);
  }
}

// -------------------------------------------------------------- notifier

// Learns of new jobs and stop requests.  With bgexec preloaded it waits in
// bgexec.await_claim on its own connection, a second at a time: a commit
// that makes jobs runnable wakes one waiting worker per job (as many as
// their free slots need), where a NOTIFY wakes every listening backend of
// the database (extension/wake.c); the woken backend claims them itself,
// so the jobs arrive with the wake.  It also runs the poll's claims.  A
// job wake it could not claim for (no slot it may fill) goes to the
// fetcher, or is handed on to another worker by the next call when every
// slot is taken (pass_on).  A stop wake runs the heartbeat at once, which
// names the jobs to stop.  Without the preloaded module (55000), or
// against an older extension (42883), it LISTENs to bgexec_jobs and
// bgexec_stop instead.
asio::awaitable<void> Worker::notifier() {
  auto backoff = reconnect_backoff();
  bool listen = false, said_unavailable = false;
  // Once either way is in place: anything submitted while we were away is
  // found by a claim now.
  // A recheck that finds await_claim still unavailable LISTENs again
  // quietly: the line is logged once a stretch, not every minute.
  bool rechecked = false;
  // Back in the wait the claim gate cancelled (write_path): it never
  // stopped listening, so the line is not logged again.
  bool resumed = false;
  auto listening = [this, &said_unavailable, &rechecked, &resumed](core::LogFields how) {
    bool via_await = false;
    for (auto& [k, v] : how) via_await = via_await || k == "via";
    if (via_await) said_unavailable = false;  // await_claim works (again)
    bool quiet = std::exchange(rechecked, false) && !via_await;
    if (std::exchange(resumed, false)) quiet = true;
    if (!quiet) core::log("info", "listening", std::move(how));
    next_poll_ = Clock::time_point{};
    fetch_wake_.notify();
    // A stop requested while the notifier was away woke no one: the
    // heartbeat, which reads stop_requested_at, goes now, not at its next
    // interval (up to a third of the lease later).
    hb_wake_.notify();
  };
  recheck_timer_ = std::make_unique<asio::steady_timer>(io_);
  // Since when the notifier has been up without an error that backs off:
  // the backoff starts again after a stretch that long, however the stretch
  // ended (a claim gate's cancel and a recheck go round again without a
  // sleep), not at every start: an error that comes at once each time (a
  // claim refused, say) backs off to the cap instead of retrying ten times
  // a second.  Reckoned from each pass's start, a stretch of minutes cut
  // by such a pass kept the backoff at its cap: one later loss cost 5 s.
  auto calm_since = Clock::now();
  // After an error: the finish and heartbeat sessions are tried (and opened
  // again, when the server ended them while idle) before the listen
  // session is: a restart ends them all, and an idle one's end was noticed
  // only at its next call, up to a minute later, while this one claimed
  // jobs that could not be finished.
  bool check_reports = false;
  while (!stopping_) {
    std::optional<std::string> refused;  // the listen session refused (53300)
    if (room_short_ && !draining_) {
      co_await wait_for_room();
      continue;
    }
    if (!gate_.open() && !draining_) {
      co_await hold_off_claiming();
      check_reports = false;  // finish_prober opened them
      continue;
    }
    if (std::exchange(check_reports, false) && !draining_) {
      co_await check_report_sessions();
      continue;  // to the gate's check
    }
    try {
      if (listen) {
        // Each minute in LISTEN, await_claim is tried again.
        recheck_timer_->expires_after(std::chrono::seconds(60));
        recheck_timer_->async_wait([this](const boost::system::error_code& ec) {
          if (ec || stopping_) return;
          rechecking_ = true;
          listen_.close();  // the wait for notifications throws
        });
        co_await listen_for_work(listening);
      } else {
        co_await await_work(listening);
      }
      continue;  // (returns only as the claim gate closes)
    } catch (const pg::Error& e) {
      recheck_timer_->cancel();
      // The fetcher polls again while the notifier is away.
      await_mode_ = false;
      fetch_wake_.notify();
      if (stopping_) break;
      if (e.sqlstate() == "57014") {
        if (draining_) continue;  // cancelled by begin_drain
        if (std::exchange(gate_cancel_, false)) {
          resumed = true;  // by write_path, as the claim gate closed: waits again at once
          continue;
        }
      }
      if (std::exchange(rechecking_, false)) {
        listen = false;
        rechecked = true;
        continue;
      }
      if (!listen && (e.sqlstate() == "55000" || e.sqlstate() == "42883")) {
        // Said once a stretch: a recheck that finds it still unavailable is quiet.
        if (!std::exchange(said_unavailable, true))
          core::log("info", "await_claim unavailable, listening instead", {{"error", e.what()}});
        listen = true;
        continue;
      }
      // Closed by write_path as the claim gate closed, or by check_room.
      if ((!gate_.open() || room_short_) && !draining_) continue;
      said_unavailable = false;
      if (e.sqlstate() == isolation_refused) listen_.close();
      if (e.sqlstate() == "53300" && !draining_) {
        refused = e.what();  // (below: no co_await in a handler)
      } else {
        check_reports = e.classify() == core::ErrorClass::connection;
        // (Here, the one way to the sleep: the waits above end only by an
        // error; reset before the line names the wait.)
        if (Clock::now() - calm_since > 2 * backoff_cap) backoff.reset();
        core::log("warn", "notifier disconnected", {{"error", e.what()}, {"backoff_s", backoff.seconds()}});
      }
    }
    if (refused) {
      // A limit that can never fit the worker's sessions: said once, and
      // the worker settles under it (wait_for_room), where giving its
      // sessions back and taking them again flapped each backoff.
      co_await check_room(/*may_connect=*/false);
      if (room_short_) continue;
      if (jobs_.empty() && fetch_asked_ == 0 && !draining_) {
        // No slot for the listen session: a worker that cannot claim holds
        // none, so the finish and heartbeat sessions go back too (control
        // unless an unclaim waits for it), and finish_prober opens them
        // again (jittered) before this retries.
        core::log("warn", "not claiming: the server refuses more sessions (53300); giving back ours",
                  {{"error", *refused}, {"hint", "each worker needs 4 + --sql-steps sessions: "
                                                 "the fleet's sum must fit in max_connections"}});
        fin_.close();
        hb_.close();
        if (!unclaim_) ctl_.close();
        write_path(fin_.name(), *refused);
        continue;
      }
      check_reports = true;
      if (Clock::now() - calm_since > 2 * backoff_cap) backoff.reset();
      core::log("warn", "notifier disconnected", {{"error", *refused}, {"backoff_s", backoff.seconds()}});
    }
    co_await sleep_for(backoff.next());
    calm_since = Clock::now();
  }
}

// While the claim gate is closed: the sessions for claiming are given back
// (listen; control too while no job is in flight, none of its claims or
// unclaims pending) until it reopens.
asio::awaitable<void> Worker::hold_off_claiming() {
  recheck_timer_->cancel();
  await_mode_ = false;
  listen_.close();
  while (!gate_.open() && !room_short_ && !stopping_ && !draining_) {
    if (jobs_.empty() && fetch_asked_ == 0 && !unclaim_) ctl_.close();
    co_await gate_up_.wait_for(seconds(1));
  }
}

// A call on each of the finish and heartbeat sessions, which opens either
// again when the server ended it; one that fails closes the claim gate.
asio::awaitable<void> Worker::check_report_sessions() {
  const std::array<pg::Connection*, 2> conns = {&fin_, &hb_};
  for (auto* conn : conns) {
    std::optional<std::string> error;
    try {
      co_await conn->query("SELECT 1");
    } catch (const pg::Error& e) {
      if (e.classify() == core::ErrorClass::connection) error = e.what();
    }
    if (error) {
      write_path(conn->name(), error);
      co_return;
    }
    write_path(conn->name(), std::nullopt);
  }
}

asio::awaitable<void> Worker::check_room(bool may_connect) {
  // One at a time: a caller that comes while another reads them waits for
  // that answer (the notifier refused its listen session while the
  // fetcher's check ran gave its sessions back, the check's among them).
  const bool joined = co_await room_check_.join();
  if (joined) co_return;
  pg::Connection* conn = nullptr;
  const std::array<pg::Connection*, 3> conns = {&hb_, &fin_, &ctl_};
  for (auto* c : conns)
    if (!conn && c->connected()) conn = c;
  if (!conn && may_connect) conn = &hb_;
  if (!conn) co_return;
  // Ended however the query ends: an exception other than pg::Error left
  // the check in flight for good, and every later caller waited for it.
  SingleFlight::Run check(room_check_);
  std::optional<pg::Result> r;
  try {
    r = co_await conn->query(room_sql);
  } catch (const pg::Error& e) {
    core::log("debug", "connection limits not read", {{"error", e.what()}});
  }
  check.end();
  if (!r || r->rows() != 1) co_return;
  int limit = -1;
  std::string of;
  auto take = [&](int col, std::string what) {
    auto v = r->get(0, col);
    if (!v) return;
    int n = std::atoi(v->c_str());
    if (limit < 0 || n < limit) {
      limit = std::max(n, 0);
      of = std::move(what);
    }
  };
  take(0, "role " + r->get(0, 3).value_or("") + "'s CONNECTION LIMIT");
  take(1, "database " + r->get(0, 4).value_or("") + "'s CONNECTION LIMIT");
  take(2, "max_connections less the reserved slots");
  const bool was_short = room_short_, was_open = gate_.open();
  const int was = room_;
  room_ = limit;
  room_short_ = limit >= 0 && limit < sessions_needed;
  const bool shut = room_short_ && limit < sessions_to_claim;
  using Change = core::ClaimGate::Change;
  if (room_short_ && (!was_short || was != limit)) {
    const int sql_steps = cfg_.sql_steps > 0 ? cfg_.sql_steps : cfg_.concurrency;
    const std::string hint = "each worker needs " + std::to_string(sessions_needed) +
                             " sessions (control, finish, heartbeat, listen), and its sql steps " +
                             std::to_string(sql_steps) + " more at most (--sql-steps)";
    if (shut) {
      core::log("error", "not claiming: the connection limit is below the sessions a worker needs to claim",
                {{"limit", std::to_string(limit)}, {"limit_of", of},
                 {"needed", std::to_string(sessions_needed)}, {"hint", hint}});
    } else {
      core::log("warn", "connection limit below the sessions a worker needs: claiming by polling, "
                        "with no session to wait for work in",
                {{"limit", std::to_string(limit)}, {"limit_of", of},
                 {"needed", std::to_string(sessions_needed)}, {"poll_s", core::seconds_text(cfg_.poll_s)},
                 {"hint", hint}});
    }
  }
  if (shut) {
    gate_.down(room_gate, of);
  } else if (gate_.up(room_gate) == Change::reopened) {
    core::log("info", "claiming again", {{"worker_id", cfg_.id}});
  }
  if (was_short && !room_short_)
    core::log("info", "connection limit raised: the worker has room for its sessions again",
              {{"limit", limit < 0 ? std::string("none") : std::to_string(limit)}});
  if (room_short_ && !was_short) {
    // Out of the wait (as write_path ends it): the notifier gives the
    // listen session back, and the fetcher polls.
    if (await_asked_ > 0) {
      if (!std::exchange(gate_cancel_, true)) listen_.cancel();
    } else {
      listen_.close();
    }
  }
  if (was_short != room_short_ || was_open != gate_.open()) {
    next_poll_ = Clock::time_point{};
    fetch_wake_.notify();
    gate_up_.notify();
  }
}

// Under a connection limit that cannot fit the worker's sessions: no listen
// session (the fetcher polls, on the control session); the control session
// too while the worker claims nothing and holds no job; the limit read
// again every 5 s.
asio::awaitable<void> Worker::wait_for_room() {
  recheck_timer_->cancel();
  await_mode_ = false;
  listen_.close();
  fetch_wake_.notify();
  while (room_short_ && !stopping_ && !draining_) {
    if (!gate_.open() && jobs_.empty() && fetch_asked_ == 0 && !unclaim_) ctl_.close();
    co_await gate_up_.wait_for(room_recheck);
    if (stopping_ || draining_) break;
    co_await check_room(/*may_connect=*/true);
  }
}

asio::awaitable<void> Worker::beat_while_waiting() {
  const double interval = std::max(0.1, cfg_.lease_s / 3);
  bool missing = false;
  try {
    pg::Params arg1_ = {cfg_.id, "{}", core::to_pg_interval(cfg_.lease_s), std::to_string(::getpid()), host_name(),
                        process_};
    auto r = co_await hb_.query(heartbeat_sql, std::move(arg1_), /*prepare=*/true);
    missing = read_heartbeat(r, nullptr);
  } catch (const pg::Error& e) {
    if (e.sqlstate() == "55006") id_lost(e.fields().detail);
    else
      core::log("debug", "heartbeat while waiting for sessions failed",
                {{"error", e.what()}, {"interval_s", core::seconds_text(interval)}});
  }
  if (missing) {
    try {
      co_await register_self(hb_);
    } catch (const pg::Error& e) {
      core::log("debug", "register while waiting for sessions failed", {{"error", e.what()}});
    }
  }
  // Given back, unless finish_prober found both sessions meanwhile.
  if ((gate_.is_down(fin_.name()) || gate_.is_down(hb_.name())) && jobs_.empty()) hb_.close();
}

bool Worker::read_heartbeat(const pg::Result& r, std::map<std::int64_t, std::string>* actions) {
  bool unregistered = false;
  std::optional<std::string> holder;
  for (int i = 0; i < r.rows(); ++i) {
    if (auto lease = r.get(i, 0)) {
      if (actions) (*actions)[std::stoll(*lease)] = r.get(i, 1).value_or("lost");
      continue;
    }
    unregistered = unregistered || r.get(i, 1) == "register";
    if (r.get(i, 1) == "holder") holder = r.get(i, 2).value_or("");
  }
  if (holder) id_lost(*holder);
  if (!unregistered || holder) return false;
  core::log("warn", "worker row missing, registering again", {{"worker_id", cfg_.id}});
  return true;
}

asio::awaitable<void> Worker::await_work(std::function<void(core::LogFields)> listening) {
  bool pass_on = false;
  for (bool first = true;; first = false) {
    // The wait counts on the free slots (wakes pick it for as many jobs),
    // and claims into them, except: the first call only registers (timeout
    // 0: wakes from then on are kept for the next call, so the worker is
    // listening once it returns); during a backlog (the fetcher claims as
    // slots free) and until a lost claim is given back it claims nothing,
    // but is still woken, so the jobs that arrive meanwhile are claimed
    // (by the fetcher) when they do; draining, it counts on nothing.
    auto claims_none = [&] { return first || backlog_ || unclaim_ || draining_; };
    // Not while the fetcher's claim is in flight, when it would claim: that
    // claim holds the slots it asked for, and a wait that left them out
    // would not be picked for them until its timeout.  The claim is short.
    while (fetch_asked_ > 0 && !claims_none()) co_await fetch_idle_.wait();
    // Counted on: the slots free, those of the fetcher's claim in flight
    // too (a wake it leaves nothing for goes back to the fetcher); a wait
    // counting on none is passed by, so it is short.
    int counts_on = first || draining_ ? 0 : std::max(0, free_slots());
    int free = claims_none() ? 0 : std::max(0, counts_on - fetch_asked_);
    await_counts_on_ = counts_on;
    auto sent = Clock::now();
    bool poll = free > 0 && (sent >= next_poll_ || freed_while_deaf_);
    if (poll) freed_while_deaf_ = false;
    // Until the next poll, a second at most; a fifth counting on nothing.
    double wait = first ? 0 : counts_on == 0 && !draining_ ? 0.2 : 1;
    if (free > 0 && !poll) wait = std::min(1.0, std::chrono::duration<double>(next_poll_ - sent).count());
    auto before = max_lease_;
    int n = 0;
    bool woken = false, stop = false;
    await_asked_ = free;
    // Cleared however the call ends: an exception other than pg::Error
    // (one thrown reading the reply, say) left it set, and give_back and
    // the drain waited for a claim that had ended.  run() waits for no
    // claim of ours in flight.
    ScopeExit asked([this] {
      await_asked_ = 0;
      claim_ended_.cancel();
      if (draining_) drained_.notify();
    });
    try {
      if (poll) {
        next_poll_ = sent + seconds(cfg_.poll_s);
        n = co_await claim_on(listen_, free);
      } else {
        pg::Params arg1_ = {cfg_.id, text_array(cfg_.queues), std::to_string(counts_on), core::to_pg_interval(wait),
                            core::to_pg_interval(cfg_.lease_s), pass_on ? "true" : "false", std::to_string(free),
                            process_};
        auto r = co_await listen_.query(await_claim_sql, std::move(arg1_), /*prepare=*/true);
        n = start_claimed(r, sent, col_claimed_ago);
        for (int i = 0; i < r.rows(); ++i) {
          woken = woken || r.get(i, col_woken) == "t";
          stop = stop || r.get(i, col_stop) == "t";
        }
      }
    } catch (const pg::Error& e) {
      asked.run();
      // (Not a claim that never reached the server: refused at connect,
      // 53300 say, it claimed nothing.)
      if (free > 0 && e.classify() == core::ErrorClass::connection && !e.unsent()) lost_claim(before);
      if (e.sqlstate() == "55006") id_lost(e.fields().detail);
      throw;
    }
    asked.run();
    if (first) {
      await_mode_ = true;
      if (!draining_) listening({{"via", "await_claim"}});  // (again after begin_drain's cancel)
    }
    if (n > 0) core::log("debug", "claim", {{"jobs", std::to_string(n)}, {"asked", std::to_string(free)},
                                            {"why", poll ? "poll" : "wake"}});
    // All it asked for: there may be more waiting, which the fetcher claims.
    if (free > 0 && n == free && !draining_) {
      set_backlog(true);
      fetch_wake_.notify();
    }
    // Nothing, long before the wait was up: a statement_timeout under
    // 100 ms cut the wait to nothing.  Wait out the rest here (wakes are
    // kept meanwhile).
    if (!poll && !first && wait >= 0.1 && !woken && !stop && Clock::now() - sent < seconds(0.1))
      co_await sleep_for(sent + seconds(wait) - Clock::now());
    // Woken for jobs it did not claim: the fetcher claims them at once, or,
    // when every slot is taken, the next call hands the wake on.
    pass_on = false;
    if (woken && n == 0) {
      if (free_slots() > 0) {
        picked_ = true;
        fetch_wake_.notify();
      } else {
        pass_on = true;
      }
    }
    if (stop) hb_wake_.notify();
    if (unclaim_) fetch_wake_.notify();  // unclaim waits for no claim of ours in flight
    if ((!gate_.open() || room_short_) && !draining_) co_return;  // the notifier gives the session back
    // Let the fetcher send its claim before the next wait does.
    if (picked_ || backlog_) co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  }
}

asio::awaitable<void> Worker::listen_for_work(std::function<void(core::LogFields)> listening) {
  co_await listen_.query("LISTEN bgexec_jobs");
  co_await listen_.query("LISTEN bgexec_stop");
  listening({{"channels", "bgexec_jobs,bgexec_stop"}});
  for (;;) {
    for (auto& n : co_await listen_.wait_notifications()) {
      if (n.channel == "bgexec_jobs") {
        if (std::find(cfg_.queues.begin(), cfg_.queues.end(), n.payload) != cfg_.queues.end()) {
          notified_ = true;
          fetch_wake_.notify();
        }
      } else if (n.channel == "bgexec_stop") {
        // A hint only: any role that can connect may NOTIFY on any channel
        // (PostgreSQL has no privileges on them), and a bare
        // `NOTIFY bgexec_stop, '<id>'` from a role with no access to bgexec
        // cancelled another tenant's running job.  The heartbeat, sent now,
        // reads the job's stop_requested_at and says `stop` when it is set,
        // as the await_claim wake does.
        std::int64_t id = std::strtoll(n.payload.c_str(), nullptr, 10);
        if (jobs_.count(id)) hb_wake_.notify();
      }
    }
  }
}

// -------------------------------------------------------------- fetcher

// Every claim that takes what is due (the fetcher's, the notifier's poll)
// comes here, under await_claim and LISTEN alike; await_claim's own claims
// take only what a wake was for, so they tell nothing of what else is due.
asio::awaitable<int> Worker::claim_on(pg::Connection& conn, int free) {
  auto sent = Clock::now();
  // --exit-when-idle: no job held (its finish written: a job stays in jobs_
  // until then) when the claim was sent and when it returned nothing, so no
  // job of ours that ended meanwhile (a capped queue's slot) went unseen.
  const bool idle_at_send = jobs_.empty();
  pg::Params arg1_ = {cfg_.id, text_array(cfg_.queues), std::to_string(free), core::to_pg_interval(cfg_.lease_s),
                      process_};
  auto r = co_await conn.query(claim_sql, std::move(arg1_), /*prepare=*/true);
  int n = start_claimed(r, sent);
  if (cfg_.exit_when_idle && n == 0 && free > 0 && idle_at_send && jobs_.empty() && !unclaim_ && !draining_) {
    // A claim of the other connection's in flight is cancelled by the
    // drain, or its jobs are run first (begin_drain).
    core::log("info", "idle: nothing due, exiting", {{"worker_id", cfg_.id}, {"claimed", std::to_string(claimed_)}});
    begin_drain();
  }
  co_return n;
}

int Worker::start_claimed(const pg::Result& r, Clock::time_point sent, int claimed_ago_col) {
  auto arrived = Clock::now();
  int n = 0;
  for (int i = 0; i < r.rows(); ++i) {
    if (r.is_null(i, 0)) continue;  // await_claim's flags alone
    // The DB clock never leaves the database: deadline is turned into an
    // offset from lease_expires_at (= the DB's clock + lease_for at claim).
    // Both run locally from the claim, which await_claim may make up to its
    // timeout after the statement was sent: as near as the reply tells it
    // (its seconds since the claim), never before the send.  The reply's
    // way back makes that a little late: the lease takes 50 ms more off
    // (the guard ends a job at least 0.1 s before its lease runs out), the
    // deadline nothing (a job is not stopped before its timeout).
    auto claimed = sent;
    auto lease_from = sent;
    if (claimed_ago_col >= 0)
      if (auto ago = r.get(i, claimed_ago_col)) {
        auto at = arrived - seconds(std::max(0.0, std::strtod(ago->c_str(), nullptr)));
        claimed = std::max(sent, at);
        lease_from = std::max(sent, at - seconds(0.05));
      }
    Claim c;
    c.job_id = std::stoll(r.get(i, 0).value_or("0"));
    c.lease = std::stoll(r.get(i, 1).value_or("0"));
    c.queue = r.get(i, 2).value_or("");
    c.kind = r.get(i, 3).value_or("");
    c.owner = r.get(i, 4).value_or("");
    c.payload_text = r.get(i, 5).value_or("{}");
    c.attempt = std::stoi(r.get(i, 6).value_or("0"));
    c.max_attempts = std::stoi(r.get(i, 7).value_or("1"));
    c.lease_expiry = lease_from + seconds(cfg_.lease_s);
    if (auto d = r.get(i, 8)) c.deadline = claimed + seconds(cfg_.lease_s + std::strtod(d->c_str(), nullptr));
    c.completed_steps_text = r.get(i, 9).value_or("{}");
    c.completed_stdout_text = r.get(i, 10).value_or("{}");
    c.started_seq = std::stoi(r.get(i, 11).value_or("0"));
    max_lease_ = std::max(max_lease_, c.lease);
    start_job(std::make_shared<Job>(*this, std::move(c)));
    ++n;
    ++claimed_;
  }
  return n;
}

void Worker::lost_claim(std::int64_t before) {
  if (unclaim_) {
    unclaim_->after_lease = std::min(unclaim_->after_lease, before);
    return;
  }
  unclaim_ = Unclaim{before, Clock::now()};
  fetch_wake_.notify();
}

void Worker::start_job(std::shared_ptr<Job> job) {
  auto id = job->id();
  // The database gave out a job that an earlier run here still holds: that
  // run's lease is no longer current (a claim takes a job only once its
  // lease was taken back: expired, or unclaimed).  The earlier run is
  // abandoned, and this one starts once it is over, its steps stopped,
  // never beside it.  (Its entry was replaced, so the earlier run's end
  // must not remove this one's, which heartbeats and the lease guard go by.)
  std::shared_ptr<Job> earlier;
  if (auto it = jobs_.find(id); it != jobs_.end()) {
    earlier = it->second;
    core::log("warn", "job claimed again while an earlier run of it is here: that run is abandoned first",
              {{"job_id", std::to_string(id)}, {"earlier_lease", std::to_string(earlier->lease())},
               {"lease", std::to_string(job->lease())}});
    earlier->superseded();  // the new run's fence is the job's now
    earlier->abandon("claimed again under a new lease");
  }
  jobs_[id] = job;
  asio::co_spawn(io_, [job, earlier]() -> asio::awaitable<void> {
                   if (earlier) co_await earlier->wait_over();
                   co_await job->run();
                 },
                 [this, id, job](std::exception_ptr e) {
                   log_exit("job")(e);
                   // Abandoned without a finish, it may still be running
                   // under its lease in the database: unclaim must not take
                   // it for a job never received.
                   if (!job->finish_written()) {
                     if (unfinished_.size() >= unfinished_kept) unfinished_.erase(unfinished_.begin());
                     unfinished_.push_back(job->lease());
                   }
                   if (auto it = jobs_.find(id); it != jobs_.end() && it->second == job) jobs_.erase(it);
                   pool_freed();
                   if (draining_ && jobs_.empty()) drained_.notify();
                 });
}

int Worker::free_slots() const {
  if (!gate_.open() || giving_back_ > 0) return 0;
  int held = static_cast<int>(jobs_.size());
  int running = held - static_cast<int>(std::min(completer_->waiting(), jobs_.size()));
  int awaiting_cap = std::max(cfg_.concurrency, static_cast<int>(completer_->batch_max()));
  int free = std::min(cfg_.concurrency - running, cfg_.concurrency + awaiting_cap - held);
  if (tight_pools_ > 0) free = std::min(free, step_room());
  return free;
}

int Worker::step_room() const {
  int room = INT_MAX;
  for (int i = 0; i < 2; ++i) {
    const Slots& pool = i == 0 ? sql_sessions_ : step_processes_;
    if (pool.limit() >= cfg_.concurrency) continue;
    int r = pool.waiting() > 0 ? 0 : std::max(pool.limit() - pool.held(), past_free_[i]) - unstarted_;
    room = std::min(room, std::max(r, 0));
  }
  return room;
}

void Worker::job_began(const Slots* asked) {
  --unstarted_;
  if (tight_pools_ == 0) return;
  for (int i = 0; i < 2; ++i) {
    const Slots* pool = i == 0 ? &sql_sessions_ : &step_processes_;
    if (pool != asked) past_free_[i] = std::min(past_free_[i] * 2, cfg_.concurrency);
  }
  // It may leave room (step_room): claims go on, as when a job ends.
  if (free_slots() > 0) pool_freed();
}

void Worker::pool_short(const Slots& pool) {
  past_free_[&pool == &sql_sessions_ ? 0 : 1] = 1;
}

void Worker::pool_freed() {
  slot_freed_ = true;
  if (await_mode_ && await_counts_on_ == 0) freed_while_deaf_ = true;
  fetch_wake_.notify();
}

// A claim commits before its rows reach the worker: when the connection
// broke during one, its jobs may be running under this worker's id with
// leases it never received.  bgexec.unclaim gives them back to the queue,
// their attempt uncounted, once no claim of this worker is still running
// on the server (it returns NULL until then: tried again, at most twice a
// second, before the fetcher's claims) and none of ours is in flight on
// the other connection (its reply may be on the way: the caller waits for
// await_asked_ == 0, which the notifier keeps while unclaim_ is set).  The
// leases received since are the jobs held now and those that ended
// without a finish written.
asio::awaitable<void> Worker::try_unclaim() {
  std::vector<std::int64_t> held;
  for (auto lease : unfinished_)
    if (lease > unclaim_->after_lease) held.push_back(lease);
  for (auto& [id, job] : jobs_)
    if (job->lease() > unclaim_->after_lease) held.push_back(job->lease());
  unclaim_->next_try = Clock::now() + std::chrono::milliseconds(500);
  try {
    pg::Params arg1_ = {cfg_.id, std::to_string(unclaim_->after_lease), bigint_array(held), process_};
    auto r = co_await ctl_.query("SELECT bgexec.unclaim($1, $2, $3::bigint[], $4::jsonb)", std::move(arg1_),
                                 /*prepare=*/true);
    if (unclaim_log_.any_down())
      if (auto failed = unclaim_log_.recovered("unclaim"); failed > 0)
        core::log("info", "unclaim succeeds again", {{"failed_calls", std::to_string(failed)}});
    auto n = r.get(0, 0);
    if (!n) co_return;  // the lost claim may still be running: next time
    if (*n != "0")
      core::log("warn", "jobs of a claim whose reply was lost returned to the queue", {{"jobs", *n}});
    unclaim_.reset();
  } catch (const pg::Error& e) {
    auto cls = e.classify();
    if (e.sqlstate() == "55006") {
      id_lost(e.fields().detail);  // the jobs under the id are the new holder's to give back
    } else {
      // Tried every 0.5 s while the database is away: one line every 10 s,
      // the rest at debug (unclaim_log_); the first success says so.
      const auto line = unclaim_log_.failed("unclaim", e.sqlstate(), Clock::now());
      if (line.write || core::level_enabled("debug"))
        core::log(line.write ? "warn" : "debug", "unclaim failed",
                  {{"error", e.what()}, {"sqlstate", e.sqlstate()}, {"held_back", std::to_string(line.held_back)}});
    }
    if (cls != core::ErrorClass::connection && cls != core::ErrorClass::retry) {
      unclaim_.reset();
      unclaim_log_.recovered("unclaim");  // not tried again: the next failure is written at once
    }
  }
}

// Claims when there are free slots and a reason to: await_claim was woken
// for jobs it did not claim, a NOTIFY for one of its queues since the last
// claim was sent, the last claim full (a backlog), a job ended (its finish
// written: a capped queue's next job becomes claimable then) under LISTEN
// or while the notifier's wait counts on no free slot, and the poll
// interval passed under LISTEN or while the notifier is away (else the
// notifier polls).  A job's finish being queued is no reason alone: a
// claim then found the job still counted as running, and nothing else.
// The slots the notifier's claiming call in flight may fill are not free
// here.
//
// Under LISTEN, every idle worker on a queue wakes for each submit, and all
// but one find nothing: with 16 workers, 16 claims per job.  So a claim
// that only a NOTIFY called for, and that found nothing, makes the next
// such claim wait 1 ms, then 2, 4… up to --claim-backoff while they keep
// finding nothing; a claim that gets a job ends the wait (and halves the
// count).  The worker that got the last job claims at once, and the others
// join within the backoff when it is full.
asio::awaitable<void> Worker::fetcher() {
  auto backoff = reconnect_backoff();
  while (!draining_) {
    bool more = false;
    if (unclaim_ && await_asked_ == 0 && Clock::now() >= unclaim_->next_try) co_await try_unclaim();
    int free = free_slots() - await_asked_;
    auto now = Clock::now();
    // Waiting in await_claim, a job that ended is a reason only while the
    // wait counts on no free slot (every slot was taken when it was sent):
    // wakes pass it by, so the jobs that arrived meanwhile are claimed now.
    // Else the wait is woken for them, and for a capped queue's next job
    // when the finish of its running one commits.
    bool polls = !await_mode_ && now >= next_poll_;
    bool ended = slot_freed_ && (!await_mode_ || await_counts_on_ == 0);
    bool due = backlog_ || ended || picked_ || polls;  // claims at once
    bool by_notify = !due && notified_;        // waits out the backoff first
    if (free > 0 && (due || (by_notify && now >= quiet_until_))) {
      const char* why = backlog_       ? "backlog"
                        : ended        ? "job_ended"
                        : picked_      ? "wake"
                        : by_notify    ? "notify"
                                       : "poll";
      bool failed = false, refused = false;
      // A NOTIFY that arrives from here on may be for a commit the claim
      // does not see: it calls for another claim.
      notified_ = slot_freed_ = picked_ = false;
      next_poll_ = now + seconds(cfg_.poll_s);
      auto before = max_lease_;
      fetch_asked_ = free;
      // Cleared however the claim ends (as the notifier's await_asked_).
      ScopeExit asked([this] {
        fetch_asked_ = 0;
        fetch_idle_.notify();
        claim_ended_.cancel();
      });
      try {
        int n = co_await claim_on(ctl_, free);
        asked.run();
        core::log("debug", "claim", {{"jobs", std::to_string(n)}, {"asked", std::to_string(free)},
                                     {"why", why}});
        more = n == free;  // a full batch: there may be more waiting
        backoff.reset();
        if (n > 0) {
          // At once next time; but a worker that got a job off another's
          // backoff keeps half its count, so two hot workers do not
          // take turns resetting theirs.
          lost_claims_ /= 2;
          quiet_until_ = {};
        } else if (by_notify && cfg_.claim_backoff_s > 0) {
          lost_claims_ = std::min(lost_claims_ + 1, 30);
          double wait = std::min(cfg_.claim_backoff_s, 0.001 * std::ldexp(1.0, lost_claims_ - 1));
          quiet_until_ = Clock::now() + seconds(wait);
        }
      } catch (const pg::Error& e) {
        asked.run();
        failed = true;
        if (e.sqlstate() == "55006") {
          id_lost(e.fields().detail);
          break;
        }
        core::log("warn", "claim failed", {{"error", e.what()}, {"sqlstate", e.sqlstate()}});
        // The claim may have committed: its reply is what was lost.  Not
        // one that was never sent (its session refused at connect: 53300).
        if (e.classify() == core::ErrorClass::connection && !e.unsent()) lost_claim(before);
        refused = e.sqlstate() == "53300";
        if (e.sqlstate() == isolation_refused) ctl_.close();
      }
      set_backlog(more && !draining_);  // a drain claims nothing more
      // Refused a session: a connection limit that can never fit the
      // worker's sessions is said once, and the worker settles under it.
      if (refused) co_await check_room(/*may_connect=*/false);
      if (failed) {
        co_await sleep_for(backoff.next());
        next_poll_ = Clock::time_point{};  // again, at once
        continue;
      }
    }
    if (draining_) break;
    if (more) continue;
    // Until the next reason to claim: a wake, the poll (when a slot is free
    // to claim into, and it is ours), or the next unclaim try (when no
    // claim of the notifier's is in flight; it wakes us when that ends).
    auto until = Clock::time_point::max();
    now = Clock::now();
    if (free_slots() - await_asked_ > 0 && !await_mode_)
      until = notified_ ? std::min(next_poll_, quiet_until_) : next_poll_;
    if (unclaim_ && await_asked_ == 0) until = std::min(until, unclaim_->next_try);
    if (until <= now) continue;  // due already (a claim that took longer than the poll)
    co_await fetch_wake_.wait_until(until);
  }
  // Once more: a drain claims nothing.  begin_drain cancelled the
  // notifier's wait; its claim may have been on the way.
  while (unclaim_ && await_asked_ > 0) co_await fetch_wake_.wait_for(seconds(0.1));
  if (unclaim_) co_await try_unclaim();
}

// Whether the last claim took all it asked for; the completer holds a batch
// for the jobs of the next claim while it does.
void Worker::set_backlog(bool more) {
  if (backlog_ == more) return;
  backlog_ = more;
  if (!more) completer_->recheck();
}

// -------------------------------------------------------------- heartbeater

// A heartbeat that fails is made again at once, not at the next interval:
// one dropped for going unanswered (a quarter of the lease) would otherwise
// leave its retry a twelfth of the lease before the lease guard gives the
// jobs up (none at all when the kill grace makes the guard's margin a
// third of the lease).  Retries back off from 100 ms to the interval, so a
// database that is down is not called in a loop.
asio::awaitable<void> Worker::heartbeater() {
  const double interval = std::max(0.1, cfg_.lease_s / 3);
  double retry = 0;  // seconds before the next attempt after a failure
  while (!stopping_) {
    std::vector<std::shared_ptr<Job>> live;
    std::vector<std::int64_t> leases;
    for (auto& [id, job] : jobs_) {
      if (!job->live()) continue;
      leases.push_back(job->lease());
      live.push_back(job);
    }
    // No lease to renew and the finish or heartbeat session down:
    // finish_prober opens the heartbeat session (after the finish session),
    // not this; the worker row's heartbeat goes on, on a session borrowed
    // for it (beat_while_waiting), so that a worker waiting for slots does
    // not look dead (worker_stats' alive).  For the gate's other reasons
    // (step processes that cannot start) the heartbeats go on as ever.
    if (leases.empty() && (gate_.is_down(fin_.name()) || gate_.is_down(hb_.name()))) {
      auto sent = Clock::now();
      {
        InFlight beat(*this);
        co_await beat_while_waiting();
      }
      co_await hb_wake_.wait_until(sent + seconds(interval));
      continue;
    }
    auto sent = Clock::now();
    InFlight beat(*this);
    try {
      // With it, in the same statement, a row 'holder' when the worker row
      // is another process's: someone deleted this worker's row and a
      // process waiting for the id registered it (register_worker allows
      // one live process per id).  The row names that process, as a
      // refused claim's DETAIL does (the log's holder was "").
      pg::Params arg1_ = {cfg_.id, bigint_array(leases), core::to_pg_interval(cfg_.lease_s),
                          std::to_string(::getpid()), host_name(), process_};
      auto r = co_await hb_.query(heartbeat_sql, std::move(arg1_), /*prepare=*/true);
      std::map<std::int64_t, std::string> actions;
      const bool missing = read_heartbeat(r, &actions);
      for (auto& job : live) {
        auto it = actions.find(job->lease());
        job->on_heartbeat(it == actions.end() ? "lost" : it->second, sent);
      }
      retry = 0;
      write_path("heartbeat", std::nullopt);
      if (missing) co_await register_self(hb_);
    } catch (const pg::Error& e) {
      retry = retry == 0 ? 0.1 : std::min(retry * 2, interval);
      if (e.sqlstate() == "55006") {
        // While the row was missing, another process registered under this
        // id (one that waited for it): two live processes under one id is
        // what register_worker refuses.
        id_lost(e.fields().detail);
      } else {
        core::log("warn", "heartbeat failed", {{"error", e.what()}, {"sqlstate", e.sqlstate()}});
        // Leases it cannot renew: no more claims until it can.
        write_path("heartbeat", e.what());
      }
    }
    beat.done();
    // Early when a stop request woke the notifier: this heartbeat names the job.
    auto next = sent + seconds(interval);
    if (retry > 0) next = std::min(next, Clock::now() + seconds(retry));
    co_await hb_wake_.wait_until(next);
  }
}

// Abandons jobs whose lease could not be renewed, early enough that their
// processes are dead before it expires on the database's clock: once it has,
// the DB may hand the job to another worker, and a process still running
// would break single flight.  The margin covers the kill (TERM, KILL after
// --kill-grace), this loop's tick and a tenth of the lease, and is at most a
// third of the lease (two missed heartbeats; the config check keeps the kill
// grace below it).  lease_expiry is reckoned from when the renewal was sent,
// before the database's now(), so it errs early (a claim made in a wait:
// from the claim as its reply tells it, less 50 ms for the reply's way).
Clock::duration Worker::lease_margin() const {
  return std::chrono::duration_cast<Clock::duration>(
      seconds(std::min(cfg_.kill_grace_s + 0.1 + cfg_.lease_s / 10, cfg_.lease_s / 3)));
}

asio::awaitable<void> Worker::lease_guard() {
  const auto tick = std::chrono::milliseconds(100);
  while (!stopping_) {
    std::vector<std::shared_ptr<Job>> expired;
    for (auto& [id, job] : jobs_)
      if (job->live() && job->lease_spent()) expired.push_back(job);
    for (auto& job : expired) job->abandon("lease could not be renewed before it expired");
    co_await sleep_for(tick);
  }
}

// The claim gate (core/claim_gate.hpp).  Reopened, it claims at once (the
// notifier's poll, or the fetcher's): jobs submitted meanwhile woke a
// worker that could not take them.
void Worker::write_path(const std::string& which, const std::optional<std::string>& error) {
  using Change = core::ClaimGate::Change;
  if (error) {
    if (gate_.down(which, *error) == Change::unavailable) {
      core::log("warn", "not claiming: " + which + " connection unavailable", {{"error", *error}});
      // A wait that may claim ends now, as in begin_drain: it may wait a
      // second and claim whatever wakes it.  A claim that committed first
      // is run like any other (its finish waits for the connection while
      // the heartbeats renew its lease).  A wait that claims nothing is
      // ended by closing its session: a worker that cannot report back
      // holds no session for claiming (the notifier opens it again once
      // the gate reopens), so that a server short of slots gives them to
      // workers that can use them.
      if (await_asked_ > 0) {
        if (!std::exchange(gate_cancel_, true)) listen_.cancel();
      } else if (!draining_) {
        listen_.close();
      }
    }
    fin_down_.notify();  // finish_prober opens them again, finish first
    return;
  }
  if (gate_.up(which) != Change::reopened) return;
  core::log("info", "claiming again", {{"worker_id", cfg_.id}});
  next_poll_ = Clock::time_point{};
  fetch_wake_.notify();
  gate_up_.notify();
}

namespace {
const std::string spawn_gate = "step processes";  // the claim gate's name for them
}  // namespace

// A worker whose host cannot start processes (RLIMIT_NPROC or the cgroup's
// pids.max reached, out of descriptors or memory) failed every job it
// claimed, at full speed: 200 jobs in 3 s, half of a healthy fleet's.
void Worker::steps_cannot_start(const std::string& error, const std::string& errno_name) {
  using Change = core::ClaimGate::Change;
  if (gate_.down(spawn_gate, error) != Change::unavailable) return;
  // A step's own start failing while the probe starts `true` closes the
  // gate again at each claim of its job (until unclaim counts the attempt,
  // 10 give-backs): one line per outage, until a step starts
  // (step_started), or every 10 s; its "claiming again" with it.
  const auto line = spawn_log_.failed(spawn_log_session, errno_name, Clock::now());
  spawn_line_written_ = line.write;
  if (line.write || core::level_enabled("debug"))
    core::log(line.write ? "warn" : "debug", "not claiming: step processes cannot be started",
              {{"error", error}, {"errno", errno_name}, {"held_back", std::to_string(line.held_back)}});
  if (await_asked_ > 0 && !std::exchange(gate_cancel_, true)) listen_.cancel();  // as write_path
  spawn_down_.notify();
}

asio::awaitable<void> Worker::spawn_prober() {
  core::Backoff backoff(std::chrono::milliseconds(500), std::chrono::seconds(30));
  const std::vector<std::string> argv = {"true"};
  while (!stopping_) {
    if (!gate_.is_down(spawn_gate)) {
      backoff.reset();
      co_await spawn_down_.wait();
      continue;
    }
    co_await sleep_for(backoff.next());
    if (stopping_ || !gate_.is_down(spawn_gate)) continue;
    std::string error;
    try {
      auto child = proc::Child::spawn(executor(), argv, child_env_);
      co_await child->wait();
    } catch (const std::system_error& e) {
      error = e.code().message();
    }
    if (!error.empty()) {
      core::log("debug", "step processes still cannot be started", {{"error", error}, {"backoff_s", backoff.seconds()}});
      continue;
    }
    if (gate_.up(spawn_gate) != core::ClaimGate::Change::reopened) continue;  // a connection still down
    if (spawn_line_written_ || core::level_enabled("debug"))
      core::log(spawn_line_written_ ? "info" : "debug", "claiming again", {{"worker_id", cfg_.id}});
    spawn_line_written_ = false;
    next_poll_ = Clock::time_point{};
    fetch_wake_.notify();
    gate_up_.notify();  // the notifier held off (hold_off_claiming), as write_path
  }
}

asio::awaitable<std::optional<std::string>> Worker::give_back(std::int64_t lease) {
  ++giving_back_;
  struct Done {
    Worker& w;
    ~Done() {
      if (--w.giving_back_ == 0) w.fetch_wake_.notify();
    }
  } done{*this};
  // A claim of ours that committed may be on its way back with leases above
  // this one, not held yet: given back too, they would run here and on
  // another worker.  None goes out from here on (free_slots is 0); the
  // server's claim still running is unclaim's NULL.
  if (await_asked_ > 0 && !std::exchange(gate_cancel_, true)) listen_.cancel();
  while (await_asked_ > 0 || fetch_asked_ > 0) co_await claim_ended_.async_wait(asio::as_tuple(asio::use_awaitable));
  std::vector<std::int64_t> held;
  for (auto l : unfinished_)
    if (l > lease) held.push_back(l);
  for (auto& [id, job] : jobs_)
    if (job->lease() > lease) held.push_back(job->lease());
  pg::Params arg1_ = {cfg_.id, std::to_string(lease - 1), bigint_array(held), process_};
  auto r = co_await ctl_.query("SELECT bgexec.unclaim($1, $2, $3::bigint[], $4::jsonb, 'cannot_start_steps')",
                               std::move(arg1_), /*prepare=*/true);
  co_return r.get(0, 0);
}

// Opens the sessions the claim gate waits for, in the order a worker needs
// them: finish, then heartbeat.  A worker with no job in flight that gets
// one and is refused the other gives back the one it got before it waits
// (jittered backoff): a server short of slots otherwise ended up with
// every worker holding part of its set and none able to claim (a deadlock:
// 20 workers, 37 slots, no job finished).  With jobs in flight it keeps
// what it has: their heartbeats and finishes need it.
asio::awaitable<void> Worker::finish_prober() {
  auto backoff = reconnect_backoff();
  auto down = [this] { return gate_.is_down(fin_.name()) || gate_.is_down(hb_.name()); };
  while (!stopping_) {
    if (!down()) {
      backoff.reset();
      co_await fin_down_.wait();
      continue;
    }
    co_await sleep_for(backoff.next());
    if (stopping_ || !down()) continue;
    std::optional<std::string> fin_error, hb_error;
    bool hb_refused = false;
    try {
      co_await fin_.open();
    } catch (const pg::Error& e) {
      fin_error = e.what();
    }
    if (!fin_error) {
      try {
        co_await hb_.open();
      } catch (const pg::Error& e) {
        hb_error = e.what();
        hb_refused = e.sqlstate() == "53300";
      }
    }
    // The finish session's but no room for the heartbeat's: a limit of one
    // or two sessions is said once (check_room, on the finish session).
    if (hb_refused && !room_short_) co_await check_room(/*may_connect=*/false);
    if (fin_error || hb_error) {
      if (jobs_.empty()) {
        // (The heartbeater makes no call while the gate is closed and no
        // lease is held: the session stays closed until this reopens it.)
        if (fin_error) hb_.close();
        fin_.close();
      }
      if (fin_error) write_path(fin_.name(), *fin_error);
      if (hb_error) write_path(hb_.name(), *hb_error);
      continue;
    }
    write_path(fin_.name(), std::nullopt);
    write_path(hb_.name(), std::nullopt);
  }
}

asio::awaitable<void> Worker::reconciler() {
  while (!stopping_) {
    co_await sleep_for(seconds(cfg_.reconcile_s));
    if (stopping_) break;
    // The control session is given back while the gate is closed (notifier):
    // the server's background worker, or another worker, reconciles.
    if (!gate_.open()) continue;
    try {
      auto r = co_await ctl_.query("SELECT bgexec.reconcile()");
      if (auto n = r.get(0, 0); n && *n != "0") core::log("info", "reconciled", {{"jobs", *n}});
    } catch (const pg::Error& e) {
      core::log("warn", "reconcile failed", {{"error", e.what()}, {"sqlstate", e.sqlstate()}});
    }
  }
}

// -------------------------------------------------------------- lifecycle

void Worker::arm_signals() {
  signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    on_signal(sig);
    arm_signals();
  });
}

void Worker::on_signal(int sig) {
  if (++signals_seen_ >= 2) {
    // Second signal: exit at once; leave no step process behind.  A
    // descendant that left its step's group has its parent in the group
    // when it is killed: it comes to the worker, their subreaper, only as
    // that parent dies, and would go to init once the worker is gone.  So
    // the worker waits for those (a second at most) and kills them.
    core::log("warn", "second signal, exiting now", {{"signal", std::to_string(sig)}});
    proc::Child::kill_all();
    proc::Child::kill_orphans();
    core::flush_log(std::chrono::milliseconds(500));
    std::_Exit(130);
  }
  core::log("info", "signal received, draining", {{"signal", std::to_string(sig)},
                                                  {"grace_s", core::seconds_text(cfg_.grace_s)},
                                                  {"in_flight", std::to_string(jobs_.size())}});
  begin_drain();
}

// Another live process holds the id: it registered while this one missed
// its lease (cut off, stopped) or while this one's row was missing.  The
// heartbeat finds the row naming another process, or a claim, an unclaim or
// a registration is refused (55006).  This process claims nothing more,
// drains the jobs it holds (their leases are its own) and exits 3, leaving
// the row, the other's, as it is.
void Worker::id_lost(const std::string& holder) {
  if (id_taken_) return;
  core::log("error", "worker id taken by another live process: draining",
            {{"worker_id", cfg_.id}, {"holder", holder}});
  id_taken_ = true;
  begin_drain();  // (already draining: goes on; either way, no deregister)
}

void Worker::begin_drain() {
  if (draining_) return;
  draining_ = true;
  set_backlog(false);  // no more claims
  fetch_wake_.notify();
  // A wait that may claim ends now: cancelled (57014) before a wake, it
  // rolls back; a claim that committed first is run like any other.
  if (await_asked_ > 0) listen_.cancel();
  for (auto& [id, job] : jobs_) job->on_drain();
  if (jobs_.empty()) {
    drained_.notify();
    return;
  }
  // After the grace period, what is left is ended by the documented rule:
  // its processes are killed and it is finished `failed` with
  // retryable=true, reason=worker_shutdown; the database re-queues it when it
  // has attempts left, else it stays failed.
  grace_timer_ = std::make_unique<asio::steady_timer>(io_, seconds(cfg_.grace_s));
  grace_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    core::log("warn", "grace period over, ending remaining jobs", {{"in_flight", std::to_string(jobs_.size())}});
    for (auto& [id, job] : jobs_) job->request_stop(StopReason::shutdown);
  });
}

asio::awaitable<void> Worker::register_self(pg::Connection& conn, long replaces) {
  json info = {{"host", host_name()}, {"pid", ::getpid()}, {"version", BGEXEC_VERSION},
               {"allow_run", cfg_.allow_run}, {"lease_s", cfg_.lease_s}};
  if (replaces > 0) info["replaces"] = replaces;
  // claim and unclaim name this process; once the row names another, they are refused.
  process_ = core::dump(json{{"host", info["host"]}, {"pid", info["pid"]}});
  for (auto& [name, path] : cfg_.actions) info["actions"].push_back(name);
  pg::Params arg1_ = {cfg_.id, text_array(cfg_.queues), std::to_string(cfg_.concurrency), core::dump(info)};
  co_await conn.query("SELECT bgexec.register_worker($1, $2::text[], $3, $4::jsonb)", std::move(arg1_));
}

asio::awaitable<bool> Worker::register_once(pg::Connection& conn) {
  long replaces = 0;
  auto warned = Clock::time_point{};
  for (;;) {
    std::string holder;  // the refusal's DETAIL: the holder's pid, host, heartbeat
    try {
      co_await register_self(conn, replaces);
      co_return true;
    } catch (const pg::Error& e) {
      if (e.sqlstate() != "55006") throw;
      holder = e.fields().detail;
    }
    {
      std::string host;
      long pid = 0;
      pg::Params arg1_ = {cfg_.id};
      auto r = co_await conn.query("SELECT host, pid FROM bgexec.worker_stats WHERE id = $1", std::move(arg1_));
      if (r.rows() == 1) {
        host = r.get(0, 0).value_or("");
        pid = std::strtol(r.get(0, 1).value_or("0").c_str(), nullptr, 10);
      }
      if (host == host_name() && process_gone(pid) && pid != replaces) {
        core::log("info", "worker id held by a process gone from this host: taking it over",
                  {{"worker_id", cfg_.id}, {"pid", std::to_string(pid)}});
        replaces = pid;
        continue;
      }
      if (warned == Clock::time_point{} || Clock::now() - warned >= seconds(30)) {
        warned = Clock::now();
        core::log("warn", "worker id in use by a live worker: waiting until it stops or misses its lease",
                  {{"worker_id", cfg_.id}, {"holder", holder}});
      }
    }
    if (!draining_) co_await drained_.wait_for(seconds(1));
    if (draining_) co_return false;
  }
}

asio::awaitable<int> Worker::run() {
  // The steps' subreaper: what they leave behind comes to the worker, which
  // kills it, instead of to init.
  proc::Child::init_reaper(io_.get_executor(), /*subreaper=*/true);
#ifdef __linux__
  // Steps must not outlive a worker that cannot end them (SIGKILL, a crash):
  // the job's next attempt would run beside them.
  if (std::string why; !proc::guard::start("/proc/self/exe", cfg_.kill_grace_s, cfg_.id, why))
    core::log("warn", "step guard not started: a worker killed by SIGKILL would leave its steps running",
              {{"error", why}});
#endif
  arm_signals();
  // A secrets dir may be mounted after the worker starts, so a missing one
  // is not fatal; but every {{secrets.NAME}} from it fails its job until it
  // is there, so say so now rather than only in those jobs' errors.
  if (!cfg_.secrets_dir.empty()) {
    struct stat st {};
    const char* problem = nullptr;
    if (::stat(cfg_.secrets_dir.c_str(), &st) != 0) problem = std::strerror(errno);
    else if (!S_ISDIR(st.st_mode)) problem = "not a directory";
    else if (::access(cfg_.secrets_dir.c_str(), R_OK | X_OK) != 0) problem = std::strerror(errno);
    if (problem)
      core::log("warn", "secrets dir unavailable: jobs using its secrets fail until it is",
                {{"secrets_dir", cfg_.secrets_dir}, {"error", problem}});
  }
  // Likewise an action's executable (a typo in --action's path): its jobs
  // would fail, `cannot start`, with nothing said before the first.
  for (const auto& [name, path] : cfg_.actions)
    if (const std::string why = proc::unrunnable(path); !why.empty())
      core::log("warn", "action cannot be started: its jobs fail until it can",
                {{"action", name}, {"path", path}, {"error", why}});
  // Likewise --http-ca-file (read once here, and again by an https step
  // while it cannot be).
  if (!cfg_.http_ca_file.empty())
    if (const std::string why = tls_problem(cfg_.http_ca_file); !why.empty())
      core::log("warn", "https steps cannot verify their servers: they fail until --http-ca-file can be read",
                {{"path", cfg_.http_ca_file}, {"error", why}});
  auto backoff = reconnect_backoff();
  for (;;) {
    try {
      if (!co_await register_once(ctl_)) {
        core::log("info", "worker stopped", {{"worker_id", cfg_.id}, {"registered", "false"}});
        co_return 0;
      }
      break;
    } catch (const pg::Error& e) {
      auto cls = e.classify();
      if (cls == core::ErrorClass::fatal) {
        // The server's message (not libpq's text of it, with its LINE and
        // caret), and a hint when the extension is missing.
        const std::string error = e.fields().primary.empty() ? std::string(e.what()) : e.fields().primary;
        if (const std::string hint = e.hint(); !hint.empty())
          core::log("error", "cannot register worker", {{"error", error}, {"sqlstate", e.sqlstate()}, {"hint", hint}});
        else
          core::log("error", "cannot register worker", {{"error", error}, {"sqlstate", e.sqlstate()}});
        co_return 3;
      }
      // The server's message, not its CONTEXT: on a hot standby (25006)
      // register_worker's call stack made each retry's line a kilobyte.
      const auto& f = e.fields();
      std::string error = f.primary.empty() ? std::string(e.what()) : f.primary;
      if (e.sqlstate() == "25006")
        core::log("warn", "database unavailable, retrying",
                  {{"error", error}, {"sqlstate", e.sqlstate()}, {"backoff_s", backoff.seconds()},
                   {"hint", "a read-only server (a hot standby): name the primary, or add "
                            "target_session_attrs=read-write to --db"}});
      else if (login_refused(error))
        // Said as an error: no outage, a setting to fix (the README's first
        // worker, run from the reader's shell under peer authentication,
        // met this), though still retried: a role or database may be on
        // its way, pg_hba.conf reloaded.
        core::log("error", "database unavailable, retrying",
                  {{"error", error}, {"sqlstate", e.sqlstate()}, {"backoff_s", backoff.seconds()},
                   {"hint", "the server refused the login: check the user, password and database --db names "
                            "(a password in ~/.pgpass; peer authentication: run as that OS user) and pg_hba.conf"}});
      else
        core::log("warn", "database unavailable, retrying",
                  {{"error", error}, {"sqlstate", e.sqlstate()}, {"backoff_s", backoff.seconds()}});
    }
    // A signal ends the wait: the worker stops without having started.
    if (auto wait = backoff.next(); !draining_) co_await drained_.wait_for(wait);
    if (draining_) {
      core::log("info", "worker stopped", {{"worker_id", cfg_.id}, {"registered", "false"}});
      co_return 0;
    }
  }
  // The connections the jobs report back on are opened before the first
  // claim, so that it knows whether they work: one that cannot connect (the
  // role's or the server's connection limit, the process's file limit)
  // keeps the worker from claiming until it does (write_path), where every
  // job claimed was run or renewed and then lost.
  // (a named array: GCC 12 mishandles braced lists around co_await)
  const std::array<pg::Connection*, 2> report_conns = {&fin_, &hb_};
  for (auto* conn : report_conns) {
    try {
      co_await conn->open();
    } catch (const pg::Error& e) {
      write_path(conn->name(), e.what());
    }
  }
  // The queues comma-separated, as --queue takes them (a queue name holds
  // no comma): the array literal read queues="{\"default\"}" in logfmt.
  std::string queues;
  for (const auto& q : cfg_.queues) queues += (queues.empty() ? "" : ",") + q;
  core::log("info", "worker started", {{"worker_id", cfg_.id}, {"queues", queues},
                                       {"concurrency", std::to_string(cfg_.concurrency)},
                                       {"step_processes", std::to_string(cfg_.step_processes)},
                                       {"lease_s", core::seconds_text(cfg_.lease_s)}});
  auto ex = io_.get_executor();
  asio::co_spawn(ex, completer_->run(), log_exit("completer"));
  asio::co_spawn(ex, notifier(), log_exit("notifier"));
  asio::co_spawn(ex, fetcher(), log_exit("fetcher"));
  asio::co_spawn(ex, heartbeater(), log_exit("heartbeater"));
  asio::co_spawn(ex, lease_guard(), log_exit("lease_guard"));
  asio::co_spawn(ex, reconciler(), log_exit("reconciler"));
  asio::co_spawn(ex, finish_prober(), log_exit("finish_prober"));
  asio::co_spawn(ex, spawn_prober(), log_exit("spawn_prober"));

  // Drained: no job held, and no claim of the notifier's on the way.
  co_await drained_.wait();
  while (!jobs_.empty() || await_asked_ > 0) co_await drained_.wait();
  // No step runs: nothing a step left, marked or not, outlives the worker.
  proc::Child::kill_orphans();
  // Every finish is written before the worker deregisters.
  co_await completer_->close();
  stopping_ = true;
  listen_.close();
  // No heartbeat goes out from here (stopping_); one in flight ends first,
  // woken as it does (it polled every 5 ms), bounded by the lease (the
  // heartbeat's own timeout ends it sooner).  Committed after the
  // deregister, it no longer marks the row live (deregister_worker with
  // process is final: isolation heartbeat-vs-deregister), but its reply
  // may still ask the worker to register again (its row deleted
  // meanwhile), which after the deregister left a live row behind, and its
  // session is closed below.
  const auto beat_until = Clock::now() + seconds(cfg_.lease_s);
  while (beat_in_flight_ && Clock::now() < beat_until) co_await beat_ended_.wait_until(beat_until);
  // Only a row that is still this process's: one another process took
  // since the last heartbeat is left as it is (marked stopped, it would let
  // a third register over the live holder).  deregister_worker checks it
  // in its UPDATE: a read of worker_stats, then a call by id, marked the
  // row of a process whose registration committed between the two.  A
  // lost connection is tried again on a new one, three times in 3.5 s: the
  // control connection may have sat idle through a server restart during
  // the drain, and a row left unstopped made the next worker of this id
  // wait out a lease.
  for (int attempt = 0; !id_taken_; ++attempt) {
    bool again = false;
    try {
      pg::Params arg1_ = {cfg_.id, process_};
      co_await ctl_.query("SELECT bgexec.deregister_worker($1, $2::jsonb)", std::move(arg1_));
    } catch (const pg::Error& e) {
      again = attempt < 3 && e.classify() == core::ErrorClass::connection;
      core::log("warn", "deregister failed", {{"error", e.what()}, {"again", again ? "true" : "false"}});
    }
    if (!again) break;
    co_await sleep_for(std::chrono::milliseconds(500 << attempt));
  }
  core::log("info", "worker stopped", {{"worker_id", cfg_.id}});
  ctl_.close();
  fin_.close();
  hb_.close();
  co_return id_taken_ ? 3 : 0;
}

}  // namespace bgexec::worker
