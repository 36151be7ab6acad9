// One claimed job: DAG scheduler and step runners (see job.hpp).
#include "worker/job.hpp"

#include "core/backoff.hpp"
#include "core/http_url.hpp"
#include "core/duration.hpp"
#include "core/json_input.hpp"
#include "core/numeric.hpp"
#include "core/logfmt.hpp"
#include "core/sqlstate.hpp"
#include "core/utf8.hpp"
#include "proc/child.hpp"
#include "proc/guard.hpp"
#include "worker/http_call.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <system_error>

namespace bgexec::worker {

using nlohmann::json;
using namespace boost::asio::experimental::awaitable_operators;

namespace {

// A step's stdout past this is handled off the event loop (Worker::offload):
// at 64 KiB the handling takes well under a millisecond, less than the hop.
constexpr std::size_t offload_bytes = 64 << 10;
constexpr std::size_t capture_cap = 16 << 20;  // stdout kept for a step's output; a sql step's rows
constexpr std::size_t batch_lines = 200;        // log lines per append_events batch
// What a log line costs against --log-cap besides its bytes: its quotes
// and comma in the event.  Charged at 0, empty lines passed the cap for
// ever: `yes "" >&2` stored 4.8 million lines in 45 s, the worker at 100 %
// CPU and its other jobs stalled.
constexpr std::size_t line_overhead = 8;
// A stderr line's prefix for the step's word on its failure (::error).
constexpr std::string_view error_prefix = "::error ";
constexpr auto flush_delay = std::chrono::milliseconds(250);
// Most bytes the rendered fields (with, params, run, env, sleep, an
// approval's prompt) of a job's running steps hold at once: room for four
// step outputs of the most a step's output may be.  A template repeated in
// a string or an array copies its value each time: a payload of 1 MiB
// rendered to gigabytes, on a worker serving every tenant.
constexpr std::size_t render_cap = 64 << 20;
// Longest wait a step's sleep or timeout arms: a timer beyond ten years is as
// good as forever, and the cast to the clock's nanoseconds stays in range.
constexpr double max_step_wait_s = 10 * 365.25 * 86400;

Clock::duration step_wait(double s) { return seconds(std::min(s, max_step_wait_s)); }

// Seconds as a message shows them: "1", "0.5", "2.25".
std::string seconds_text(double s) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, s);
  return ec == std::errc{} ? std::string(buf, end) : std::to_string(s);
}

// A field submit refuses on a step of this kind, in a payload written past
// submit: its message (submit's), else nothing.
std::optional<std::string> misplaced_field(const json& step, const std::string& kind) {
  if (kind == "approval" && step.contains("timeout")) return "\"timeout\" is not allowed with \"approval\"";
  if (kind != "run" && kind != "action" && step.contains("env"))
    return "\"env\" is only allowed with \"run\" or \"action\"";
  return std::nullopt;
}

// A sql step's error as its message says it: the server's primary text,
// then its DETAIL, HINT and CONTEXT, without libpq's "ERROR:  " and the
// statement quoted back under "LINE 1:"; an error of the worker's own (a
// COPY, rows over the cap) without the connection's name.  DETAIL and
// CONTEXT may quote a piece of a parameter that no masker can know (the
// JSON token the server stopped at: Token "hunter2" is invalid): with a
// secret parameter, the primary text only.
std::string sql_error_text(const pg::Error& e, const std::string& conn_name, bool secret_param) {
  const auto& f = e.fields();
  if (f.primary.empty()) {
    std::string text = e.what();
    if (text.rfind(conn_name + ": ", 0) == 0) text.erase(0, conn_name.size() + 2);
    return text;
  }
  std::string text = f.primary;
  if (secret_param) return text;
  const auto one_line = [](std::string s) {  // CONTEXT's lines, a \r in a DETAIL
    for (char& c : s)
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    return s;
  };
  if (!f.detail.empty()) text += " DETAIL: " + one_line(f.detail);
  if (!f.hint.empty()) text += " HINT: " + one_line(f.hint);
  if (!f.context.empty()) text += " CONTEXT: " + one_line(f.context);
  return text;
}

// Captured stdout with one trailing newline, \n or \r\n, trimmed (as
// {{steps.ID.stdout}} sees it).  A lone \r is no newline: "abc\r" stays.
std::string trim_newline(std::string s) {
  if (s.empty() || s.back() != '\n') return s;
  s.pop_back();
  if (!s.empty() && s.back() == '\r') s.pop_back();
  return s;
}

// Whether the output stands in for `text` exactly (its text if a string,
// else its compact JSON, as core::render reads a stdout not recorded),
// without copying a text output (up to 16 MiB) to compare it.  Compact
// JSON with its numbers as stored: {"n":1e2} printed is not its output
// {"n":100}, and is recorded.
bool renders_stdout(const json& output, const std::string& text) {
  if (output.is_string()) return output.get_ref<const std::string&>() == text;
  return !output.is_null() && core::dump(output) == text;
}

// JSON nested past core::max_json_depth: nlohmann parses it iteratively, but
// copies, dumps and masking recurse once per level and overflow the stack.
std::string too_deep_text(const std::string& what) {
  return what + " nested deeper than " + std::to_string(core::max_json_depth) + " levels";
}

// A step's output from its stdout: the JSON value it printed, else the trimmed text
// (null when it printed nothing); nullopt, with why it cannot be stored in
// `error`, when it is JSON nested too deep or holding a number numeric
// refuses (the database refused the step's event with "value overflows
// numeric format", and the step was retried as if that could change).
std::optional<json> parse_output(const std::string& out, std::string& error) {
  std::string t = trim_newline(out);
  if (t.find_first_not_of(" \t\r\n") == std::string::npos) return nullptr;
  auto in = core::parse_json_input(t, core::max_json_depth, core::DuplicateKeys::last_wins, core::Numbers::exact);
  if (in.error == core::JsonInput::Error::too_deep) {
    error = too_deep_text("output is JSON");
    return std::nullopt;
  }
  if (!in) return json(t);
  if (const auto number = core::unstorable_number(in.value); !number.empty()) {
    error = "output is JSON holding " + core::numeric_refuses(number);
    return std::nullopt;
  }
  // The text is storable already; only a "\u0000" escape makes a NUL (which
  // PostgreSQL stores nowhere) in the value: walked only then.
  if (t.find("\\u0000") != std::string::npos) core::sanitize_utf8(in.value);
  return std::move(in.value);
}

// What a step's event and its kept entry hold, from its output (a sql
// step's rows, or null) and, for a process, its stdout as read.
struct StepOutput {
  json output;
  std::optional<std::string> stdout_text;  // the masked trimmed stdout, when its output does not render it
  std::optional<std::string> error;        // parse_output's: the output cannot be stored
};

// A step's output made storable and masked (with m: the job's masker, or
// a copy of it on the worker's compute thread, where run_step sends a
// large output, Worker::offload).  Binary stdout does not fail
// the step: invalid UTF-8 and NUL (`find -print0`) become U+FFFD, after
// masking, so no secret is missed because one of its bytes was replaced.
StepOutput process_output(const core::Masker& m, json output, std::string stdout_text, bool has_stdout) {
  StepOutput r;
  if (has_stdout) {
    if (!core::storable(stdout_text)) stdout_text = core::to_storable(m.mask(stdout_text));
    std::string unstorable;
    auto parsed = parse_output(stdout_text, unstorable);
    if (!parsed) {
      r.error = std::move(unstorable);
      return r;
    }
    output = std::move(*parsed);
  }
  // Masked and kept without a copy: a step's output may be 16 MiB of
  // rows, hundreds of MB as nlohmann values.
  m.mask_json_in_place(output);
  if (has_stdout) {
    std::string trimmed = m.mask(trim_newline(std::move(stdout_text)));
    // Text, or JSON printed compact, is its own output: the event carries
    // it once, a re-run gets it back from the output, and so does a
    // template of this run (core::render), so it is held once.
    if (!renders_stdout(output, trimmed)) r.stdout_text = std::move(trimmed);
  }
  r.output = std::move(output);
  return r;
}

const char* const step_kinds[] = {"action", "run", "sql", "sleep", "approval", "http"};

// The step's kind (the one key of step_kinds it has); empty when none or several.
std::string step_kind(const json& step) {
  std::string kind;
  for (const char* k : step_kinds) {
    if (step.contains(k)) {
      if (!kind.empty()) return "";
      kind = k;
    }
  }
  return kind;
}

std::string id_str(std::int64_t v) { return std::to_string(v); }

// What the worker tells every step process about itself; a step's "env"
// cannot set these (the worker's values are what scripts rely on, and all
// but BGEXEC_QUEUE mark the step's processes: proc/procfs.hpp, marker_vars;
// the worker and its step guard kill by them).
const char* const worker_vars[] = {"BGEXEC_JOB_ID", "BGEXEC_STEP_ID", "BGEXEC_ATTEMPT", "BGEXEC_QUEUE",
                                   "BGEXEC_WORKER_INSTANCE"};

// This worker process's BGEXEC_WORKER_INSTANCE: 128 random bits in hex,
// drawn once.  Not a secret (a step that copies it only makes another
// process count as its own).  Should the system give no randomness
// (std::random_device throws), the pid and the clock: unique on the host
// among live workers, which is what the marker needs.
const std::string& worker_instance() {
  static const std::string id = [] {
    unsigned w[4];
    try {
      std::random_device rd;
      for (auto& x : w) x = static_cast<unsigned>(rd());
    } catch (const std::exception&) {
      auto t = static_cast<unsigned long long>(std::chrono::system_clock::now().time_since_epoch().count());
      w[0] = static_cast<unsigned>(::getpid()), w[1] = static_cast<unsigned>(t >> 32), w[2] = static_cast<unsigned>(t),
      w[3] = 0;
    }
    char buf[33];
    std::snprintf(buf, sizeof buf, "%08x%08x%08x%08x", w[0], w[1], w[2], w[3]);
    return std::string(buf);
  }();
  return id;
}

bool is_worker_var(std::string_view name) {
  for (const char* v : worker_vars)
    if (name == v) return true;
  return false;
}

// Writes a step's stdin and closes it (EPIPE from a child that never reads is ignored).
asio::awaitable<void> feed_stdin(std::shared_ptr<proc::Child> c, std::shared_ptr<std::string> data) {
  if (!data->empty())
    co_await asio::async_write(c->in(), asio::buffer(*data), asio::as_tuple(asio::use_awaitable));
  boost::system::error_code ignored;
  c->in().close(ignored);
}

}  // namespace

Job::Job(Worker& w, Claim c)
    : w_(w), c_(std::move(c)), wake_(w.executor()), deadline_timer_(w.executor()),
      flush_timer_(w.executor()), known_seq_(c_.started_seq), append_order_(w.executor()),
      over_event_(w.executor()) {
  outputs_ = json::object();
  tctx_.secret = [this](const std::string& name) -> std::optional<std::string> {
    auto v = w_.secret(name);
    if (v) masker_.add(*v);
    return v;
  };
  fence_steps();
  w_.job_claimed();
}

void Job::began(const Worker::Slots* asked) {
  if (!unstarted_) return;
  unstarted_ = false;
  w_.job_began(asked);
}

Job::~Job() {
  if (!superseded_) proc::guard::forget(id_str(id()));
  // A step's 16 MiB of rows are a few hundred MB as nlohmann values, in
  // small blocks glibc keeps once freed: without a trim the worker stayed
  // at that size after the job.  Only after such a job (a large event
  // appended, or a large payload or completed outputs read): the trim
  // walks the heap.  Freed and trimmed on the worker's compute thread:
  // on the loop, freeing 5 million values and the trim held it for
  // seconds after the job, and the heartbeats of the jobs beside it.
  if (held_large_)
    w_.discard([steps = std::move(tctx_.steps), input = std::move(tctx_.input)]() mutable {
      steps = nullptr;
      input = nullptr;
      malloc_trim(0);
    });
}

// Where the lease guard gives the job up, unless renewed: the step guard
// stops its steps a tick (0.1 s) later, should this worker be unable to act
// (stopped, frozen).  A step the step guard ended is not reported: this
// worker finds the lease spent by then (lease_spent).  A job with a
// deadline is fenced there too, a kill grace and a tick after it: this
// worker stops the steps at the deadline (TERM, then KILL after the
// grace), and reconcile() makes the job timed_out at it, after which a
// retry may run it again; a frozen worker's step ran on until the lease.
void Job::fence_steps() {
  const auto tick = std::chrono::milliseconds(100);
  auto at = c_.lease_expiry - w_.lease_margin() + tick;
  if (c_.deadline)
    at = std::min(at, *c_.deadline + std::chrono::duration_cast<Clock::duration>(
                                         seconds(w_.config().kill_grace_s)) + tick);
  proc::guard::fence(id_str(id()), at);
}

