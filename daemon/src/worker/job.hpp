#pragma once
// One claimed job: the DAG scheduler and its step runners (action, run, sql,
// sleep, approval, http).  Every write names the job's lease; once the lease is
// lost (or could not be renewed in time) the job kills its processes and
// writes nothing more.

#include "core/dag.hpp"
#include "core/mask.hpp"
#include "core/template.hpp"
#include "util/event.hpp"
#include "util/fifo_lock.hpp"
#include "worker/worker.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace bgexec::proc {
class Child;
struct Exit;
}  // namespace bgexec::proc

namespace bgexec::worker {

// What claim() handed us, with the DB-clock times converted to local monotonic ones.
struct Claim {
  std::int64_t job_id = 0;
  std::int64_t lease = 0;
  std::string queue, kind, owner;
  std::string payload_text;          // parsed by the job, so bad JSON fails the job only
  std::string completed_steps_text;
  std::string completed_stdout_text;  // step id -> captured stdout, same runs
  int started_seq = 0;                // seq of this attempt's started event
  int attempt = 0;
  int max_attempts = 1;
  std::optional<Clock::time_point> deadline;
  Clock::time_point lease_expiry;
};

// Why a job is being ended early.
// snooze: given back to sleep (--snooze-after), not ended.
enum class StopReason { none, stop, timeout, shutdown, snooze };

class Job : public std::enable_shared_from_this<Job> {
 public:
  Job(Worker& w, Claim c);
  ~Job();

  asio::awaitable<void> run();

  std::int64_t id() const { return c_.job_id; }
  std::int64_t lease() const { return c_.lease; }
  // Whether the job still holds (and should renew) its lease.
  bool live() const { return !abandoned_ && !finished_; }
  // Whether its finish reached the database (applied or refused): the job
  // is no longer running under its lease there.
  bool finish_written() const { return finish_written_; }
  // Whether run() has returned: no step of this run is left.
  bool over() const { return over_; }
  // Returns once run() has returned (at once if it has).  One waiter: the
  // job's next run on this worker.
  asio::awaitable<void> wait_over();
  // A later run of the same job took over its fence in the step guard
  // (kept by job id): this one's end must not make the guard forget it.
  void superseded() { superseded_ = true; }
  // Past the point where the lease guard gives the job up (its lease
  // expiry less Worker::lease_margin).
  bool lease_spent() const;

  // Heartbeat answer for this lease (ok|stop|lost), for a heartbeat sent at `sent`.
  void on_heartbeat(const std::string& action, Clock::time_point sent);
  // Ends the job early: kills its steps; finishes cancelled/timed_out/failed.
  void request_stop(StopReason why);
  // The lease is gone: kill everything and write nothing more.
  void abandon(const std::string& why);
  // The worker began to drain: once the job's running steps are all
  // sleeps, it gives itself back to the queue (snooze).
  void on_drain() { wake_.notify(); }

 private:
  struct Abandoned {};
  // The step guard's fence for this job (proc::guard::fence), from its lease.
  void fence_steps();
  // Its first step asked for a step slot of `asked`, or needs none
  // (nullptr), or the job is ending: no longer counted against the
  // worker's small pools (Worker::job_began).
  void began(const Worker::Slots* asked = nullptr);
  // Gives the job up when its lease is spent; throws Abandoned when it is given up.
  void check_lease();
  // A step's failure: becomes the job's error object.
  struct StepFailure {
    StepFailure(std::string m, bool r, std::string why = {})
        : message(std::move(m)), retryable(r), reason(std::move(why)) {}
    std::string message;
    bool retryable = true;
    std::string reason;  // the error's "reason" when not empty (step_timeout)
    bool host = false;   // the host could not start its process (out of processes, descriptors, memory)
  };
  // A step's own deadline (its "timeout"): when it passes while the step
  // runs, on_expiry ends the step as a stop would.  Disarmed when destroyed,
  // so a timer that already fired cannot touch a step that has ended.
  class StepDeadline {
   public:
    explicit StepDeadline(asio::any_io_executor ex);
    ~StepDeadline();
    StepDeadline(const StepDeadline&) = delete;
    StepDeadline& operator=(const StepDeadline&) = delete;
    // on_expiry: whether it ended the step (false: it had ended already).
    void arm(Clock::duration d, std::function<bool()> on_expiry);
    // The step is over: a deadline passing from now on does nothing.
    void disarm();
    bool passed() const { return state_->passed; }
    // Passed, and ended the step: a process that exited before its
    // deadline, its output read past it, was not.
    bool ended() const { return state_->ended; }

