#pragma once
// `bgexec worker`: the daemon.  Components, each a coroutine on one io_context
// (River's shape): notifier (bgexec.await_claim: waits and claims on wake; or
// LISTEN), fetcher (claims on a backlog, a slot freed, or the poll under LISTEN), executor (one Job per claim, see job.hpp), heartbeater (one
// statement per interval for all leases), lease guard (local lease expiry),
// reconciler (reconcile() on a timer), completer (batched finishes, see
// completer.hpp), finish prober (connects the finish connection again
// while claims wait for it: core/claim_gate.hpp); shutdown is staged on
// signals.

#include "core/claim_gate.hpp"
#include "core/config.hpp"
#include "core/logfmt.hpp"
#include "pg/connection.hpp"
#include "util/event.hpp"
#include "util/single_flight.hpp"
#include "worker/completer.hpp"
#include "worker/slots.hpp"
#include "worker/until.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <array>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace bgexec::worker {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

class Job;

class Worker {
 public:
  Worker(asio::io_context& io, core::WorkerConfig cfg);
  ~Worker();

  // Runs until drained after a signal; returns the process exit code.
  asio::awaitable<int> run();

  const core::WorkerConfig& config() const { return cfg_; }
  // Shutting down (a signal, or the id lost): a job whose running steps
  // are all sleeps gives itself back (Job::on_drain).
  bool draining() const { return draining_; }
  // sql step sessions (--sql-steps) and step processes (--step-processes).
  using Slots = worker::Slots;
  Slots& sql_sessions() { return sql_sessions_; }
  Slots& step_processes() { return step_processes_; }
  // A job claimed, then past its first step's start (Job::began): its
  // first step asked `asked` for a slot, or none (nullptr: it needs none,
  // or it ended).  Until then it counts against each pool smaller than
  // --concurrency (step_room); a job that began without asking a pool
  // doubles what the worker may claim past that pool's free slots.
  void job_claimed() { ++unstarted_; }
  void job_began(const Slots* asked);
  // A step waits for one of the pool's slots: back to claiming no more
  // than one job past its free slots (step_room).
  void pool_short(const Slots& pool);
  // How long before a lease expires (by the worker's reckoning) a job whose
  // lease could not be renewed is given up (see lease_guard).
  Clock::duration lease_margin() const;
  asio::any_io_executor executor() { return io_.get_executor(); }
  // Runs f() on the worker's compute thread and resumes the caller on the
  // loop with its result (or its exception).  For work on a large step
  // output (up to 16 MiB: the U+FFFD repair, the parse, the masking, the
  // dump), which took the loop for seconds under load, so nothing else on
  // the worker ran: heartbeats, claims, other jobs' steps and finishes.  f
  // owns what it reads and writes (moved or copied into it, a Masker
  // copied): nothing of a job or the worker is shared with the other
  // thread, and a job that ends meanwhile leaves it nothing to dangle.
  // Not a coroutine itself: GCC 12 destroyed a coroutine's by-value
  // parameter (f, a lambda holding strings) twice (double free).
  template <class F>
  asio::awaitable<std::invoke_result_t<F&>> offload(F f) {
    using R = std::invoke_result_t<F&>;
    return asio::co_spawn(
        compute_, [f = std::move(f)]() mutable -> asio::awaitable<R> { co_return f(); }, asio::use_awaitable);
  }
  // Runs f() on the compute thread, no one waiting for it: a job's large
  // values freed there (see ~Job).
  template <class F>
  void discard(F f) {
    asio::post(compute_, std::move(f));
  }
  // Resolves {{secrets.NAME}}: BGEXEC_SECRET_NAME, else --secrets-dir/NAME.
  std::optional<std::string> secret(const std::string& name) const;
  // Environment for step processes: the worker's, without BGEXEC_SECRET_*.
  const std::vector<std::string>& child_env() const { return child_env_; }