bool Job::lease_spent() const { return Clock::now() >= c_.lease_expiry - w_.lease_margin(); }

void Job::on_heartbeat(const std::string& action, Clock::time_point sent) {
  if (!live()) return;
  if (action == "ok" || action == "stop") {
    c_.lease_expiry = std::max(c_.lease_expiry, sent + seconds(w_.config().lease_s));
    fence_steps();
    if (action == "stop") request_stop(StopReason::stop);
  } else if (action == "busy") {
    // Current, but another transaction holds the job's row: not renewed
    // this time.  The lease guard abandons the job if that lasts.
  } else {
    abandon("lease lost");
  }
}

// Not once a step has failed: the job is ending failed already, its other
// steps being killed, and a stop, the deadline or a shutdown arriving in
// that kill grace ended it cancelled, timed_out or as a retryable
// worker_shutdown (queued again, a failure marked not retryable among its
// events), the step's error lost.
void Job::request_stop(StopReason why) {
  if (stop_ != StopReason::none || failure_ || abandoned_ || finished_) return;
  stop_ = why;
  static const char* names[] = {"none", "stop requested", "deadline reached", "worker shutdown",
                                "sleeping: given back until its sleep ends"};
  core::log("info", "stopping job", {{"job_id", id_str(id())}, {"reason", names[static_cast<int>(why)]}});
  kill_steps();
  wake_.notify();
}

void Job::abandon(const std::string& why) {
  if (abandoned_ || finished_) return;
  abandoned_ = true;
  core::log("warn", "abandoning job",
            {{"job_id", id_str(id())},
             {"reason", finish_unanswered_ ? why + " while its finish was unanswered: the finish may have been applied"
                                           : why}});
  kill_steps();
  wake_.notify();
}

// A sink step's output (bytes as compact JSON) is part of the job's
// result: once the outputs of this run's sinks add up past
// --max-result-bytes the result will be refused (finish), so the job fails
// now, as a step's failure fails it: its other steps are ended, and the
// sinks' outputs held are dropped.  Refused at the finish only, a result
// of 20 outputs of 15 MB was held whole, then written as text: 600 MB of
// the worker's memory.  The sum is a lower bound of the result's size
// (its keys and braces not counted), so no result under the limit fails.
void Job::count_result(const std::string& sid, std::size_t bytes) {
  if (!sinks_.count(sid) || result_over_) return;
  sink_bytes_ += bytes;
  const std::size_t limit = w_.config().max_result_bytes;
  if (sink_bytes_ <= limit) return;
  result_over_ = true;
  for (const auto& s : sinks_) {
    if (!outputs_.contains(s)) continue;
    json& entry = outputs_[s];
    if (!entry.contains("output")) continue;
    w_.discard([d = std::move(entry["output"])]() mutable { d = nullptr; });
    entry.erase("output");
  }
  if (failure_ || halted()) return;
  core::log("error", "job result over the limit",
            {{"job_id", id_str(id())}, {"bytes", std::to_string(sink_bytes_)}, {"limit", std::to_string(limit)},
             {"step", sid}});
  failure_ = over_limit_error(sink_bytes_, limit, true);
  kill_steps();
}

json Job::over_limit_error(std::size_t bytes, std::size_t limit, bool at_least) {
  return {{"message", "the job's result is " + std::string(at_least ? "at least " : "") + std::to_string(bytes) +
                          " bytes as JSON, over the worker's --max-result-bytes of " + std::to_string(limit) +
                          " (its steps' outputs stay in their step_completed events; write large "
                          "output to a file and print its path)"},
          {"sqlstate", "54000"},
          {"result_bytes", bytes},
          {"max_result_bytes", limit},
          {"retryable", false}};
}

void Job::kill_steps() {
  auto killers = killers_;  // a killer may unregister itself
  for (auto& [id, k] : killers) k();
}

Job::StepDeadline::StepDeadline(asio::any_io_executor ex) : timer_(ex), state_(std::make_shared<State>()) {}

Job::StepDeadline::~StepDeadline() { disarm(); }

void Job::StepDeadline::disarm() {
  state_->armed = false;
  timer_.cancel();
}

void Job::StepDeadline::arm(Clock::duration d, std::function<bool()> on_expiry) {
  timer_.expires_after(d);
  timer_.async_wait([state = state_, f = std::move(on_expiry)](const boost::system::error_code& ec) {
    if (ec || !state->armed) return;
    state->passed = true;
    state->ended = f();
  });
}

// Ends the step for its timeout; false when its process had exited already
// (its output still being read: the step did not time out).  A step with
// no killer yet (not started) is ended all the same.
bool Job::on_step_deadline(const std::string& sid, double secs) {
  bool ended = true;
  if (auto it = killers_.find(sid); it != killers_.end()) {
    auto kill = it->second;  // a killer may unregister itself
    ended = kill();
  }
  if (ended)
    core::log("warn", "step timed out", {{"job_id", id_str(id())}, {"step", sid}, {"timeout_s", seconds_text(secs)}});
  return ended;
}

void Job::release_render(const std::string& sid) {
  if (auto it = rendered_.find(sid); it != rendered_.end()) {
    render_held_ -= std::min(render_held_, it->second);
    rendered_.erase(it);
  }
}

bool Job::condition(const std::string& sid, const json& c) {
  if (c.is_boolean()) return c.get<bool>();
  if (!c.is_string()) throw StepFailure{"step " + sid + ": \"if\" must be true, false or one template", false};
  std::string text = c.get<std::string>();
  const bool negate = !text.empty() && text[0] == '!';
  if (negate) text.erase(0, 1);
  // Text that is no template (written past submit, which refuses it) is
  // said to be so: "true" was rendered as itself and reported as a
  // template's value, '"if" true is "true", not true or false'.
  // (One template: "{{" first, and its one "}}" last, as submit reads it.)
  if (text.rfind("{{", 0) != 0 || text.size() < 4 || text.find("}}") != text.size() - 2)
    throw StepFailure{"step " + sid + ": \"if\" must be true, false or one template, not " +
                          core::utf8_cut(core::dump(c), 100, "…"),
                      false};
  json v = render(json(std::move(text)), sid);
  if (v.is_boolean()) return v.get<bool>() != negate;
  // Masked before it is cut: a secret cut at 100 bytes no longer matches
  // the masker, and its first 99 bytes were stored in the job's error.
  std::string shown = core::utf8_cut(core::dump(masker_.mask_json(v)), 100, "…");
  throw StepFailure{"step " + sid + ": \"if\" " + core::utf8_cut(c.get<std::string>(), 100, "…") + " is " + shown +
                        ", not true or false",
                    false};
}

void Job::count_readers() {
  for (const auto& sid : dag_->sinks()) {
    readers_[sid] = 1;
    sinks_.insert(sid);
  }
  for (const auto& sid : dag_->ids()) {
    if (done_.count(sid)) continue;
    auto& names = reads_[sid];
    names = core::referenced_steps(dag_->step(sid));
    for (const auto& x : names) ++readers_[x];
  }
  for (auto it = outputs_.begin(); it != outputs_.end();) {
    if (has_readers(it.key())) ++it;
    else it = outputs_.erase(it);
  }
}

void Job::release_reads(const std::string& sid) {
  auto r = reads_.find(sid);
  if (r == reads_.end()) return;
  for (const auto& x : r->second) {
    auto n = readers_.find(x);
    if (n == readers_.end() || --n->second > 0) continue;
    readers_.erase(n);
    if (done_.count(x)) outputs_.erase(x);
  }
  reads_.erase(r);
}

bool Job::has_readers(const std::string& sid) const {
  auto n = readers_.find(sid);
  return n != readers_.end() && n->second > 0;
}

json Job::render(const json& v, const std::string& sid) {
  std::vector<std::string> used;
  core::RenderBudget budget;
  budget.cap = render_cap;
  budget.left = render_cap - std::min(render_cap, render_held_);
  budget.bound = std::to_string(render_cap) + " bytes, the most the rendered fields of a job's running steps hold";
  const std::size_t before = budget.left;
  json out = core::render(v, tctx_, &used, &budget);
  for (auto& s : used) masker_.add(s);
  render_held_ += before - budget.left;
  rendered_[sid] += before - budget.left;
  return out;
}

// ---------------------------------------------------------------- writes

// A lease-guarded write failed: a connection, retry-class or transient
// error (a cancelled statement: core::transient) means it was made again
// until the lease could not be renewed in time, so the run is abandoned
// (Abandoned is thrown), never failed: the write's error is not the job's.
// Any other error returns to the caller, which rethrows it.
void Job::on_write_error(const pg::Error& e) {
  if (abandoned_) throw Abandoned{};
  auto cls = e.classify();
  if (cls == core::ErrorClass::connection || cls == core::ErrorClass::retry || core::transient(e.sqlstate())) {
    abandon(std::string("database write failed until the lease expired: ") + e.what());
    throw Abandoned{};
  }
}

// Before a fenced write: a job whose lease was not renewed in time is given
// up, as the lease guard would at its next tick, not reported (its steps may
// have been ended by the step guard meanwhile: a worker that was stopped or
// frozen past the fence finds them so as it wakes).
void Job::check_lease() {
  if (!abandoned_ && lease_spent()) abandon("lease could not be renewed before it expired");
  if (abandoned_) throw Abandoned{};
}

Until Job::write_until() {
  return [self = weak_from_this()] {
    auto job = self.lock();
    return job && !job->abandoned_ ? job->c_.lease_expiry : Clock::time_point::min();
  };
}

asio::awaitable<std::optional<std::string>> Job::write(const std::string& sql, const pg::Params& params) {
  check_lease();
  pg::Result r;
  try {
    // Retried while heartbeats keep the lease: after it, or once the job
    // gave it up, the DB refuses it (and nothing is written under a lease
    // known lost).  A time copied here ran out while the heartbeats went
    // on renewing the lease, and the job was given up.
    r = co_await w_.ctl_exec(sql, params, write_until());
  } catch (const pg::Error& e) {
    on_write_error(e);
    throw;
  }
  if (abandoned_) throw Abandoned{};
  co_return r.get(0, 0);
}

namespace {

// known_seq moved up to the seq an append wrote (its function's answer).
void note_written(int& known_seq, const std::optional<std::string>& seq) {
  if (!seq) return;
  char* end = nullptr;
  long v = std::strtol(seq->c_str(), &end, 10);
  if (*end == '\0' && v > known_seq && v <= INT32_MAX) known_seq = static_cast<int>(v);
}

}  // namespace

asio::awaitable<std::optional<std::string>> Job::append_write(const std::string& sql, pg::Params params) {
  co_await append_order_.lock();
  FifoLock::Guard guard{append_order_};
  params.push_back(std::to_string(known_seq_));
  auto seq = co_await write(sql, params);
  note_written(known_seq_, seq);
  co_return seq;
}

namespace {

// The one-event array append_events takes, of data masked in place (m),
// built here as text: with append_event, the server built it with
// jsonb_build_array and jsonb_build_object, each taking the data apart
// node by node, and a step output of 5 million empty objects (15 MB) took
// its backend to 10 GB and 28 s.  large: the data's text is over 1 MiB.
// output_bytes: when data holds an "output", its size as compact JSON (the
// step's part of the job's result), measured as the text is made: the
// output dumped apart and spliced in first, where the object's sorted keys
// put it, so the text is as one dump made it.
std::string event_text(const core::Masker& m, const std::string& kind, json& data, bool& large,
                       std::size_t* output_bytes = nullptr) {
  m.mask_json_in_place(data);
  const std::string head = "[{\"kind\":\"" + kind + "\",\"data\":";
  std::string events;
  if (auto it = data.find("output"); output_bytes && data.is_object() && it != data.end()) {
    json output = std::move(*it);
    data.erase(it);
    std::string rest = core::dump(data);  // {"step":…}, never empty: it names the step
    std::string text = core::dump(output);
    *output_bytes = text.size();
    data["output"] = std::move(output);
    events.reserve(head.size() + text.size() + rest.size() + 16);
    events += head;
    events += "{\"output\":";
    events += text;
    text = std::string();
    if (rest.size() > 2) events += ',';
    events.append(rest, 1, std::string::npos);
  } else {
    events = head + core::dump(data);
  }
  large = events.size() - head.size() > (1u << 20);
  events += "}]";
  return events;
}

}  // namespace