   private:
    struct State {
      bool armed = true;
      bool passed = false;
      bool ended = false;
    };
    asio::steady_timer timer_;
    std::shared_ptr<State> state_;
  };
  struct ProcOutput {
    std::string stdout_text;
  };
  using EnvVars = std::vector<std::pair<std::string, std::string>>;

  asio::awaitable<void> execute();
  asio::awaitable<void> run_step(std::string id);
  asio::awaitable<void> step_ended(const std::string& sid);
  // body (the error of a job ended by a stop, its timeout or a shutdown)
  // naming the steps that ended: "step", and "steps" when several ran.
  nlohmann::json with_ended_steps(nlohmann::json body) const;
  // A run/action step's process: its stdout as read (not yet storable) in
  // stdout_text, for run_step's process_output.
  asio::awaitable<void> step_action(const std::string& id, const nlohmann::json& step, std::string& stdout_text);
  asio::awaitable<void> step_run(const std::string& id, const nlohmann::json& step, std::string& stdout_text);
  // An http step's request (gated by --allow-http); a 2xx response's body
  // in body_text, read as a process's stdout is (process_output).
  asio::awaitable<void> step_http(const std::string& id, const nlohmann::json& step, std::string& body_text);
  // A sql step's rows; recorded: its step_completed was written in its own
  // transaction (then the output is masked and stored as the event holds it).
  // An event's text for append_events, of data masked, made on the
  // compute thread; the data moved there and back.
  struct OffloadedEvent {
    std::string events;
    nlohmann::json data;
    bool large = false;
    std::size_t output_bytes = 0;  // data's "output" as compact JSON
  };
  asio::awaitable<OffloadedEvent> offload_event(const std::string& kind, nlohmann::json data);
  // Waits for the ticket `slot` holds (Slots::Held::wait, in the order
  // asked); false when step `id` ended first: a stop, a sibling's failure,
  // the lease or the shutdown (kill_steps), or its deadline if given
  // (on_step_deadline), each through the step's killer, which cuts the
  // ticket and is installed meanwhile.  A sql step's wait for a session
  // and a step process's wait are this one.
  asio::awaitable<bool> await_slot(Worker::Slots::Held& slot, const std::string& id, const StepDeadline* deadline);
  // Whether the transaction xid committed (a sql step's COMMIT whose reply was lost).
  asio::awaitable<bool> committed(const std::string& xid);
  asio::awaitable<nlohmann::json> step_sql(const std::string& id, const nlohmann::json& step,
                                           const StepDeadline& deadline, bool& recorded,
                                           std::size_t& output_bytes);
  asio::awaitable<void> step_sleep(const std::string& id, const nlohmann::json& step);
  asio::awaitable<ProcOutput> run_process(const std::string& id, const std::vector<std::string>& argv,
                                          const std::string& stdin_data, bool log_stdout, const EnvVars& env);
  // A run/action step's "env", rendered like its arguments; StepFailure naming
  // the variable when one cannot be passed.
  EnvVars step_env(const std::string& sid, const nlohmann::json& step);
  asio::awaitable<void> read_stream(asio::posix::stream_descriptor& sd, const std::string& id,
                                    const char* stream, bool log, std::string* capture);
  // Both of a process's outputs until they end (read_outputs), and the
  // leader's exit, after which they get a bounded time to end (reap_then_drain).
  struct OutputDrain;
  asio::awaitable<void> read_outputs(std::shared_ptr<proc::Child> child, std::string id, bool log_stdout,
                                     std::string* capture, std::shared_ptr<OutputDrain> drain);
  static asio::awaitable<proc::Exit> reap_then_drain(std::shared_ptr<proc::Child> child,
                                                     std::shared_ptr<OutputDrain> drain, Clock::duration limit,
                                                     std::string job_id, std::string id);