  // Runs one statement on the control connection.  Retries class 08 (with
  // reconnect and capped backoff) and 40001/40P01 while `until` (read before
  // each retry) has not passed; throws pg::Error otherwise or when time is
  // up.  `retried` (when given) is set when the statement was sent more
  // than once.
  asio::awaitable<pg::Result> ctl_exec(const std::string& sql, const pg::Params& params, Until until = {},
                                       bool* retried = nullptr);
  // ctl_exec on the completer's own connection (finish_many only), so finish
  // batches and claims run (and commit) in parallel.  Whether it works
  // decides whether the worker claims (write_path).
  asio::awaitable<pg::Result> fin_exec(const std::string& sql, const pg::Params& params, Until until = {},
                                       bool* retried = nullptr);
  // Where jobs hand their final outcome (one finish_many per batch).
  Completer& completer() { return *completer_; }
  // A step process could not be started for want of the host's resources
  // (`error`: errno's message, `errno_name`: EAGAIN, EMFILE…): the worker
  // claims nothing until spawn_prober starts one (the gate, logged once).
  void steps_cannot_start(const std::string& error, const std::string& errno_name);
  // A step's process started: the end of an outage of the spawn breaker
  // (its lines written again at once next time).  A branch while none.
  void step_started() {
    if (spawn_log_.any_down()) spawn_log_.recovered(spawn_log_session);
  }
  // Gives the job under `lease` back to the queue, its attempt not counted
  // (bgexec.unclaim, reason cannot_start_steps): none of its steps started
  // a process or a statement.  No claim of this worker goes out meanwhile
  // nor is in flight when it is sent, so every other lease above is known
  // (held).  unclaim's answer: how many went back, nullopt (NULL) while a
  // claim of this worker still runs on the server.  Throws pg::Error.
  asio::awaitable<std::optional<std::string>> give_back(std::int64_t lease);

 private:
  asio::awaitable<void> notifier();
  // The notifier's two ways: bgexec.await_claim, or LISTEN when the server
  // lacks it.  Each calls `listening` once in place; both throw pg::Error.
  asio::awaitable<void> await_work(std::function<void(core::LogFields)> listening);
  asio::awaitable<void> listen_for_work(std::function<void(core::LogFields)> listening);
  asio::awaitable<void> fetcher();
  asio::awaitable<void> heartbeater();
  asio::awaitable<void> lease_guard();
  asio::awaitable<void> reconciler();
  // While the finish connection cannot be used, connects it again with the
  // reconnect backoff (0.1 s, doubling to 5 s): nothing else would, since
  // no finish comes while nothing is claimed.
  asio::awaitable<void> finish_prober();
  // While step processes cannot be started (steps_cannot_start), starts
  // `true` with a backoff (0.5 s, doubling to 30 s); the first that starts
  // reopens the gate ("claiming again").
  asio::awaitable<void> spawn_prober();
  asio::awaitable<void> hold_off_claiming();
  asio::awaitable<void> check_report_sessions();
  // Reads the lowest connection limit that applies to the worker's login
  // (its role's CONNECTION LIMIT, its database's, max_connections less the
  // superuser-reserved slots; a superuser is under the last alone) on an
  // open session of its own (`may_connect`: else on the heartbeat's,
  // connected for it).  Under sessions_needed the limit can never fit the
  // worker's sessions, whatever the rest of the fleet does: with 3 it
  // claims by polling on the control session and opens no listen session;
  // under 3 it claims nothing (the claim gate's "connection limit"), its
  // heartbeats going on.  Each change is logged once; nothing when it
  // cannot read them (unknown: as before).
  asio::awaitable<void> check_room(bool may_connect);
  // While the limit is short: no listen session; check_room every 5 s.
  asio::awaitable<void> wait_for_room();
  // A heartbeat for the worker row alone (no lease held) while the worker
  // waits for its finish and heartbeat sessions: on the heartbeat session
  // opened for the one statement and given back after it, so that the row
  // stays live (worker_stats' alive) while the worker waits for slots.
  asio::awaitable<void> beat_while_waiting();
  // A heartbeat's reply (heartbeat_sql): each lease's action into *actions
  // (nullptr: none renewed); of the worker row's rows (lease NULL),
  // 'holder' loses the id (id_lost).  True, with its warn line, when the
  // row is to be registered again (register_self): 'register', someone
  // deleted it (worker_stats and /metrics know workers by it).
  bool read_heartbeat(const pg::Result& r, std::map<std::int64_t, std::string>* actions);
  // A connection the jobs report back on ("finish", "heartbeat") failed
  // (`error`: its last connect or statement failed) or worked (nullopt).
  // Claims stop while either cannot be used (gate_, free_slots); the first
  // failure of a stretch and the reopening are logged.
  void write_path(const std::string& which, const std::optional<std::string>& error);
  asio::awaitable<int> claim_on(pg::Connection& conn, int free);
  // Starts a job for each row of claim's columns (an await_claim row of
  // flags alone, job_id NULL, is skipped); returns how many.  `sent`: when
  // the claiming statement was sent; `claimed_ago_col`: await_claim's
  // column of seconds since the claim, by which the lease and the deadline
  // run from the claim (-1: none, from `sent`).
  int start_claimed(const pg::Result& r, Clock::time_point sent, int claimed_ago_col = -1);
  // The claim failed and its reply may be what was lost: unclaim from the
  // highest lease received before it was sent.
  void lost_claim(std::int64_t before);
  asio::awaitable<void> try_unclaim();
  // Upserts this worker's row (bgexec.register_worker).  Throws pg::Error.
  // replaces: the pid of a process gone from this host that holds the id.
  asio::awaitable<void> register_self(pg::Connection& conn, long replaces = 0);
  // Registers at start; while another live process holds the id (55006),
  // waits for it to stop or miss its lease, and takes the id over at once
  // from a process that is gone from this host.  False when a signal ended
  // the wait; throws pg::Error on other errors.
  asio::awaitable<bool> register_once(pg::Connection& conn);
  asio::awaitable<pg::Result> exec_on(pg::Connection& conn, const std::string& sql, const pg::Params& params,
                                      const Until& until, bool* retried, bool retry_locked = true);
  // Slots the fetcher (and the notifier's claims and waits) may claim now:
  // none while the finish or heartbeat connection cannot be used (gate_: a
  // job claimed then would be lost); a job waiting on the completer no
  // longer holds a slot, but leases held (running + awaiting finish) stay <=
  // concurrency + max(concurrency, finish batch): room for one full finish
  // batch even with few slots, so finishes are not cut short by the cap.
  int free_slots() const;
  // What a pool smaller than --concurrency (--sql-steps, --step-processes)
  // leaves room for: nothing while a step waits for one of its slots;
  // else its free slots, or past_free_ (1, doubled by each job that began
  // without asking the pool, up to --concurrency; 1 again when a step
  // waits), less the jobs claimed that have not yet started a step (each
  // may need one).  INT_MAX when no pool is that small.  Else one wake
  // made such a worker claim as many jobs as its job slots, and run them
  // one by one, their timeouts counting, while another sat idle; and
  // with past_free_ fixed at 1, a queue of jobs needing another pool (or
  // none) was claimed one job a claim (a noop drain 11x slower).
  int step_room() const;
  // A reason to claim: a job ended, or a pool gave a slot back.
  void pool_freed();
  void start_job(std::shared_ptr<Job> job);
  void on_signal(int sig);
  void begin_drain();
  // holder: the other process (its pid and host), from a refusal's
  // DETAIL or the heartbeat's row.
  void id_lost(const std::string& holder);
  void arm_signals();
  void set_backlog(bool more);