asio::awaitable<void> Job::append(const std::string& kind, json data) {
  co_await flush_logs();
  bool large = false;
  std::string events = event_text(masker_, kind, data, large);
  co_await append_events(std::move(events), large);
}

asio::awaitable<std::size_t> Job::append_kept(const std::string& kind, json& data, bool heavy) {
  co_await flush_logs();
  if (!heavy) {
    bool large = false;
    std::size_t bytes = 0;
    std::string events = event_text(masker_, kind, data, large, &bytes);
    co_await append_events(std::move(events), large);
    co_return bytes;
  }
  OffloadedEvent done = co_await offload_event(kind, std::move(data));
  data = std::move(done.data);
  co_await append_events(std::move(done.events), done.large);
  co_return done.output_bytes;
}

asio::awaitable<Job::OffloadedEvent> Job::offload_event(const std::string& kind, json data) {
  // A step's output, up to 16 MiB: masked and written as text on the
  // worker's compute thread (Worker::offload), not on the event loop.  The
  // data is moved there and back (not copied, not shared), the masker
  // copied as it is now.
  auto work = [m = masker_, kind, d = std::move(data)]() mutable {
    OffloadedEvent r;
    r.events = event_text(m, kind, d, r.large, &r.output_bytes);
    r.data = std::move(d);
    return r;
  };
  co_return co_await w_.offload(std::move(work));
}

asio::awaitable<void> Job::append_events(std::string events, bool large) {
  if (large) held_large_ = true;
  pg::Params arg1_ = {id_str(id()), id_str(lease())};
  arg1_.push_back(std::move(events));  // not through the initializer list, which copies
  auto seq = co_await append_write("SELECT bgexec.append_events($1, $2, $3::jsonb, $4)", std::move(arg1_));
  if (!seq) {
    abandon("append_event refused: lease no longer current");
    throw Abandoned{};
  }
}

bool Job::error_directive(const std::string& id, const std::string& line) {
  std::string masked = masker_.mask(line);
  if (!core::storable(masked)) masked = core::to_storable(masked);
  // As a ::progress line is read: not JSON, nested too deep, holding a
  // number numeric refuses, or not an object: a log line.
  auto in = core::parse_json_input(std::string_view(masked).substr(error_prefix.size()), core::max_json_depth,
                                   core::DuplicateKeys::last_wins, core::Numbers::exact);
  if (!in || !in.value.is_object() || !core::unstorable_number(in.value).empty()) return false;
  if (masked.find("\\u0000") != std::string::npos) core::sanitize_utf8(in.value);  // as parse_output
  // Masked again once parsed (an escape the text's masking did not know).
  said_[id] = masker_.mask_json(in.value);
  return true;
}

// A step's own word on its failure (its last ::error object), merged into
// the error the worker made of it.  The worker's keys stay the worker's:
// "step" (which step failed, read by the job's other steps' errors),
// "reason" (step_timeout; the database reads cannot_start_steps) and
// "detail"; "retryable" can only go from true to false (a step cannot make
// retryable what the worker found final: an output too large); a string
// "message" replaces the worker's, which is kept under "detail" then.
// Every other key is the step's, as it said it: "retry_after" (read by
// finish: a number of seconds, else ignored), "code", anything else.
void Job::steer_error(json& err, const json& said) {
  for (const auto& [key, value] : said.items()) {
    if (key == "step" || key == "reason" || key == "detail" || key == "retryable" || key == "message") continue;
    err[key] = value;
  }
  if (auto r = said.find("retryable"); r != said.end() && r->is_boolean() && !r->get<bool>()) err["retryable"] = false;
  if (auto m = said.find("message"); m != said.end() && m->is_string()) {
    err["detail"] = std::move(err["message"]);
    err["message"] = *m;
  }
}

void Job::log_line(const std::string& id, const char* stream, std::string line) {
  if (abandoned_) return;
  // A stderr line "::error JSON-object": the step's word on how its failure
  // is retried, remembered, not stored as a line; read past --log-cap too
  // (it steers the job, and stores nothing but the last one).
  if (std::string_view(stream) == "stderr" && line.rfind(error_prefix, 0) == 0 && error_directive(id, line)) return;
  // Past the cap nothing more is stored, so nothing more is masked.
  if (log_capped_) return;
  std::string masked = masker_.mask(line);
  // Binary output is stored, not refused: invalid UTF-8 and NUL become U+FFFD.
  if (!core::storable(masked)) masked = core::to_storable(masked);
  // Progress lines count against --log-cap as log lines do: a step printing
  // them in a loop wrote events without bound.
  const bool over_cap = log_bytes_ + masked.size() + line_overhead > w_.config().log_cap_bytes;
  // A stderr line "::progress JSON" becomes a progress event (same batch, same order).
  static constexpr std::string_view progress_prefix = "::progress ";
  if (!over_cap && std::string_view(stream) == "stderr" && masked.rfind(progress_prefix, 0) == 0) {
    // Not JSON (or nested too deep to handle, or holding a number numeric
    // refuses, which failed its whole batch of events): kept as a log line.
    auto in = core::parse_json_input(std::string_view(masked).substr(progress_prefix.size()), core::max_json_depth,
                                     core::DuplicateKeys::last_wins, core::Numbers::exact);
    if (in && core::unstorable_number(in.value).empty()) {
      if (masked.find("\\u0000") != std::string::npos) core::sanitize_utf8(in.value);  // as parse_output
      log_bytes_ += masked.size() + line_overhead;
      // Masked again once parsed, as a step's output is: an escape the
      // text's masking did not know ("\u0073" for an 's') decodes to the
      // secret itself.
      pending_logs_.push_back(
          {{"kind", "progress"}, {"data", {{"step", id}, {"progress", masker_.mask_json(in.value)}}}});
      ++pending_lines_;
      arm_flush();
      return;
    }
  }
  if (over_cap) {
    log_capped_ = true;
    masked = "[bgexec: log cap of " + std::to_string(w_.config().log_cap_bytes) +
             " bytes reached; further output is not stored]";
  }
  log_bytes_ += masked.size() + line_overhead;
  if (!pending_logs_.empty()) {
    // find, not []: a progress event has no "stream", and [] added one (null).
    auto& last = pending_logs_.back()["data"];
    if (auto st = last.find("stream"); last["step"] == id && st != last.end() && *st == stream) {
      last["lines"].push_back(std::move(masked));
      ++pending_lines_;
      arm_flush();
      return;
    }
  }
  pending_logs_.push_back(
      {{"kind", "log"}, {"data", {{"step", id}, {"stream", stream}, {"lines", json::array({masked})}}}});
  ++pending_lines_;
  arm_flush();
}

void Job::arm_flush() {
  // Armed once: re-arming the timer for every line past a batch's worth
  // cost a cancel, a new wait and a timerfd_settime per line.
  const bool now = pending_lines_ >= batch_lines;
  if (flush_armed_ && (flush_now_ || !now)) return;
  flush_timer_.expires_after(now ? std::chrono::steady_clock::duration::zero() : flush_delay);
  flush_armed_ = true;
  flush_now_ = now;
  flush_timer_.async_wait([self = weak_from_this()](const boost::system::error_code& ec) {
    auto job = self.lock();
    if (ec || !job) return;
    job->flush_armed_ = false;
    job->flush_now_ = false;
    asio::co_spawn(job->w_.executor(),
                   [job]() -> asio::awaitable<void> {
                     try {
                       co_await job->flush_logs();
                     } catch (const Abandoned&) {
                     } catch (const std::exception& e) {
                       core::log("warn", "log flush failed", {{"job_id", id_str(job->id())}, {"error", e.what()}});
                     }
                   },
                   asio::detached);
  });
}

asio::awaitable<void> Job::flush_logs() {
  if (pending_logs_.empty() || abandoned_) co_return;
  json batch = std::move(pending_logs_);
  pending_logs_ = json::array();
  pending_lines_ = 0;
  std::optional<std::string> seq;
  ++log_flushes_;
  try {
    // In one append_events.  Should the database refuse its data (SQLSTATE
    // class 22: a value it cannot store, which log_line's checks should
    // have kept out), its events one at a time, an event refused alone
    // replaced by a log line saying so: one bad event took its whole batch
    // with it (the lines around it, the progress), and only the worker's
    // log told.  Under one turn of append_order_ (append_write's), so
    // nothing is written between them; a statement per event, paid only
    // after such a refusal.
    co_await append_order_.lock();
    FifoLock::Guard guard{append_order_};
    static const std::string sql = "SELECT bgexec.append_events($1, $2, $3::jsonb, $4)";
    // append_write's parameters and its note of the seq written, the lock held here.
    auto params = [this](const json& events) {
      return pg::Params{id_str(id()), id_str(lease()), core::dump(events), std::to_string(known_seq_)};
    };
    auto written = [this](const std::optional<std::string>& r) { note_written(known_seq_, r); };
    auto log_refused = [this](const std::string& why) {
      core::log("warn", "events refused, written one at a time", {{"job_id", id_str(id())}, {"error", why}});
    };
    auto refused = [](const pg::Error& e) -> std::string {
      if (e.connection_lost() || e.sqlstate().rfind("22", 0) != 0) throw;
      return e.fields().primary.empty() ? e.what() : e.fields().primary;
    };
    std::string why;  // the server's message (no co_await in a handler)
    try {
      const pg::Params all = params(batch);
      seq = co_await write(sql, all);
      written(seq);
    } catch (const pg::Error& e) {
      why = refused(e);
    }
    if (!why.empty()) {
      log_refused(why);
      for (const auto& event : batch) {
        why.clear();
        try {
          // Built apart: GCC cannot keep an initializer_list's array across a co_await.
          const pg::Params one = params(json::array({event}));
          seq = co_await write(sql, one);
          written(seq);
        } catch (const pg::Error& e) {
          why = refused(e);
        }
        if (!why.empty()) {
          const json& data = event["data"];
          const std::string line = "[bgexec: a " + event.value("kind", std::string("log")) +
                                   " event could not be stored: " + why + "]";
          json note = {{"kind", "log"},
                       {"data",
                        {{"step", data.contains("step") ? data["step"] : json("")},
                         {"stream", "stderr"},
                         {"lines", json::array({line})}}}};
          const pg::Params noted = params(json::array({std::move(note)}));
          seq = co_await write(sql, noted);
          written(seq);
        }
        if (!seq) break;
      }
    }
  } catch (...) {
    --log_flushes_;
    wake_.notify();
    throw;
  }
  --log_flushes_;
  wake_.notify();
  if (!seq) {
    abandon("append_events refused: lease no longer current");
    throw Abandoned{};
  }
}

// The outcome goes to the worker's completer, which writes it with others in
// one finish_many (one commit per batch) on its own connection; the job's
// events are all written before (flush_logs, and any timer-driven flush still
// in flight on the control connection), so the terminal event stays last.
// Fenced by the lease like every write.
asio::awaitable<void> Job::finish(const std::string& outcome, json body) {
  began();
  co_await flush_logs();
  while (log_flushes_ > 0) co_await wake_.wait();
  // The body masked and written as text on the worker's compute thread
  // (Worker::offload) when it may hold a large step output (16 MiB each),
  // or a large payload or completed output read at the claim.
  std::string item;
  if (heavy_result_ || held_large_) {
    auto work = [m = masker_, job_id = id(), lease = lease(), outcome, b = std::move(body)]() mutable {
      m.mask_json_in_place(b);
      return Completer::item_text(job_id, lease, outcome, b);
    };
    item = co_await w_.offload(std::move(work));
  } else {
    masker_.mask_json_in_place(body);
    item = Completer::item_text(id(), lease(), outcome, body);
  }
  // A completed job's result past --max-result-bytes (its sink steps'
  // outputs, each up to 16 MiB, add up) fails the job instead: not
  // retried (its steps would make it again), each step's output still in
  // its step_completed event.  Checked here, on the text about to be sent:
  // past jsonb's 255 MiB the finish itself failed, and a result a little
  // under it cost every reader (status, a retry's claim) seconds and
  // hundreds of MB.
  std::string outcome_sent = outcome;
  // (The item is the body and a few dozen bytes more: only one past the
  // limit is measured, a compare on the finish's path.)
  if (const std::size_t limit = w_.config().max_result_bytes; outcome == "completed" && item.size() > limit) {
    const std::size_t wrapper = Completer::item_text(id(), lease(), outcome, json()).size() - 4;  // less "null"
    const std::size_t bytes = item.size() - wrapper;
    if (bytes > limit) {
      item.clear();
      item.shrink_to_fit();
      core::log("error", "job result over the limit",
                {{"job_id", id_str(id())}, {"bytes", std::to_string(bytes)}, {"limit", std::to_string(limit)}});
      json body = over_limit_error(bytes, limit, false);
      outcome_sent = "failed";
      item = Completer::item_text(id(), lease(), outcome_sent, body);
    }
  }
  check_lease();
  FinishResult r;
  try {
    // Retried on a dropped connection while heartbeats keep the lease (as
    // write does): its result is not thrown away while the lease lives.
    finish_unanswered_ = true;
    r = co_await w_.completer().finish(id(), lease(), std::move(item), write_until());
  } catch (const pg::Error& e) {
    on_write_error(e);  // abandons (saying the finish may have been applied) on a connection error
    finish_unanswered_ = false;
    throw;
  }
  finish_unanswered_ = false;
  finish_written_ = true;
  // Applied: said so even when the job was abandoned while the reply was
  // on its way (a heartbeat whose snapshot followed the finish's commit
  // answers "lost"), which logged a completed job as "abandoning job"
  // alone.
  if (r.status)
    core::log("info", "job finished", {{"job_id", id_str(id())}, {"outcome", outcome_sent}, {"status", *r.status}});
  if (abandoned_) throw Abandoned{};
  finished_ = true;
  if (!r.status) {
    // After a re-sent batch, a refusal may mean the first attempt was
    // applied: its reply was lost, and the job ended then (the lease with
    // it).  Said so, where "refused" alone read as a job lost.
    if (r.retried)
      core::log("warn", "finish re-sent and refused: the first attempt may have been applied",
                {{"job_id", id_str(id())}, {"outcome", outcome_sent}, {"retried", "true"}});
    else
      core::log("warn", "finish refused: lease no longer current",
                {{"job_id", id_str(id())}, {"outcome", outcome_sent}, {"retried", "false"}});
  }
}