  // Until when its writes are retried (Until): its lease expiry as
  // heartbeats renew it, until the job gives the lease up (abandon: lost,
  // or not renewed in time); none once the job is gone.
  Until write_until();
  // Writes (all fenced by the lease; Abandoned when refused or out of time).
  asio::awaitable<std::optional<std::string>> write(const std::string& sql, const pg::Params& params);
  // Abandons the run (throws Abandoned) on a connection/retry-class error of a write.
  void on_write_error(const pg::Error& e);
  asio::awaitable<void> append(const std::string& kind, nlohmann::json data);
  // append's write of data masked in place, for a caller that keeps data:
  // a step's output, which may be 16 MiB of rows, is not copied.
  // Masked and dumped off the event loop (Worker::offload).
  // heavy: offloaded (a large output); else on the loop, as append.
  // Returns the size of data's "output" as compact JSON (0 without one).
  asio::awaitable<std::size_t> append_kept(const std::string& kind, nlohmann::json& data, bool heavy);
  // Writes an event array's text (event_text's); large: held_large_.
  asio::awaitable<void> append_events(std::string events, bool large);
  // One append_event(s) call: one at a time per job, with the last seq the
  // job knows as after_seq, so a batch re-sent after a lost reply is written
  // once.  `sql` takes after_seq as its last parameter.
  asio::awaitable<std::optional<std::string>> append_write(const std::string& sql, pg::Params params);
  asio::awaitable<void> flush_logs();
  asio::awaitable<void> finish(const std::string& outcome, nlohmann::json body);
  // The attempt gives the job back to the queue, uncounted (Worker::give_back),
  // its events written first; false when the database refused the call
  // (the caller fails the job as before).  Abandoned when the lease is spent.
  asio::awaitable<bool> give_back();
  // Whether the job should give itself back now: every step it runs is a
  // sleep whose timer is set (sleeps_), and the worker drains, or each has
  // more than --snooze-after left.
  bool snooze_due() const;
  // The job back to the queue until its sleeps' first wake-up, on the
  // database clock, its attempt not counted (bgexec.snooze), in place of
  // the shutdown's finish; false when the database refused the call with
  // an error (the shutdown's finish then ends the job).
  asio::awaitable<bool> snooze();
  void log_line(const std::string& id, const char* stream, std::string line);
  // A stderr line "::error {json}" of step `id`: remembered (the last one
  // wins) when its JSON is an object, and true; false for a line that is
  // not one (a log line then).
  bool error_directive(const std::string& id, const std::string& line);
  // The step's ::error keys merged into its failure's error (steer_error).
  static void steer_error(nlohmann::json& err, const nlohmann::json& said);
  void arm_flush();
  void kill_steps();
  // Step `sid` completed with an output of `bytes` as compact JSON: counted
  // when it is a sink; past --max-result-bytes the job fails (54000).
  void count_result(const std::string& sid, std::size_t bytes);
  // The job's error for a result of `bytes` past `limit` (at_least: the
  // sinks' outputs so far).
  static nlohmann::json over_limit_error(std::size_t bytes, std::size_t limit, bool at_least);
  // A step's deadline passed: ends it through its killer (TERM then KILL, a
  // cancel, the end of a sleep).
  bool on_step_deadline(const std::string& id, double seconds);
  // Renders a field of step `sid` (its templates: core::render), within
  // the job's render budget (render_cap, held until the step ends).
  nlohmann::json render(const nlohmann::json& v, const std::string& sid);
  nlohmann::json mask(const nlohmann::json& v) const { return masker_.mask_json(v); }
  nlohmann::json mask(nlohmann::json&& v) const {
    masker_.mask_json_in_place(v);
    return std::move(v);
  }

