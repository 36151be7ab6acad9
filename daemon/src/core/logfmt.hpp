#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bgexec::core {

using LogFields = std::initializer_list<std::pair<std::string_view, std::string>>;

// Writes one logfmt line to stderr, e.g.
//   ts=2026-11-29T09:00:00.123Z level=info msg="claimed jobs" n=3
// if `level` is at or above the global minimum. Never blocks on stderr: the
// line goes to a bounded queue (BGEXEC_LOG_BUFFER_BYTES, defaults to 4 MiB)
// that one writer thread drains in order; a reader of stderr that stops
// reading (a stalled log shipper, `| logger`, Ctrl-S) fills the pipe, then
// the queue, then lines are dropped and counted, and a warn line with the
// count follows once stderr takes lines again.  The event loop's heartbeats
// must never wait for a log reader (DESIGN §5).  Thread-safe: lines never
// interleave.  Where no thread can be started (and in a forked child) lines
// are written directly, as before.
void log(std::string_view level, std::string_view msg, LogFields fields = {});

// Waits until the lines queued so far are written, at most `within`: a
// process calls it before _Exit so its last lines (a fatal error) come out,
// without hanging on a reader that stopped.  Also run at exit().
void flush_log(std::chrono::milliseconds within = std::chrono::milliseconds(1500));

// The queue between log() and its writer thread: bounded in bytes, FIFO,
// counting what it drops.  Exposed for tests.
class LineQueue {
 public:
  explicit LineQueue(std::size_t max_bytes) : max_bytes_(max_bytes) {}
  // Appends the line, or drops it and counts it when the lines queued or
  // being written would pass max_bytes.  The first line accepted after
  // drops is preceded by the warn line naming how many.  Returns whether
  // the line was kept.
  bool push(std::string line);
  // Blocks until lines are queued, then moves them all into *out in order;
  // they count against the bound until written() is called.
  void take(std::deque<std::string>* out);
  // The batch from take() of `bytes` is written (or given up): frees its
  // room and, when nothing else is queued and lines were dropped, queues the
  // warn line with their count.
  void written(std::size_t bytes);
  // Waits until nothing is queued or being written, at most `within`;
  // returns whether it is so.
  bool wait_idle(std::chrono::milliseconds within);
  // Lines dropped and not yet reported by a warn line.
  std::uint64_t dropped() const;

 private:
  void queue_drop_notice();  // caller holds mutex_
  const std::size_t max_bytes_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;  // lines queued
  std::condition_variable idle_;   // nothing queued nor being written
  std::deque<std::string> lines_;
  std::size_t bytes_ = 0;  // queued + taken and not yet written
  bool taken_ = false;
  std::uint64_t dropped_ = 0;
};

// The warn line that reports `n` dropped lines (level=error under
// BGEXEC_LOG_LEVEL=error: never below the level, never filtered by it).
std::string dropped_line(std::uint64_t n);

// The line log() would write (with trailing '\n'), stamped with the current
// time. Exposed for tests and for callers that route lines elsewhere.
std::string format_line(std::string_view level, std::string_view msg, LogFields fields = {});

// Same, with an explicit timestamp so output is deterministic.
std::string format_line(std::chrono::system_clock::time_point ts, std::string_view level,
                        std::string_view msg, LogFields fields = {});

// Quotes and escapes a value when logfmt needs it (empty, or contains space,
// '"', '=', '\\' or a control character); returns it unchanged otherwise.
std::string logfmt_value(std::string_view value);

// Sets the global minimum level: "debug", "info", "warn" (or "warning"),
// "error". Returns false and changes nothing for an unknown name. Defaults to
// info; the caller reads BGEXEC_LOG_LEVEL.
bool set_level(std::string_view level);

// Whether a line at `level` would be written now. Unknown level names are
// always written (never hide a message because of a typo in its level).
bool level_enabled(std::string_view level);

// One line per period for a failure that repeats from many places at once:
// every open event stream polls every 3 s, so while the database is away a
// gateway with a thousand streams wrote hundreds of identical warnings a
// second.  The first is written; the rest within `every` are counted, and
// the next line written carries the count.  Thread-safe.
class LogThrottle {
 public:
  explicit LogThrottle(std::chrono::steady_clock::duration every) : every_(every) {}
  // Whether to write the line now; when it is, *skipped is how many were
  // held back since the last one written.
  bool allow(std::size_t* skipped) { return allow(std::chrono::steady_clock::now(), skipped); }
  bool allow(std::chrono::steady_clock::time_point now, std::size_t* skipped);

 private:
  std::chrono::steady_clock::duration every_;
  std::optional<std::chrono::steady_clock::time_point> last_;
  std::size_t skipped_ = 0;
  std::mutex mutex_;
};

// The worker's "database call failed, retrying" during an outage: each job
// in flight retries its own call on a shared session (control, finish,
// heartbeat) with a backoff to 5 s, and each retry wrote a warn line: N
// jobs, N lines every 5 s (8 jobs: 120 lines in 50 s).  One line per
// session and SQLSTATE per period instead, the first at once, with the
// calls waiting on the session and the lines held back since the last; the
// rest at debug.  The first success on a session after a line was written
// is its recovery, logged once (recovered).  One thread (the event loop).
class RetryLog {
 public:
  explicit RetryLog(std::chrono::steady_clock::duration every) : every_(every) {}
  struct Line {
    bool write = false;         // at warn; otherwise debug
    std::size_t waiting = 0;    // calls on the session in their retry loop
    std::size_t held_back = 0;  // lines of this session and SQLSTATE since the last written
  };
  // A call on `session` entered (+1) or left (-1) its retry loop.
  void waiting(const std::string& session, int delta);
  // A call on `session` failed with `sqlstate` and is retried.
  Line failed(const std::string& session, const std::string& sqlstate, std::chrono::steady_clock::time_point now);
  // Whether a failure line was written for any session since its recovery:
  // a branch on every call's success, the map looked up only then.
  bool any_down() const { return down_ > 0; }
  // A call on `session` succeeded: the failed calls counted since its first
  // line written, once (0 when no line was written: nothing to say).
  std::size_t recovered(const std::string& session);

 private:
  struct Session {
    std::size_t waiting = 0;
    std::size_t failed = 0;  // since its first line written
    bool down = false;
    std::map<std::string, LogThrottle> keys;  // by SQLSTATE: a few at most
  };
  std::chrono::steady_clock::duration every_;
  std::vector<std::pair<std::string, Session>> sessions_;  // three: control, finish, heartbeat
  std::size_t down_ = 0;
  Session& session(const std::string& name);
};

}  // namespace bgexec::core