// Its events (the step_failed saying why) are written first, so unclaim's
// retry_scheduled is the attempt's last, as a finish's terminal event is.
// NULL from unclaim (a claim of this worker still running on the server),
// a lost connection or a row held: asked again 0.5 s later while the
// lease lasts (a reply lost after the commit finds the job no longer
// running under the lease: 0).
asio::awaitable<bool> Job::give_back() {
  co_await flush_logs();
  while (log_flushes_ > 0) co_await wake_.wait();
  for (;;) {
    check_lease();
    std::optional<std::string> n;
    std::string refused;
    bool again = false;
    try {
      n = co_await w_.give_back(lease());
      again = !n;
    } catch (const pg::Error& e) {
      const auto cls = e.classify();
      again = cls == core::ErrorClass::connection || cls == core::ErrorClass::retry ||
              core::transient(e.sqlstate()) || e.sqlstate() == "55P03";
      if (!again) refused = e.what();
    }
    if (!refused.empty()) {
      core::log("error", "job could not be given back; failing it", {{"job_id", id_str(id())}, {"error", refused}});
      co_return false;
    }
    if (again) {
      co_await sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    // No longer running under this lease: nothing more is written, nor renewed.
    finished_ = true;
    finish_written_ = true;
    if (*n == "0")
      core::log("warn", "job not given back: lease no longer current", {{"job_id", id_str(id())}});
    else
      // (The server counts the attempt instead after 10 give-backs in a row:
      // unclaim; the job's retry_scheduled or failed event says which.)
      core::log("warn", "job given back to the queue: step processes cannot be started",
                {{"job_id", id_str(id())}, {"attempt", std::to_string(c_.attempt)}});
    co_return true;
  }
}

// ---------------------------------------------------------------- scheduler

asio::awaitable<void> Job::wait_over() {
  while (!over_) co_await over_event_.wait();
}

asio::awaitable<void> Job::run() {
  // over() becomes true however run() ends: a later run of the job waits for it.
  struct Over {
    Job& job;
    ~Over() {
      job.began();
      job.over_ = true;
      job.over_event_.notify();
    }
  } over{*this};
  core::log("info", "job claimed",
            {{"job_id", id_str(id())}, {"kind", c_.kind}, {"attempt", std::to_string(c_.attempt)},
             {"lease", id_str(lease())}});
  if (c_.deadline) {
    deadline_timer_.expires_at(*c_.deadline);
    deadline_timer_.async_wait([self = weak_from_this()](const boost::system::error_code& ec) {
      if (auto job = self.lock(); job && !ec) job->request_stop(StopReason::timeout);
    });
  }
  std::optional<std::string> error;
  try {
    co_await execute();
  } catch (const Abandoned&) {
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (error) {
    // A bad payload or a fatal SQLSTATE fails this job, never the process.
    core::log("error", "job error", {{"job_id", id_str(id())}, {"error", *error}});
    kill_steps();
    while (!running_.empty()) co_await wake_.wait();
    if (!abandoned_ && !finished_) {
      try {
        nlohmann::json arg1_ = {{"message", *error}, {"retryable", false}};
        co_await finish("failed", std::move(arg1_));
      } catch (...) {
      }
    }
  }
  kill_steps();
  while (!running_.empty()) co_await wake_.wait();  // steps end quickly once killed
  deadline_timer_.cancel();
  flush_timer_.cancel();
  finished_ = true;
}

asio::awaitable<void> Job::execute() {
  json steps;
  if (c_.kind == "noop") {  // completes at once, whatever its payload says
    co_await finish("completed", json::object());
    co_return;
  }
  // jsonb holds numbers nlohmann cannot (1e400): say so, not "not an object".
  // Nested past max_json_depth (submit in SQL takes what the server's stack
  // allows): refused here, before a recursive copy overflows the worker's.
  json payload;
  std::string unreadable;
  // Read as nlohmann values, a large payload or large completed outputs
  // (a resumed job's) are freed in small blocks too: 150 MB of outputs
  // left the worker at 180 MB after the job.
  if (c_.payload_text.size() + c_.completed_steps_text.size() + c_.completed_stdout_text.size() > (1u << 20))
    held_large_ = true;
  auto in = core::parse_json_input(c_.payload_text, core::max_json_depth, core::DuplicateKeys::last_wins,
                                   core::Numbers::exact);
  if (in.error == core::JsonInput::Error::too_deep) unreadable = too_deep_text("payload");
  else if (!in) unreadable = "payload cannot be read: " + in.message;
  else payload = std::move(in.value);
  if (!unreadable.empty() || !payload.is_object()) {
    std::string message = unreadable.empty() ? "payload is not a JSON object" : unreadable;
    nlohmann::json arg1_ = {{"message", message}, {"retryable", false}};
    co_await finish("failed", std::move(arg1_));
    co_return;
  }
  if (c_.kind == "workflow") {
    input_ = payload.value("input", json::object());
    steps = payload.value("steps", json());
  } else {
    if (!w_.config().actions.count(c_.kind)) {
      nlohmann::json arg1_ = {{"message", "unknown action \"" + c_.kind + "\" on worker " + w_.config().id},
                                 {"retryable", false}};
      co_await finish("failed", std::move(arg1_));
      co_return;
    }
    input_ = payload;
    steps = json::array({{{"id", c_.kind}, {"action", c_.kind}, {"with", "{{input}}"}}});
  }
  std::optional<std::string> bad;
  try {
    dag_.emplace(core::Dag::from_steps(steps));
  } catch (const std::exception& e) {
    bad = std::string("invalid workflow: ") + e.what();
  }
  if (bad) {
    nlohmann::json body = {{"message", *bad}, {"retryable", false}};
    co_await finish("failed", std::move(body));
    co_return;
  }
  // Every secret the steps name is masked from the start, whichever steps
  // this run runs: the masker learnt a secret only as a step rendered it,
  // so after a resume or a retry, the step that named it done and skipped,
  // a later step printing it (from a file that one wrote) stored it as is;
  // and a step beside it was masked or not as their renders fell.  One
  // that cannot be read fails only the step that renders it.
  for (const auto& name : core::referenced_secrets(steps))
    if (auto v = w_.secret(name)) masker_.add(*v);
  // Steps completed by earlier runs (retry, resume) are not run again.  What
  // cannot be read (a resume input holding 1e400) fails the job: read as
  // nothing, it would run the completed steps again.
  // {id: output}: one level more than an output (a resume input) may nest.
  json completed, stdouts;
  std::string unread;
  for (auto [text, into] : {std::pair{&c_.completed_steps_text, &completed}, std::pair{&c_.completed_stdout_text, &stdouts}}) {
    auto done = core::parse_json_input(text->empty() ? "{}" : *text, core::max_json_depth + 1,
                                       core::DuplicateKeys::last_wins, core::Numbers::exact);
    if (done.error == core::JsonInput::Error::too_deep) unread = too_deep_text("a step's output is");
    else if (!done) unread = done.message;
    // A string in place of the object: claim could not build it (outputs
    // past what one jsonb holds), and says why.
    else if (done.value.is_string()) unread = done.value.get<std::string>();
    else *into = std::move(done.value);
    if (!unread.empty()) break;
  }
  if (!unread.empty()) {
    nlohmann::json arg1_ = {{"message", "completed steps cannot be read: " + unread}, {"retryable", false}};
    co_await finish("failed", std::move(arg1_));
    co_return;
  }
  if (!stdouts.is_object()) stdouts = json::object();
  if (completed.is_object()) {
    for (auto& [sid, out] : completed.items()) {
      if (!dag_->contains(sid)) continue;
      done_.insert(sid);
      json entry = json::object();
      entry["output"] = std::move(out);  // not copied: it may be 16 MiB of rows
      // The stdout recorded by the earlier run; without one (an approval's
      // resume input), the output stands in (core::render).
      if (auto it = stdouts.find(sid); it != stdouts.end() && it->is_string())
        entry["stdout"] = std::move(it->get_ref<std::string&>());
      outputs_[sid] = std::move(entry);
    }
  }
  count_readers();

  for (;;) {
    if (stop_ != StopReason::none || abandoned_) break;
    if (!failure_) {
      std::set<std::string> busy = running_;
      busy.insert(waiting_.begin(), waiting_.end());
      for (const auto& sid : dag_->ready(done_, busy)) {
        if (dag_->step(sid).contains("approval")) {
          // One whose "if" is false (or cannot be read) goes to run_step,
          // which skips it (or fails it, saying why), as does one with a
          // field submit refuses on an approval.
          bool ask = !misplaced_field(dag_->step(sid), "approval");
          if (auto c = dag_->step(sid).find("if"); ask && c != dag_->step(sid).end()) {
            try {
              ask = condition(sid, *c);
            } catch (...) {
              ask = false;
            }
            release_render(sid);
          }
          if (ask) {
            waiting_.insert(sid);
            continue;
          }
        }
        running_.insert(sid);
        asio::co_spawn(w_.executor(),
                       [self = shared_from_this(), sid]() -> asio::awaitable<void> {
                         co_await self->run_step(sid);
                       },
                       [self = shared_from_this(), sid](std::exception_ptr) {
                         self->running_.erase(sid);
                         self->killers_.erase(sid);
                         self->wake_.notify();
                       });
      }
    }
    if (snooze_due()) {
      for (const auto& [sid, s] : sleeps_) snoozed_[sid] = s.secs;
      // Ends the sleeps: each writes its step_failed.
      request_stop(w_.draining() ? StopReason::shutdown : StopReason::snooze);
      continue;
    }
    if (running_.empty()) break;
    co_await wake_.wait();
  }
  while (!running_.empty()) co_await wake_.wait();
  if (abandoned_) co_return;

  switch (stop_) {
    case StopReason::stop: {
      nlohmann::json arg1_ = with_ended_steps({{"reason", "stopped"}, {"message", "stopped on request"}});
      co_await finish("cancelled", std::move(arg1_));
      co_return;
    }
    case StopReason::timeout: {
      nlohmann::json arg1_ = with_ended_steps({{"reason", "timeout"}, {"message", "job exceeded its timeout"}});
      co_await finish("timed_out", std::move(arg1_));
      co_return;
    }
    case StopReason::shutdown: {
      if (!snoozed_.empty()) {
        const bool back = co_await snooze();
        if (back) co_return;
      }
      nlohmann::json arg1_ = with_ended_steps({{"reason", "worker_shutdown"},
                                               {"message", "worker shut down before the job finished"},
                                               {"retryable", true}});
      co_await finish("failed", std::move(arg1_));
      co_return;
    }
    case StopReason::snooze: {
      const bool back = co_await snooze();
      if (back) co_return;
      nlohmann::json arg1_ = with_ended_steps({{"reason", "sleeping"},
                                               {"message", "the job could not be given back while it slept"},
                                               {"retryable", true}});
      co_await finish("failed", std::move(arg1_));
      co_return;
    }
    case StopReason::none:
      break;
  }
  if (failure_) {
    // Not once a step began (a sibling's process started meanwhile): its
    // effects may be out there, and the attempt counts as before.
    if (give_back_ && !began_) {
      const bool given = co_await give_back();
      if (given) co_return;
    }
    co_await finish("failed", *failure_);
    co_return;
  }
  if (!waiting_.empty()) {
    for (const auto& sid : dag_->ids()) {
      if (!waiting_.count(sid)) continue;
      const json& appr = dag_->step(sid)["approval"];
      json prompt = appr.is_object() ? appr.value("prompt", json("")) : json("");
      std::optional<std::string> bad_prompt;
      try {
        prompt = render(prompt, sid);
      } catch (const std::exception& e) {
        bad_prompt = e.what();
      }
      if (bad_prompt) {
        nlohmann::json body = {{"message", *bad_prompt}, {"step", sid}, {"retryable", false}};
        co_await finish("failed", std::move(body));
        co_return;
      }
      nlohmann::json arg1_ = {{"step", sid}, {"prompt", prompt}};
      co_await finish("suspended", std::move(arg1_));
      co_return;
    }
  }
  json result = json::object();
  // Moved out: the job is over, and nothing renders them again.
  for (const auto& sid : dag_->sinks()) {
    auto& entry = outputs_[sid];
    result[sid] = entry.contains("output") ? std::move(entry["output"]) : json();
  }
  co_await finish("completed", std::move(result));
}

// ---------------------------------------------------------------- steps

asio::awaitable<void> Job::run_step(std::string sid) {
  const json& step = dag_->step(sid);
  // What the step's rendered fields held is free again once it ends.
  struct Rendered {
    Job& job;
    std::string sid;
    ~Rendered() {
      job.release_render(sid);
      job.release_reads(sid);
    }
  } rendered{*this, sid};
  std::string kind = step_kind(step);
  std::optional<json> err;
  try {
    if (kind.empty())
      throw StepFailure{"step must have exactly one of action, run, sql, sleep, approval, http", false};
    // submit's rules again, for a payload written past it: ignored, the
    // step ran without the env or the timeout it was given.
    if (auto bad = misplaced_field(step, kind)) throw StepFailure{*bad, false};
    nlohmann::json arg1_ = {{"step", sid}};
    co_await append("step_started", std::move(arg1_));
    if (halted()) {  // a sibling failed, or a stop came, meanwhile
      co_await step_ended(sid);
      co_return;
    }
    // "if" false: the step is skipped, done with a null output, and the
    // steps that need it run as usual.
    if (auto c = step.find("if"); c != step.end() && !condition(sid, *c)) {
      json data = {{"step", sid}, {"output", nullptr}, {"skipped", true}};
      co_await append("step_completed", std::move(data));
      if (has_readers(sid)) outputs_[sid] = json{{"output", nullptr}};
      done_.insert(sid);
      core::log("info", "step skipped", {{"job_id", id_str(id())}, {"step", sid}});
      co_return;
    }
    if (kind == "approval")  // its "if" was false when the job looked; true now
      throw StepFailure{"step " + sid + ": its \"if\" changed while the job ran", true};
    // The step's own deadline, from here (submit checked it; checked again
    // so bad data from the database fails the step only).
    std::optional<double> limit;
    if (auto t = step.find("timeout"); t != step.end()) {
      limit = core::number_of(*t);  // 2.50 is a raw number (numbers as stored)
      if (!limit || !(*limit > 0)) throw StepFailure{"timeout must be a number of seconds > 0", false};
    }
    // The lease again, now: step_started's write may have come back late
    // (its reply held up past the lease, by a frozen worker or a call
    // retried), and a step started then ran beside the job's next claim
    // (e2e 29-chaos: 5 s after the claim, 11 ms before the abandon).
    check_lease();
    core::log("info", "step started", {{"job_id", id_str(id())}, {"step", sid}, {"kind", kind}});
    StepDeadline deadline(w_.executor());
    if (limit)
      deadline.arm(step_wait(*limit), [self = weak_from_this(), sid, secs = *limit] {
        auto job = self.lock();
        return !job || job->on_step_deadline(sid, secs);
      });
    json output;
    std::string out_text;
    bool has_stdout = false;
    bool failed_late = false;  // the step failed after its deadline passed (killed for it)
    bool recorded = false;     // a sql step's step_completed committed with it
    std::size_t output_bytes = 0;  // its output as compact JSON (the event's, count_result)
    if (kind != "sql" && kind != "action" && kind != "run" && kind != "http")
      began();  // (those once they ask for a slot)
    try {
      if (kind == "action") {
        co_await step_action(sid, step, out_text);
        has_stdout = true;
      } else if (kind == "run") {
        co_await step_run(sid, step, out_text);
        has_stdout = true;
      } else if (kind == "http") {
        co_await step_http(sid, step, out_text);
        has_stdout = true;
      } else if (kind == "sql") {
        began_ = true;  // (its statement may be sent from here)
        output = co_await step_sql(sid, step, deadline, recorded, output_bytes);
      } else if (kind == "sleep") {
        co_await step_sleep(sid, step);
      }
    } catch (const Abandoned&) {
      throw;
    } catch (...) {
      if (!deadline.ended()) throw;
      failed_late = true;
    }
    deadline.disarm();  // not while step_completed is written
    // Ended by its deadline, a process or a sleep stopped early, whatever
    // its exit; a sql step counts as done only when its COMMIT made it.  A
    // process that exited before the deadline and whose output was read
    // past it (descendants holding its pipes get --kill-grace) ended by
    // itself: it failed a step that had completed (step_timeout, retried).
    if (failed_late || (deadline.ended() && kind != "sql")) {
      std::string text = seconds_text(*limit);
      throw StepFailure{"step " + sid + " timed out after " + text + " s", true, "step_timeout"};
    }
    // Ended early by a stop, a timeout or a sibling's failure: a sleep cut
    // short, a process that exited 0 on SIGTERM, is not done, and a re-run
    // (max_attempts, retry) runs it again.  A sql step is done once its
    // COMMIT made it, whatever came after.
    if (abandoned_ || (kind != "sql" && halted())) {
      co_await step_ended(sid);
      co_return;
    }
    // Its output repaired, parsed and masked (process_output).  A large
    // one on the worker's compute thread: up to 16 MiB of it held the event
    // loop for seconds under load, and the worker's heartbeat with it (its
    // jobs given up).  The stdout and output are moved there, the masker
    // copied as it is now.  Not a small one: the hop to the other thread
    // and back, and the masker's copy, would cost every small step (and
    // the drain) more than its handling.  A sql step's rows are not
    // measured: always.
    const bool heavy = kind == "sql" || out_text.size() > offload_bytes;
    StepOutput done;
    if (recorded) {
      done.output = std::move(output);  // masked, and written (step_sql)
    } else if (heavy) {
      auto work = [m = masker_, output = std::move(output), text = std::move(out_text), has_stdout]() mutable {
        return process_output(m, std::move(output), std::move(text), has_stdout);
      };
      done = co_await w_.offload(std::move(work));
      heavy_result_ = true;
    } else {
      done = process_output(masker_, std::move(output), std::move(out_text), has_stdout);
    }
    if (done.error) throw StepFailure{*done.error, false};
    json entry = json::object();
    json data = {{"step", sid}};
    if (done.stdout_text) {
      data["stdout"] = *done.stdout_text;
      entry["stdout"] = std::move(*done.stdout_text);
    }
    data["output"] = std::move(done.output);
    if (!recorded) output_bytes = co_await append_kept("step_completed", data, heavy);
    count_result(sid, output_bytes);
    // Kept only for a step still to read it, or the job's result (not
    // once that is past the limit: the job fails).
    if (has_readers(sid) && !(result_over_ && sinks_.count(sid))) {
      entry["output"] = std::move(data["output"]);
      outputs_[sid] = std::move(entry);
    } else if (heavy) {
      // Freed on the compute thread: a step's output may be millions of
      // values (~Job).
      w_.discard([d = std::move(data)]() mutable { d = nullptr; });
    }
    done_.insert(sid);
    said_.erase(sid);  // a step that completes said nothing of its failure
    core::log("info", "step completed", {{"job_id", id_str(id())}, {"step", sid}});
  } catch (const Abandoned&) {
    co_return;
  } catch (const StepFailure& f) {
    err = json{{"message", f.message}, {"step", sid}, {"retryable", f.retryable}};
    if (!f.reason.empty()) (*err)["reason"] = f.reason;
    if (f.host && !began_ && !halted()) {
      give_back_ = true;
      (*err)["reason"] = "cannot_start_steps";
    }
  } catch (const core::TemplateError& e) {
    err = json{{"message", e.what()}, {"step", sid}, {"retryable", false}};
  } catch (const std::exception& e) {
    err = json{{"message", e.what()}, {"step", sid}, {"retryable", true}};
  }
  if (!err) co_return;
  // A step killed by a stop, the job's timeout, a shutdown or a sibling's
  // failure did not fail of its own.
  if (halted()) {
    co_await step_ended(sid);
    co_return;
  }
  // The step said how its failure is retried (::error): the step's own
  // failure only, not one of the host's (cannot_start_steps: no process ran).
  if (auto said = said_.find(sid); said != said_.end() && !give_back_) steer_error(*err, said->second);
  *err = mask(*err);
  failure_ = *err;
  core::log("warn", "step failed", {{"job_id", id_str(id())}, {"step", sid}, {"error", (*err)["message"].get<std::string>()}});
  kill_steps();  // fail fast: the job fails, siblings stop
  try {
    nlohmann::json arg1_ = {{"step", sid}, {"error", *err}};
    co_await append("step_failed", std::move(arg1_));
  } catch (...) {
  }
}

// The closing event of a step ended from outside (a stop, the job's timeout,
// the worker's shutdown, a sibling's failure): a step_failed whose reason
// says so, retryable (a re-run runs the step again), so that no step of a
// finished job is left with a step_started alone.  None under a lost lease:
// the job is no longer ours to write.
asio::awaitable<void> Job::step_ended(const std::string& sid) {
  if (abandoned_) co_return;
  std::string reason, why;
  switch (stop_) {
    case StopReason::stop:
      reason = "stopped", why = "the job was stopped";
      break;
    case StopReason::timeout:
      reason = "job_timeout", why = "the job timed out";
      break;
    case StopReason::shutdown:
      reason = "worker_shutdown", why = "the worker shut down";
      break;
    case StopReason::snooze:
      reason = "sleeping", why = "the job went back to the queue until its sleep ends";
      break;
    case StopReason::none:
      reason = "sibling_failed";
      why = failure_ && failure_->contains("step") && (*failure_)["step"].is_string()
                ? "step " + (*failure_)["step"].get<std::string>() + " failed"
                : "another step failed";
      break;
  }
  // Its error names the step, as a step's own failure does.
  json data = {{"step", sid},
               {"error",
                {{"message", "step " + sid + " ended: " + why},
                 {"step", sid},
                 {"reason", reason},
                 {"retryable", true}}}};
  if (stop_ != StopReason::none) ended_.push_back(sid);
  try {
    co_await append("step_failed", std::move(data));
  } catch (...) {
  }
}

// In the workflow's order of steps, whatever order they ended in.
json Job::with_ended_steps(json body) const {
  if (ended_.empty() || !dag_) return body;
  std::vector<std::string> steps;
  for (const auto& sid : dag_->ids())
    if (std::find(ended_.begin(), ended_.end(), sid) != ended_.end()) steps.push_back(sid);
  if (steps.empty()) return body;
  body["step"] = steps.front();
  if (steps.size() > 1) body["steps"] = steps;
  return body;
}

asio::awaitable<void> Job::step_action(const std::string& sid, const json& step,
                                       std::string& stdout_text) {
  if (!step["action"].is_string()) throw StepFailure{"action must be a string", false};
  std::string name = step["action"].get<std::string>();
  auto it = w_.config().actions.find(name);
  if (it == w_.config().actions.end())
    throw StepFailure{"unknown action \"" + name + "\" on worker " + w_.config().id, false};
  json with = render(step.value("with", json::object()), sid);
  EnvVars env = step_env(sid, step);
  if (auto allowed = w_.config().action_env.find(name); allowed != w_.config().action_env.end()) {
    // The administrator's list for this action is the whole rule, with or
    // without --allow-run: what it names may be set, nothing else.
    const auto& names = allowed->second;
    for (auto& [var, value] : env)
      if (std::find(names.begin(), names.end(), var) == names.end()) {
        std::string list;
        for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
        throw StepFailure{"env cannot set " + var + " for action \"" + name + "\": this worker's configuration " +
                              (names.empty() ? std::string("allows it no variable") : "allows only " + list),
                          false};
      }
  } else if (!w_.config().allow_run && !env.empty()) {
    // Without --allow-run and without a list, a step's env sets nothing:
    // variables programs read as code or options are countless
    // (TAR_OPTIONS=--checkpoint-action=exec=…, MAKEFLAGS, PSQLRC naming
    // /proc/self/environ whose lines another variable writes, BGEXEC_DB
    // with options=-crole=…), and a denylist of them let a tenant run any
    // command through an action that runs tar.
    throw StepFailure{"env cannot set " + env.begin()->first + " for action \"" + name +
                          "\": this worker's configuration lists no variable for it (an action entry "
                          "{\"path\": PATH, \"env\": [NAMES]} in its config file lists them; --allow-run, "
                          "which runs any command anyway, allows any)",
                      false};
  }
  std::vector<std::string> arg1_ = {it->second};
  std::string in = core::dump(with);
  auto out = co_await run_process(sid, arg1_, in, false, env);
  stdout_text = std::move(out.stdout_text);  // its output: process_output, in run_step
}

asio::awaitable<void> Job::step_run(const std::string& sid, const json& step,
                                    std::string& stdout_text) {
  if (!w_.config().allow_run)
    throw StepFailure{"run steps are refused by this worker (start it with --allow-run)", false};
  // argv, no shell, as submit checks it: a string here (written past
  // submit) ran through /bin/sh -c, its templates rendered into the
  // shell's text.  A template may render an argument to a number: its JSON.
  const json& run = step["run"];
  if (!run.is_array() || run.empty() ||
      std::any_of(run.begin(), run.end(), [](const json& a) { return !a.is_string(); }))
    throw StepFailure{"run must be a non-empty array of strings (argv, no shell)", false};
  json argv = render(run, sid);
  std::vector<std::string> args;
  for (auto& a : argv) args.push_back(a.is_string() ? a.get<std::string>() : core::dump(a));
  json in = step.contains("with") ? render(step["with"], sid) : json();
  std::string in_text = in.is_null() ? "" : core::dump(in);
  EnvVars env = step_env(sid, step);
  auto out = co_await run_process(sid, args, in_text, true, env);
  stdout_text = std::move(out.stdout_text);  // its output: process_output, in run_step
}

namespace {

// An HTTP token (a method, a header name): RFC 9110's tchar.
bool http_token(std::string_view s) {
  static constexpr std::string_view extra = "!#$%&'*+-.^_`|~";
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           extra.find(c) != std::string_view::npos;
  });
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// How long an http step's request may take when its "timeout" says nothing.
constexpr double http_default_timeout_s = 30;

}  // namespace

// The request is rendered whole ({{input...}}, {{steps...}},
// {{secrets.NAME}} in the url, the header values and the body: a secret so
// rendered is masked wherever the step's output or error shows it); no
// header value is ever logged.  Gated like run: refused unless the URL is
// under one of the worker's --allow-http prefixes (core::http_url_allowed).
// Redirects are not followed.  A 2xx body is the step's output, as a
// process's stdout is; any other status fails the step (http_status_retryable),
// a Retry-After in seconds on a 429 or 503 becoming its retry_after, as a
// step's "::error {"retry_after": N}" does.
asio::awaitable<void> Job::step_http(const std::string& sid, const json& step, std::string& body_text) {
  const auto& cfg = w_.config();
  if (!step["http"].is_object())
    throw StepFailure{"step " + sid + ": http must be an object with a \"url\"", false};
  if (cfg.allow_http.empty())
    throw StepFailure{"step " + sid + ": http steps are refused by this worker (start it with --allow-http PREFIX)",
                      false};
  json spec = render(step["http"], sid);
  for (const auto& [key, unused] : spec.items())
    if (key != "url" && key != "method" && key != "headers" && key != "body" && key != "timeout")
      throw StepFailure{"step " + sid + ": http has unknown key \"" + key + "\"", false};
  auto u = spec.find("url");
  if (u == spec.end() || !u->is_string()) throw StepFailure{"step " + sid + ": http \"url\" must be a string", false};
  std::string why;
  auto url = core::parse_http_url(u->get_ref<const std::string&>(), why);
  if (!url) throw StepFailure{"step " + sid + ": http url " + why, false};
  const std::string where = url->origin() + url->path();
  bool allowed = false;
  for (const auto& p : cfg.allow_http) {
    std::string unused;
    if (auto prefix = core::parse_http_url(p, unused); prefix && core::http_url_allowed(*url, *prefix)) allowed = true;
  }
  if (!allowed)
    throw StepFailure{"step " + sid + ": http url " + where + " is not under any of this worker's --allow-http prefixes",
                      false};
  HttpRequest req;
  req.url = *url;
  req.body_cap = capture_cap;
  req.ca_file = cfg.http_ca_file;
  std::string content_type;
  if (auto b = spec.find("body"); b != spec.end()) {
    if (b->is_string()) {
      req.body = b->get<std::string>();
      content_type = "text/plain; charset=utf-8";
    } else {
      req.body = core::dump(*b);
      content_type = "application/json";
    }
  }
  req.method = req.body ? "POST" : "GET";
  if (auto m = spec.find("method"); m != spec.end()) {
    if (!m->is_string() || !http_token(m->get_ref<const std::string&>()))
      throw StepFailure{"step " + sid + ": http \"method\" must be an HTTP method such as \"POST\"", false};
    req.method = m->get<std::string>();
  }
  if (!content_type.empty()) req.headers.emplace_back("Content-Type", content_type);
  if (auto h = spec.find("headers"); h != spec.end()) {
    if (!h->is_object()) throw StepFailure{"step " + sid + ": http \"headers\" must be an object", false};
    for (const auto& [name, v] : h->items()) {
      if (!http_token(name)) throw StepFailure{"step " + sid + ": http header name \"" + name + "\" is invalid", false};
      for (const char* fixed : {"Host", "Content-Length", "Transfer-Encoding", "Connection"})
        if (iequals(name, fixed))
          throw StepFailure{"step " + sid + ": http header " + name + " is set by the worker, not the step", false};
      std::string value = v.is_string() ? v.get<std::string>() : core::dump(v);
      // Never shown: a header value is often a credential.  No control
      // character but a tab (RFC 9110 5.5): CR, LF and NUL would end the
      // header; the others a server or a proxy on the way reads its own way.
      if (std::any_of(value.begin(), value.end(), [](char c) {
            const auto u = static_cast<unsigned char>(c);
            return (u < 0x20 && c != '\t') || u == 0x7f;
          }))
        throw StepFailure{"step " + sid + ": http header " + name + " has a control character in its value", false};
      if (iequals(name, "Content-Type")) {
        auto old = std::find_if(req.headers.begin(), req.headers.end(),
                                [](const auto& kv) { return kv.first == "Content-Type"; });
        if (old != req.headers.end()) req.headers.erase(old);
      }
      req.headers.emplace_back(name, std::move(value));
    }
  }
  req.timeout_s = http_default_timeout_s;
  if (auto t = spec.find("timeout"); t != spec.end()) {
    std::optional<double> secs = t->is_string() ? core::parse_seconds(t->get_ref<const std::string&>())
                                                : core::number_of(*t);
    if (!secs || !(*secs > 0))
      throw StepFailure{"step " + sid + ": http \"timeout\" must be seconds > 0 (a number, or text such as \"30s\")",
                        false};
    req.timeout_s = std::min(*secs, max_step_wait_s);
  }
  const std::string method = req.method;
  const double timeout_s = req.timeout_s;
  // One of the worker's --step-processes places while the request is in
  // flight, as a process step's: a workflow of 1 000 parallel http steps,
  // or many such jobs, held a socket and a response of up to 16 MiB each
  // at once, with nothing to bound them (review rev-http).  Granted in the
  // order asked; a stop, a sibling's failure, the lease or the shutdown
  // ends the wait (the step's killer).
  auto slot = w_.step_processes().hold();
  began(&w_.step_processes());  // its step waits (counted) or runs
  if (!slot.ticket->granted) {
    w_.pool_short(w_.step_processes());
    core::log("debug", "step waiting for a step process", {{"job_id", id_str(id())}, {"step", sid}});
    const bool granted = co_await await_slot(slot, sid, nullptr);
    check_lease();
    if (!granted) throw StepFailure{"step ended while waiting for one of the worker's --step-processes", false};
  }
  auto call = std::make_shared<HttpCall>(w_.executor());
  killers_[sid] = [call] {
    call->cancel();
    return true;
  };
  struct Unregister {
    Job& job;
    const std::string& sid;
    ~Unregister() { job.killers_.erase(sid); }
  } unregister{*this, sid};
  if (halted()) call->cancel();  // a stop that came before the killer was set
  began_ = true;  // the request may reach the service from here
  core::log("info", "http step request", {{"job_id", id_str(id())}, {"step", sid}, {"method", method},
                                          {"url", masker_.mask(where)}});
  HttpResponse r = co_await call->run(std::move(req));
  if (r.cancelled) throw StepFailure{"step " + sid + ": http request ended", true};
  if (r.timed_out)
    throw StepFailure{"http " + method + " " + where + " timed out after " + seconds_text(timeout_s) + " s", true};
  if (!r.error.empty()) throw StepFailure{"http " + method + " " + where + " failed: " + r.error, true};
  if (r.too_large)
    throw StepFailure{"http " + method + " " + where + ": the response body is over " + std::to_string(capture_cap) +
                          " bytes, the most a step's output may be",
                      false};
  if (r.status >= 200 && r.status <= 299) {
    body_text = std::move(r.body);  // its output: process_output, in run_step
    co_return;
  }
  std::string message = "http " + std::to_string(r.status) + " from " + where;
  if (r.status >= 300 && r.status <= 399) {
    message += ": redirects are not followed";
    // Masked before it is cut, as the body below: a Location echoing the
    // URL held part of a secret past the cut, which no longer matched.
    if (!r.location.empty())
      message += " (Location: " + core::utf8_cut(core::to_storable(masker_.mask(r.location)), 200, "…") + ")";
  } else if (!r.body.empty()) {
    // Masked before it is cut (a cut secret no longer matches the masker).
    message += ": " + core::utf8_cut(core::to_storable(masker_.mask(trim_newline(r.body))), 200, "…");
  }
  json said = {{"http_status", r.status}};
  if (r.status == 429 || r.status == 503)
    if (auto after = core::parse_retry_after(r.retry_after))  // whole seconds: 3, as a step's ::error says it
      said["retry_after"] = static_cast<std::int64_t>(*after);
  said_[sid] = std::move(said);
  throw StepFailure{std::move(message), core::http_status_retryable(r.status)};
}

// Values are rendered like run's arguments: {{input...}}, {{steps...}} and
// {{secrets.NAME}} (registered with the masker, so a secret passed this way
// is masked in output and errors like one passed as an argument); a value
// that renders to a non-string is passed as its compact JSON.  Submit checked
// names and values; the worker checks again, so bad data from the database
// fails the step, never the process.
Job::EnvVars Job::step_env(const std::string& sid, const json& step) {
  EnvVars out;
  auto it = step.find("env");
  if (it == step.end()) return out;
  if (!it->is_object()) throw StepFailure{"env must be an object of strings", false};
  json env = render(*it, sid);
  for (auto& [name, v] : env.items()) {
    // execve() splits "NAME=value" at the first '=' and ends it at a NUL.
    if (name.empty() || name.find_first_of(std::string_view("=\0", 2)) != std::string::npos)
      throw StepFailure{"env has an invalid variable name \"" + name + "\"", false};
    if (is_worker_var(name))
      throw StepFailure{"env cannot set " + name + ": the worker sets it for every step process", false};
    std::string text = v.is_string() ? v.get<std::string>() : core::dump(v);
    if (text.find('\0') != std::string::npos)
      throw StepFailure{"env variable " + name + " contains a NUL byte", false};
    out.emplace_back(name, std::move(text));
  }
  return out;
}

asio::awaitable<bool> Job::await_slot(Worker::Slots::Held& slot, const std::string& sid,
                                      const StepDeadline* deadline) {
  if (slot.ticket->granted) co_return true;
  killers_[sid] = [ticket = slot.ticket] {
    ticket->cut_wait();
    return true;
  };
  const bool granted = co_await slot.wait([this, deadline] { return halted() || (deadline && deadline->passed()); });
  killers_.erase(sid);
  co_return granted;
}

asio::awaitable<bool> Job::committed(const std::string& xid) {
  // On the worker's own session, while the lease lasts (ctl_exec retries
  // a lost connection).  "in progress": the step's backend has not yet
  // seen its client go; asked again, 100 ms apart.
  for (;;) {
    if (abandoned_ || lease_spent()) co_return false;
    pg::Params arg = {xid};
    auto r = co_await w_.ctl_exec("SELECT pg_catalog.pg_xact_status($1::xid8)", arg, write_until());
    auto status = r.get(0, 0);
    if (status != std::optional<std::string>("in progress")) co_return status == std::optional<std::string>("committed");
    asio::steady_timer t(w_.executor(), std::chrono::milliseconds(100));
    co_await t.async_wait(asio::use_awaitable);
  }
}

asio::awaitable<json> Job::step_sql(const std::string& sid, const json& step, const StepDeadline& deadline,
                                    bool& recorded, std::size_t& output_bytes) {
  if (!step["sql"].is_string()) throw StepFailure{"sql must be a string", false};
  json params = render(step.value("params", json::array()), sid);
  if (!params.is_array()) throw StepFailure{"params must be an array", false};
  pg::Params p;
  bool secret_param = false;  // a parameter holds a secret (or part of one)
  for (auto& v : params) {
    if (v.is_null()) p.push_back(std::nullopt);
    else p.push_back(v.is_string() ? v.get<std::string>() : core::dump(v));
    if (p.back() && !masker_.empty() && masker_.mask(*p.back()) != *p.back()) secret_param = true;
  }
  // One of the worker's sql step sessions (--sql-steps): a workflow of many
  // parallel sql steps, or many such jobs, took as many connections as the
  // server had, every other client's too.  Granted in the order asked, at
  // once when one is released; the wait ends with the step (a stop, its
  // deadline, the lease: await_slot, as a step process's).  Released when
  // the step ends, granted or not.
  auto session = w_.sql_sessions().hold();
  began(&w_.sql_sessions());  // its step waits (counted) or runs
  if (!session.ticket->granted) w_.pool_short(w_.sql_sessions());
  const bool granted = co_await await_slot(session, sid, &deadline);
  if (!granted) throw StepFailure{"sql step ended while waiting for one of the worker's --sql-steps sessions", false};
  // Its own connection: the statement runs as the job's owner and may take long.
  auto conn = std::make_shared<pg::Connection>(w_.executor(), w_.config().db, "sql-step");
  // Its notices (RAISE NOTICE ...) are the tenant's output: log events of
  // the job, masked and capped, never lines of the worker's own log.
  conn->set_notice_sink([self = weak_from_this(), sid](std::string text) {
    if (auto job = self.lock()) job->log_line(sid, "notice", std::move(text));
  });
  // A cancel is the TERM of a sql step; its KILL, after --kill-grace, is
  // the session closed while the statement still runs.  A cancel can fail
  // to end it: a statement may catch it (PL/pgSQL's EXCEPTION WHEN
  // query_canceled, in a loop), and one that reaches the backend before
  // the statement does is dropped by the server.  The step then ran on,
  // past its timeout and a stop, its job running for ever.  With the
  // session closed the server ends the statement (its connection check,
  // client_connection_check_interval below, within a second) and rolls
  // its transaction back: the step fails, as a timed out one does.  Only
  // while the statement runs: a COMMIT sent may have made it.
  struct Escalation {
    explicit Escalation(asio::any_io_executor ex) : timer(ex) {}
    asio::steady_timer timer;
    bool armed = false;
    bool in_statement = false;
  };
  auto escalation = std::make_shared<Escalation>(w_.executor());
  // Wakes the wait between two tries to open the session (below).
  auto woken = std::make_shared<Event>(w_.executor());
  killers_[sid] = [conn, escalation, woken, grace = w_.config().kill_grace_s, job_id = id_str(id()), sid] {
    woken->notify();
    conn->cancel();
    if (escalation->armed) return true;
    escalation->armed = true;
    escalation->timer.expires_after(seconds(grace));
    escalation->timer.async_wait([conn, escalation, job_id, sid](const boost::system::error_code& ec) {
      if (ec || !escalation->in_statement) return;
      core::log("warn", "sql step statement still running after its cancel; session closed",
                {{"job_id", job_id}, {"step", sid}});
      conn->close();
    });
    return true;
  };
  // Disarmed however the step ends (the timer's handler holds the connection).
  struct Disarm {
    std::shared_ptr<Escalation> e;
    ~Disarm() {
      e->in_statement = false;
      e->timer.cancel();
    }
  } disarm{escalation};
  // A cancel reaches only a statement in flight: a stop, a sibling's
  // failure or the deadline that came while connecting or between
  // statements is seen here, and the transaction is rolled back (closed
  // without COMMIT) instead.
  auto ended = [&] { return halted() || deadline.passed(); };
  // The session is opened before the step runs, and waited for: a server
  // that refuses it for now (the role's CONNECTION LIMIT or
  // max_connections: 53300; starting up: 57P03; down) is asked again,
  // with a backoff from 0.1 s to 5 s, until it opens or the step ends (a
  // stop, its deadline, the lease: each calls the step's killer, which
  // wakes the wait).  Nothing ran: a max_attempts=1 job failed here with
  // its statement never sent.
  {
    core::Backoff backoff(std::chrono::milliseconds(100), std::chrono::seconds(5));
    bool said = false;
    for (;;) {
      std::optional<pg::Error> refused;
      try {
        co_await conn->connect();
      } catch (const pg::Error& e) {
        refused = e;
      }
      if (!refused) break;
      const std::string why = "sql: " + sql_error_text(*refused, conn->name(), false) + " (SQLSTATE " +
                              refused->sqlstate() + ")";
      if (!std::exchange(said, true))
        core::log("warn", "sql step session cannot be opened, waiting for one",
                  {{"job_id", id_str(id())}, {"step", sid}, {"error", refused->what()},
                   {"sqlstate", refused->sqlstate()}});
      const auto until = Clock::now() + backoff.next();
      while (!ended() && !lease_spent() && Clock::now() < until) co_await woken->wait_until(until);
      if (ended() || lease_spent()) throw StepFailure{why + "; the step ended while waiting for its session", false};
    }
  }
  std::optional<std::string> fail;
  bool retryable = false;
  json rows;
  try {
    co_await conn->query("BEGIN");
    // With a secret among the parameters, the server's log quotes nothing of
    // the transaction (bgexec._secret_step): an error's message can quote a
    // parameter whole (the job's event has it masked), its CONTEXT the
    // parameters cut short (a secret cut short is no longer the secret, and
    // no masker knows it), log_statement's lines all of them.  Before
    // _act_as: the owner's role cannot call it.
    if (secret_param) co_await conn->query("SELECT bgexec._secret_step()");
    // SET LOCAL ROLE owner, fixed for the transaction: the owner's statement
    // cannot SET ROLE or RESET ROLE to another role this login may become
    // (another tenant, or the worker's own role).
    // And the transaction does not outlive a worker that cannot end it:
    // - the server checks every second, while the statement runs, that the
    //   worker is still connected: one killed by SIGKILL cannot cancel it,
    //   and it would run on, holding its locks, beside the job's next
    //   attempt until it tried to send its rows;
    // - idle in the transaction for a lease, the session ends: the worker
    //   sends COMMIT at once, and never once its lease is lost, so a worker
    //   that stopped answering (a frozen host, SIGSTOP, a partition) does
    //   not hold the step's locks until TCP gives up on it (hours);
    // - over TCP, the server probes a silent worker as the worker probes the
    //   server (pg/connection.hpp, ConnectParams): a worker cut off
    //   mid-statement is noticed in about half a minute, and the connection
    //   check above then ends the statement;
    // - marked as this job's step under this lease (_step_session): when
    //   reconcile takes the lease back, the server ends the session, so the
    //   statement of a worker that is alive but cannot act (stopped,
    //   frozen) does not run on beside the job's next attempt.
    long idle_ms = std::max(1L, static_cast<long>(w_.config().lease_s * 1000));
    using Tcp = pg::TcpDefaults;
    pg::Params settings = {c_.owner, std::to_string(idle_ms), Tcp::keepalives_idle, Tcp::keepalives_interval,
                           Tcp::keepalives_count, Tcp::tcp_user_timeout, id_str(id()), id_str(lease())};
    // The step's step_completed is written in its own transaction, just
    // before COMMIT (bgexec._step_completed): the step's writes and the
    // record that it is done commit together.  Written after the COMMIT,
    // on the worker's session, a worker lost in between left the writes
    // committed and no record, and the job's next run ran the statement
    // again (e2e 90).  Under READ COMMITTED, the server's default (the
    // job's row, which heartbeats renew, could not be updated from a
    // REPEATABLE READ snapshot), and when the owner's role may reach the
    // function (USAGE on the schema: a job's owner need not be a client).
    // Else after the COMMIT, as before.
    auto setup = co_await conn->query(
        "SELECT pg_catalog.current_setting('transaction_isolation') = 'read committed' "
        "AND pg_catalog.has_schema_privilege($1::name, 'bgexec', 'USAGE'), "
        "bgexec._step_session($7::bigint, $8::bigint), bgexec._act_as($1), "
        "pg_catalog.set_config('client_connection_check_interval', '1000', true), "
        "pg_catalog.set_config('idle_in_transaction_session_timeout', $2, true), "
        "pg_catalog.set_config('tcp_keepalives_idle', $3, true), "
        "pg_catalog.set_config('tcp_keepalives_interval', $4, true), "
        "pg_catalog.set_config('tcp_keepalives_count', $5, true), "
        "pg_catalog.set_config('tcp_user_timeout', $6, true)",
        std::move(settings));
    const bool record_here = setup.get(0, 0) == std::optional<std::string>("t");
    if (ended()) throw pg::Error("57014", "canceling statement: step ended before it ran");
    std::string text = step["sql"].get<std::string>();
    escalation->in_statement = true;
    auto result = co_await conn->query_rows(text, p, capture_cap);
    escalation->in_statement = false;
    // A SQL_ASCII database (or a client_encoding other than UTF8) can return
    // bytes that are not UTF-8: they become U+FFFD rather than fail the step,
    // after masking, so no secret is missed because one of its bytes was
    // replaced (run_step masks the output again, which changes nothing).
    rows = mask(std::move(result));
    core::sanitize_utf8(rows);
    if (ended()) throw pg::Error("57014", "canceling statement: step ended before its COMMIT");
    if (record_here) {
      // The event as append_kept writes it (the rows may be 16 MiB).
      json data = {{"step", sid}};
      data["output"] = std::move(rows);
      OffloadedEvent event = co_await offload_event("step_completed", std::move(data));
      if (event.large) held_large_ = true;
      // One append of the job's at a time, as append_write: the job's seq
      // as the worker knows it (after_seq) is this event's once it commits.
      co_await append_order_.lock();
      FifoLock::Guard guard{append_order_};
      if (ended()) throw pg::Error("57014", "canceling statement: step ended before its COMMIT");
      // The owner's statement_timeout (its role's settings, _act_as) was
      // its statement's; the record is the worker's, which waits for the
      // job's row (a heartbeat): a short one of the owner's failed a step
      // whose statement had succeeded.  A statement of its own: a
      // statement's timeout is armed as it starts.  The owner's
      // lock_timeout needs none: _step_completed sets its own (0).
      co_await conn->query("SELECT pg_catalog.set_config('statement_timeout', '0', true)");
      pg::Params arg;
      arg.push_back(std::move(event.events));  // not through an initializer list, which copies
      auto r = co_await conn->query(
          // Every name qualified: the owner's statement ran in this
          // transaction and may have set its search_path.
          "SELECT bgexec._step_completed($1::pg_catalog.jsonb), pg_catalog.pg_current_xact_id()::pg_catalog.text",
          arg);
      std::optional<pg::Error> commit_error;
      try {
        co_await conn->query("COMMIT");
      } catch (const pg::Error& e) {
        commit_error = e;
      }
      // The COMMIT's reply lost (the session cut, the server restarted as
      // it committed): its transaction may have committed, step and
      // record.  Failed (and retried), it ran again; ended failed, its
      // writes stayed.  The server says which (pg_xact_status).
      if (commit_error) {
        bool made_it = false;
        if (commit_error->classify() == core::ErrorClass::connection && r.get(0, 1))
          made_it = co_await committed(*r.get(0, 1));
        if (!made_it) throw *commit_error;
      }
      note_written(known_seq_, r.get(0, 0));
      rows = std::move(event.data["output"]);
      recorded = true;
      output_bytes = event.output_bytes;
    } else {
      co_await conn->query("COMMIT");
    }
  } catch (const pg::Error& e) {
    // A lost session (the server restarted, reconcile ended it) is worth
    // another attempt; the server's 08P01 to a statement given the wrong
    // number of parameters, on a session that stays open, is not.
    auto cls = e.classify();
    retryable = cls == core::ErrorClass::connection || cls == core::ErrorClass::retry;
    fail = "sql: " + sql_error_text(e, conn->name(), secret_param) + " (SQLSTATE " + e.sqlstate() + ")";
  }
  killers_.erase(sid);
  conn->close();
  if (fail) throw StepFailure{*fail, retryable};
  co_return rows;
}

asio::awaitable<void> Job::step_sleep(const std::string& sid, const json& step) {
  json v = render(step["sleep"], sid);
  std::optional<double> secs;
  if (v.is_string()) secs = core::parse_seconds(v.get<std::string>());
  else secs = core::number_of(v);  // a raw number too (numbers as stored)
  // As submit bounds a literal: 0 to 100 years.  The value is named, as
  // an "if"'s is (masked before it is cut).
  constexpr double max_sleep = 3110400000.0;
  if (!secs || !(*secs >= 0 && *secs <= max_sleep)) {
    const json& t = step["sleep"];
    std::string shown = core::utf8_cut(core::dump(masker_.mask_json(v)), 100, "…");
    throw StepFailure{"step " + sid + ": \"sleep\" " + (t.is_string() ? core::utf8_cut(t.get<std::string>(), 100, "…") + " is " : "") + shown +
                          ", not seconds from 0 to 3110400000 (100 years) or a duration such as \"500ms\"",
                      false};
  }
  // A run after a give-back (snooze) sleeps what is left of the sleep: its
  // wake-up, recorded on the database clock, less the database's now.  At
  // most the step's seconds: a database clock stepped back does not make
  // it longer.  A first run has nothing recorded, and does not ask.
  if (c_.started_seq > 1) {
    pg::Params arg1_ = {id_str(id()), id_str(lease()), sid};
    if (auto left = co_await write("SELECT bgexec.sleep_left($1, $2, $3)", arg1_)) {
      const double l = std::strtod(left->c_str(), nullptr);
      if (l >= 0 && l < *secs) secs = l;
    }
  }
  auto t = std::make_shared<asio::steady_timer>(w_.executor(), step_wait(*secs));
  killers_[sid] = [t] {
    t->cancel();
    return true;
  };
  // Not one with a timeout of its own: its next run's step deadline would
  // start again, and a sleep meant to time out would complete.
  if (!step.contains("timeout")) {
    sleeps_[sid] = Sleeping{*secs, Clock::now() + step_wait(*secs)};
    wake_.notify();  // the job may sleep alone now: snooze_due
  }
  co_await t->async_wait(asio::as_tuple(asio::use_awaitable));
  killers_.erase(sid);
  sleeps_.erase(sid);
}

bool Job::snooze_due() const {
  if (stop_ != StopReason::none || failure_ || abandoned_ || finished_ || running_.empty()) return false;
  const bool draining = w_.draining();
  const double after = w_.config().snooze_after_s;
  if (!draining && !(after > 0)) return false;
  const auto now = Clock::now();
  for (const auto& sid : running_) {
    auto it = sleeps_.find(sid);
    if (it == sleeps_.end()) return false;
    if (!draining && it->second.wake - now <= seconds(after)) return false;
  }
  return true;
}

asio::awaitable<bool> Job::snooze() {
  co_await flush_logs();
  while (log_flushes_ > 0) co_await wake_.wait();
  json sleeps = json::object();
  for (const auto& [sid, secs] : snoozed_) sleeps[sid] = secs;
  pg::Params arg1_ = {id_str(id()), id_str(lease()), core::dump(sleeps)};
  std::optional<std::string> status;
  std::optional<std::string> refused;
  finish_unanswered_ = true;  // as a finish: a lease lost now may be lost to this very call
  try {
    status = co_await write("SELECT bgexec.snooze($1, $2, $3::jsonb)", arg1_);
  } catch (const pg::Error& e) {
    finish_unanswered_ = false;
    if (abandoned_) throw Abandoned{};
    refused = e.what();
  }
  finish_unanswered_ = false;
  if (refused) {
    core::log("warn", "giving back a sleeping job failed: ending it as the shutdown does",
              {{"job_id", id_str(id())}, {"error", *refused}});
    co_return false;
  }
  finish_written_ = true;
  finished_ = true;
  if (status)
    core::log("info", "job given back while it sleeps",
              {{"job_id", id_str(id())}, {"status", *status}, {"steps", core::dump(sleeps)}});
  else
    core::log("warn", "give-back refused: lease no longer current", {{"job_id", id_str(id())}});
  co_return true;
}

asio::awaitable<void> Job::read_stream(asio::posix::stream_descriptor& sd, const std::string& sid,
                                       const char* stream, bool log, std::string* capture) {
  // Masked before it is cut into lines: a secret spanning lines (a PEM key)
  // would otherwise reach the log one unmasked line at a time.
  core::StreamMasker masked(masker_);
  core::LineSplitter splitter;
  std::array<char, 65536> buf;
  bool over_cap = false;
  for (;;) {
    auto [ec, n] = co_await sd.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    if (n > 0) {
      std::string_view chunk(buf.data(), n);
      if (capture && capture->size() < capture_cap) capture->append(chunk);
      // Past the cap the step has failed (run_process): its process is
      // stopped now.  Left to run, a step that wrote for ever (`yes`) was
      // read for ever, its output thrown away, until a timeout or a stop.
      if (capture && capture->size() >= capture_cap && !over_cap) {
        over_cap = true;
        if (auto k = killers_.find(sid); k != killers_.end()) k->second();
      }
      if (log)
        for (auto& line : splitter.feed(masked.feed(chunk))) log_line(sid, stream, std::move(line));
    }
    if (ec) break;
  }
  if (log) {
    for (auto& line : splitter.feed(masked.flush())) log_line(sid, stream, std::move(line));
    auto rest = splitter.flush();
    if (!rest.empty()) log_line(sid, stream, std::move(rest));
  }
}

// The child's environment: the worker's (without BGEXEC_SECRET_*), then the
// step's env over it, then the worker's BGEXEC_* variables over both; a name
// is set once, so the value that wins is the only one the child sees.
// How the output of a step's process ends.  The leader's exit kills its
// process group, but a descendant that left the group (setsid, a daemon)
// may still hold stdout or stderr open, and the step would wait for its EOF
// for ever: no stop, step timeout or job timeout could end it.  So once the
// leader is reaped, the outputs get `limit` to reach their end, and are
// closed after it.
struct Job::OutputDrain {
  explicit OutputDrain(asio::any_io_executor ex) : timer(ex) {}
  asio::steady_timer timer;
  bool done = false;  // both outputs reached their end
};

asio::awaitable<void> Job::read_outputs(std::shared_ptr<proc::Child> child, std::string sid, bool log_stdout,
                                        std::string* capture, std::shared_ptr<OutputDrain> drain) {
  co_await (read_stream(child->out(), sid, "stdout", log_stdout, capture) &&
            read_stream(child->err(), sid, "stderr", true, nullptr));
  drain->done = true;
  drain->timer.cancel();
}

asio::awaitable<proc::Exit> Job::reap_then_drain(std::shared_ptr<proc::Child> child,
                                                 std::shared_ptr<OutputDrain> drain, Clock::duration limit,
                                                 std::string job_id, std::string sid) {
  proc::Exit exit = co_await child->wait();
  // Its stdin too: a descendant outside the group holding it would keep a
  // write that the leader left unread from ever ending (no EPIPE).
  boost::system::error_code ignored;
  child->in().close(ignored);
  if (!drain->done) {
    drain->timer.expires_after(limit);
    co_await drain->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (!drain->done) {
      core::log("warn", "step output still open after its process exited; closed",
                {{"job_id", job_id}, {"step", sid}});
      child->out().close(ignored);
      child->err().close(ignored);
    }
  }
  co_return exit;
}

asio::awaitable<Job::ProcOutput> Job::run_process(const std::string& sid, const std::vector<std::string>& argv,
                                                  const std::string& stdin_data, bool log_stdout,
                                                  const EnvVars& step_vars) {
  const std::string own[] = {id_str(id()), sid, std::to_string(c_.attempt), c_.queue,
                             worker_instance()};  // worker_vars' values
  auto set_below = [&](std::string_view entry) {
    std::string_view name = entry.substr(0, entry.find('='));
    if (is_worker_var(name)) return true;
    for (const auto& [k, v] : step_vars)
      if (k == name) return true;
    return false;
  };
  std::vector<std::string> env;
  env.reserve(w_.child_env().size() + step_vars.size() + std::size(own));
  for (const auto& e : w_.child_env())
    if (!set_below(e)) env.push_back(e);
  for (const auto& [k, v] : step_vars) env.push_back(k + "=" + v);
  for (std::size_t i = 0; i < std::size(own); ++i) env.push_back(std::string(worker_vars[i]) + "=" + own[i]);
  // One of the worker's step processes (--step-processes): a workflow of
  // many parallel action steps, or many such jobs, spawned them all at
  // once and failed those past the open-file limit with EMFILE.  Granted
  // in the order asked; the wait ends with the step (a stop, a sibling's
  // failure, its deadline, the lease, the shutdown: each calls the step's
  // killer, which wakes it).  Released when the process has ended and its
  // pipes are closed, granted or not.
  auto slot = w_.step_processes().hold();
  began(&w_.step_processes());  // its step waits (counted) or runs
  if (!slot.ticket->granted) w_.pool_short(w_.step_processes());
  if (!slot.ticket->granted) {
    core::log("debug", "step waiting for a step process", {{"job_id", id_str(id())}, {"step", sid}});
    const bool granted = co_await await_slot(slot, sid, nullptr);
    // The lease again, as run_step checks it before the step starts: a
    // process started past it would run beside the job's next claim.
    check_lease();
    if (!granted) throw StepFailure{"step ended while waiting for one of the worker's --step-processes", false};
  }
  std::shared_ptr<proc::Child> child;
  try {
    child = proc::Child::spawn(w_.executor(), argv, env);
  } catch (const std::system_error& e) {
    // Out of descriptors, processes or memory, or the program being
    // replaced as it started (a deploy): the host's state, not the step's,
    // so the job's next attempt may start it.  Every error was final, and a
    // worker short of descriptors failed its retry-safe jobs for good.
    const int err = e.code().value();
    const bool transient =
        err == EMFILE || err == ENFILE || err == EAGAIN || err == ENOMEM || err == ETXTBSY;
    StepFailure f{std::string("cannot start ") + argv[0] + ": " + e.code().message(), transient};
    // The host's, not the job's: the worker stops claiming until a process
    // starts again, and an attempt that started nothing yet goes back
    // uncounted (run_step).  A program being replaced (ETXTBSY) is the step's.
    if (transient && err != ETXTBSY) {
      const char* name = strerrorname_np(err);
      w_.steps_cannot_start(e.code().message(), name ? name : std::to_string(err));
      f.host = true;
    }
    throw f;
  }
  began_ = true;
  w_.step_started();
  double grace = w_.config().kill_grace_s;
  killers_[sid] = [child, grace] { return child->terminate(grace); };
  core::log("debug", "process started", {{"job_id", id_str(id())}, {"step", sid}, {"pid", std::to_string(child->pid())}});
  ProcOutput out;
  auto data = std::make_shared<std::string>(stdin_data);
  auto drain = std::make_shared<OutputDrain>(w_.executor());
  proc::Exit exit = co_await (reap_then_drain(child, drain, seconds(std::max(grace, 1.0)), id_str(id()), sid) &&
                              feed_stdin(child, data) &&
                              read_outputs(child, sid, log_stdout, &out.stdout_text, drain));
  killers_.erase(sid);
  // Not cut and kept: the first 16 MiB of a larger JSON output are not JSON,
  // and became a string output that the steps after it read as such.
  // Before the exit's own failure: a process stopped at the cap exits on
  // its signal.
  if (out.stdout_text.size() >= capture_cap)
    throw StepFailure{argv[0] + ": stdout is " + std::to_string(capture_cap) +
                          " bytes or more, the most a step's output may be (write large output to a file"
                          " and print its path)",
                      false};
  if (!exit.ok()) throw StepFailure{argv[0] + ": " + exit.describe(), true};
  // As read: made storable (U+FFFD for binary output) by process_output.
  co_return out;
}

}  // namespace bgexec::worker