  Worker& w_;
  Claim c_;
  // What templates read: the job's input and its completed steps' outputs,
  // {id: {"output", "stdout"}}, read in place by every render (a copy of
  // them per render was a copy of every step's output, up to 16 MiB each).
  core::TemplateContext tctx_;
  nlohmann::json& input_ = tctx_.input;
  nlohmann::json& outputs_ = tctx_.steps;
  // Bytes the rendered fields of the running steps hold, in all and by step.
  std::size_t render_held_ = 0;
  std::map<std::string, std::size_t> rendered_;
  // A completed step's output is kept only while something will read it:
  // a step of this run still to end whose templates name it, or the job's
  // result (a sink).  Without this a job held every step's output to its
  // end: 1000 steps printing 16 MiB each were 16 GB in the worker.
  // readers_: step -> how many such readers are left (a sink counts one
  // that never leaves); reads_: step -> the steps its templates name.
  std::map<std::string, int> readers_;
  std::map<std::string, std::vector<std::string>> reads_;
  // Counts the readers from the steps still to run (after the completed
  // ones are known), and drops the outputs nothing will read.
  void count_readers();
  // Step `sid` has ended (run, failed or ended early): it reads nothing more.
  void release_reads(const std::string& sid);
  // Whether step `sid`'s output will be read (so is worth keeping).
  bool has_readers(const std::string& sid) const;
  // What step `sid`'s rendered fields held is free again.
  void release_render(const std::string& sid);
  // A step's "if" (true, false, or one template, "!" before it negating
  // it), rendered: whether the step runs.  StepFailure, not retryable, when
  // its value is not a boolean.
  bool condition(const std::string& sid, const nlohmann::json& c);
  std::optional<core::Dag> dag_;
  std::set<std::string> done_, running_, waiting_;
  std::optional<nlohmann::json> failure_;
  // Each step's last ::error object, masked: merged into its error should
  // it fail (steer_error), ignored should it complete.  At most a line's
  // 64 KiB each, one per step that printed one.
  std::map<std::string, nlohmann::json> said_;
  // The steps a stop, the job's timeout or a shutdown ended (step_ended):
  // the job's error names them, as a step's failure names its step.
  std::vector<std::string> ended_;
  // The job's steps are being ended: a stop (or timeout, shutdown), a lost
  // lease, or a step's failure.  A step that sees it starts nothing more.
  bool halted() const { return stop_ != StopReason::none || abandoned_ || failure_.has_value(); }
  // A step process or a sql statement of this attempt has started: its
  // effects may be out there, and a failure of the attempt counts.
  bool began_ = false;
  bool unstarted_ = true;  // counted in Worker::job_claimed until began()
  // The attempt failed because the host could start no step process
  // before any began: the job goes back to the queue, uncounted.
  bool give_back_ = false;
  std::map<std::string, std::function<bool()>> killers_;  // true: it ended something
  // The running sleeps, with the seconds each set out to sleep from its
  // step_started (snooze's wake-ups); snoozed_, those the job gives back
  // (not empty: the shutdown's stop is that give-back).
  struct Sleeping {
    double secs;
    Clock::time_point wake;
  };
  std::map<std::string, Sleeping> sleeps_;
  std::map<std::string, double> snoozed_;
  core::Masker masker_;
  Event wake_;
  asio::steady_timer deadline_timer_;
  asio::steady_timer flush_timer_;
  bool flush_armed_ = false;
  bool flush_now_ = false;  // the armed flush is for now (a batch's worth of lines waits)
  int log_flushes_ = 0;  // append_events in flight (finish waits for them: the terminal event stays last)
  int known_seq_ = 0;    // the job's last seq as of our latest append (or the claim)
  FifoLock append_order_;  // one append_event(s) call at a time
  nlohmann::json pending_logs_ = nlohmann::json::array();
  std::size_t pending_lines_ = 0;
  std::size_t log_bytes_ = 0;
  bool log_capped_ = false;
  StopReason stop_ = StopReason::none;
  bool abandoned_ = false;
  bool finished_ = false;
  bool finish_written_ = false;
  // The finish is with the completer, unanswered: a lease lost now may be
  // lost to that very finish (applied, its reply lost or on its way).
  bool finish_unanswered_ = false;
  // A step's output was large enough to be handled off the loop: so is the
  // finish, whose result may hold it.
  bool heavy_result_ = false;
  // The job's sinks (its result's steps), the sum of this run's sink
  // outputs as compact JSON, and whether it passed --max-result-bytes.
  std::set<std::string> sinks_;
  std::size_t sink_bytes_ = 0;
  bool result_over_ = false;
  bool over_ = false;
  Event over_event_;  // notified when over_ becomes true
  bool superseded_ = false;
  // An event of over a MiB was written: the job held large values (a
  // step's rows, its output), whose memory is handed back when it ends.
  bool held_large_ = false;
};

}  // namespace bgexec::worker