  asio::io_context& io_;
  core::WorkerConfig cfg_;
  std::vector<std::string> child_env_;
  pg::Connection ctl_;     // register, claim, events, reconcile, deregister
  pg::Connection fin_;     // the completer's finish_many batches only
  pg::Connection hb_;      // heartbeat only, so it keeps its cadence
  pg::Connection listen_;  // bgexec.await_claim and the poll's claims (or LISTEN bgexec_jobs, bgexec_stop)
  asio::signal_set signals_;
  Event fetch_wake_;
  Event fetch_idle_;  // the fetcher's claim in flight has ended
  Event hb_wake_;  // a stop request arrived: heartbeat now
  Event drained_;
  Event fin_down_;  // the finish or heartbeat connection failed: wakes finish_prober
  Event gate_up_;   // the claim gate reopened: wakes the notifier
  Event spawn_down_;  // a step process could not be started: wakes spawn_prober
  Event beat_ended_;  // the heartbeater's call in flight ended: wakes run()'s stop
  int giving_back_ = 0;  // give_back calls under way: no free slot meanwhile
  // Closed while the finish connection cannot be used or heartbeats fail.
  // exec_on's retry lines: one per session and SQLSTATE every 10 s.
  core::RetryLog retry_log_{std::chrono::seconds(10)};
  // try_unclaim's "unclaim failed" in an outage (tried every 0.5 s: a line
  // each) and steps_cannot_start's "not claiming" while one step's own
  // start fails (the probe reopens the gate, the job is claimed again: a
  // line each cycle): one line per period each, as retry_log_, in logs of
  // their own (the hot path's any_down is retry_log_'s alone).
  core::RetryLog unclaim_log_{std::chrono::seconds(10)};
  core::RetryLog spawn_log_{std::chrono::seconds(10)};
  static constexpr const char* spawn_log_session = "step processes";
  bool spawn_line_written_ = false;  // the last "not claiming" of spawn_log_ was at warn
  core::ClaimGate gate_;
  bool gate_cancel_ = false;  // write_path cancelled the notifier's claiming wait
  // check_room: the limit last read (-1: none, or never read) and whether
  // it is below sessions_needed.
  int room_ = -1;
  bool room_short_ = false;
  SingleFlight room_check_;  // one check at a time: a caller during one waits for its answer
  asio::steady_timer claim_ended_;    // cancelled as a claim in flight ends: wakes give_back
  std::unique_ptr<Completer> completer_;  // uses fin_
  std::map<std::int64_t, std::shared_ptr<Job>> jobs_;
  std::int64_t max_lease_ = 0;  // the highest lease any claim returned
  std::int64_t claimed_ = 0;    // jobs claimed since start (--exit-when-idle's line)
  // Set when a claim failed with a connection error, until bgexec.unclaim
  // has run: the highest lease received before it was sent, and when to
  // try next.
  struct Unclaim {
    std::int64_t after_lease;
    Clock::time_point next_try;
  };
  Slots sql_sessions_;     // --sql-steps
  Slots step_processes_;   // --step-processes
  int tight_pools_ = 0;    // of the two, those smaller than --concurrency
  int unstarted_ = 0;      // job_claimed, job_began
  // Per pool (sql sessions, step processes): the jobs the worker may hold
  // unstarted past its free slots when nothing waits for one (step_room).
  std::array<int, 2> past_free_{1, 1};
  bool id_taken_ = false;  // another process holds the id: no deregister
  // {"host", "pid"} as registered: claim, unclaim and heartbeat name it (NULL,
  // unchecked, until registered).
  std::optional<std::string> process_;
  std::optional<Unclaim> unclaim_;
  // Leases of the latest jobs that ended without a finish written (they may
  // still run under their lease in the database): unclaim must not take
  // them for jobs never received.  The newest 4096.
  std::vector<std::int64_t> unfinished_;
  // Claims run on two connections (the notifier's await_claim and poll, the
  // fetcher's claim), so each counts against the other the slots it may
  // fill while in flight: together they never take more than free_slots().
  int await_asked_ = 0;  // the notifier's claiming call in flight
  int await_counts_on_ = 0;  // the free slots the notifier's last wait counts on (wakes pick it for)
  // A job ended while that wait counted on no slot.  Wakes passed the wait
  // by, and the fetcher's claim at the job's end saw only the jobs committed
  // before it: the notifier polls when the wait returns, so a job submitted
  // in between waits for that, not for the poll interval.
  bool freed_while_deaf_ = false;
  int fetch_asked_ = 0;  // the fetcher's claim in flight
  // The notifier waits in await_claim and polls: the fetcher claims only
  // on a backlog, a slot freed, or a wake await_claim could not serve.
  bool await_mode_ = false;
  bool backlog_ = false;  // the last claim took all it asked for: more to come
  // Why the fetcher would claim: a NOTIFY for one of its queues since the
  // last claim was sent (`notified_`), or the poll interval since then.
  // A slot coming free is no reason alone: most claims it made found nothing.
  bool notified_ = false;
  Clock::time_point next_poll_{};  // the first claim is due at once
  // A job ended (its finish written) since the last claim was sent: in a
  // queue with max_running (or a per-key cap) that may make a queued job
  // claimable.  The finish wakes a worker waiting in await_claim, but sends
  // a LISTENing worker only a NOTIFY, which waits out its backoff.
  bool slot_freed_ = false;
  // bgexec.await_claim was woken for jobs it could not claim (no slot it
  // could fill, or another claimer was first) since the last claim was
  // sent: claims at once (a NOTIFY woke every worker, and waits its backoff).
  bool picked_ = false;
  // Claims woken by NOTIFY alone that found nothing in a row (every idle
  // worker listening on a queue wakes for each submit; one gets the job),
  // and until when the next such claim waits (--claim-backoff).
  int lost_claims_ = 0;
  Clock::time_point quiet_until_{};
  bool draining_ = false;
  bool stopping_ = false;
  // The heartbeater's call is on its way (run() waits for it before the
  // deregister); InFlight sets it for a scope, or until done(), and wakes
  // run() (beat_ended_) as it ends.
  bool beat_in_flight_ = false;
  struct InFlight {
    Worker& w;
    explicit InFlight(Worker& worker) : w(worker) { w.beat_in_flight_ = true; }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;
    ~InFlight() { done(); }
    void done() {
      if (std::exchange(w.beat_in_flight_, false)) w.beat_ended_.notify();
    }
  };
  // offload's thread: one, so large outputs are handled one at a time (as
  // on the loop before, the memory they take at once is one output's).
  asio::thread_pool compute_{1};
  int signals_seen_ = 0;
  std::unique_ptr<asio::steady_timer> grace_timer_;
  // While the notifier LISTENs instead of waiting in await_claim: ends the
  // LISTEN now and then, so that await_claim is tried again (bgexec
  // preloaded since, the extension created again).
  std::unique_ptr<asio::steady_timer> recheck_timer_;
  bool rechecking_ = false;
};

}  // namespace bgexec::worker
