#include "logfmt.hpp"

#include "utf8.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <system_error>
#include <thread>

namespace bgexec::core {

namespace {

std::atomic<int> g_min_level{1};

constexpr std::size_t default_buffer_bytes = std::size_t{4} << 20;

// Writes all of [p, p+n) to fd 2, retrying partial writes and EINTR; a
// failing stderr is ignored.  Blocks while a pipe's reader does not read.
void write_all(const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

// BGEXEC_LOG_BUFFER_BYTES, or 4 MiB when unset or not a positive number.
std::size_t buffer_bytes() {
  const char* v = std::getenv("BGEXEC_LOG_BUFFER_BYTES");
  if (v == nullptr || *v == '\0') return default_buffer_bytes;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || *end != '\0' || n == 0 || *v == '-') return default_buffer_bytes;
  return static_cast<std::size_t>(n);
}

enum class Mode { unstarted, thread, direct };

// The process's log sink.  Allocated once and never freed: the writer
// thread and the exit-time flush use it after static destructors run.
struct Sink {
  LineQueue queue{buffer_bytes()};
  std::atomic<Mode> mode{Mode::unstarted};
  std::mutex mutex;  // starting the writer; direct writes
};

Sink& sink() {
  static Sink* const s = new Sink;  // see Sink: deliberately leaked
  return *s;
}

// Drains the queue for the life of the process.  Whole lines go out in
// write(2)s of at most PIPE_BUF bytes (a longer line alone), so lines stay
// whole in a pipe that other processes (the step guard) write to as well.
// It rests a millisecond after each batch, so that a busy worker's lines go
// out a batch at a time: woken for each line, it made the drain of 20 000
// noop jobs at info ~20 % slower on two cores.
void writer_loop(Sink& s) {
  std::deque<std::string> batch;
  std::string chunk;
  for (;;) {
    s.queue.take(&batch);
    std::size_t bytes = 0;
    chunk.clear();
    for (const std::string& line : batch) {
      bytes += line.size();
      if (!chunk.empty() && chunk.size() + line.size() > PIPE_BUF) {
        write_all(chunk.data(), chunk.size());
        chunk.clear();
      }
      chunk += line;
    }
    write_all(chunk.data(), chunk.size());
    batch.clear();
    s.queue.written(bytes);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// A forked child (the guard's step stopper) has no writer thread, may find
// the sink's locks held by threads that are gone, and ends with _Exit: it
// writes its lines directly.  Registered when the program loads, so a child
// forked before the parent's first line knows it too.
std::atomic<bool> g_forked{false};
void on_fork_child() { g_forked.store(true, std::memory_order_relaxed); }
const int g_atfork_registered = ::pthread_atfork(nullptr, nullptr, on_fork_child);

// Starts the writer thread on the first line; where no thread can be had
// (RLIMIT_NPROC, pids.max), lines are written directly as before.
void start_or_write(Sink& s, std::string&& line) {
  const std::lock_guard lock(s.mutex);
  if (s.mode.load(std::memory_order_acquire) == Mode::unstarted) {
    try {
      std::thread([&s] { writer_loop(s); }).detach();
      s.mode.store(Mode::thread, std::memory_order_release);
      std::atexit([] { flush_log(); });
    } catch (const std::system_error&) {
      s.mode.store(Mode::direct, std::memory_order_release);
    }
  }
  if (s.mode.load(std::memory_order_acquire) == Mode::thread)
    s.queue.push(std::move(line));
  else
    write_all(line.data(), line.size());
}

// Maps a level name to its rank; -1 for unknown names.
int level_rank(std::string_view level) {
  if (level == "debug") return 0;
  if (level == "info") return 1;
  if (level == "warn" || level == "warning") return 2;
  if (level == "error") return 3;
  return -1;
}

// Whether logfmt needs quotes around this value to stay parseable (and a
// terminal showing the log free of the value's control characters).
bool needs_quotes(std::string_view value) {
  if (value.empty()) return true;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    const auto u = static_cast<unsigned char>(c);
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || u < 0x20 || u == 0x7f || c1_at(value, i)) return true;
  }
  return false;
}

// RFC 3339 UTC with milliseconds, independent of TZ and locale.
std::string format_ts(std::chrono::system_clock::time_point ts) {
  using namespace std::chrono;
  const auto ms_total = duration_cast<milliseconds>(ts.time_since_epoch()).count();
  auto secs = static_cast<std::time_t>(ms_total / 1000);
  auto ms = static_cast<int>(ms_total % 1000);
  if (ms < 0) {
    ms += 1000;
    secs -= 1;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];  // sized for any int fields so the format can never truncate
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

}  // namespace

// Escapes backslash, quote and control characters (C1 as \u0080-\u009f)
// inside double quotes so a multi-line or hostile value still occupies
// exactly one log line.
std::string logfmt_value(std::string_view value) {
  if (!needs_quotes(value)) return std::string(value);
  std::string out;
  out.reserve(value.size() + 2);
  out.push_back('"');
  for (std::size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    if (c1_at(value, i)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(value[++i]));
      out += buf;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", u);
          out += buf;
        } else {
          out.push_back(c);
        }
      }
    }
  }
  out.push_back('"');
  return out;
}

// Builds "ts=... level=... msg=... k=v ...\n" with every value escaped.
std::string format_line(std::chrono::system_clock::time_point ts, std::string_view level,
                        std::string_view msg, LogFields fields) {
  std::string line = "ts=" + format_ts(ts);
  line += " level=" + logfmt_value(level);
  line += " msg=" + logfmt_value(msg);
  for (const auto& [key, value] : fields) {
    line.push_back(' ');
    line.append(key);
    line.push_back('=');
    line += logfmt_value(value);
  }
  line.push_back('\n');
  return line;
}

// format_line() stamped with the current wall-clock time.
std::string format_line(std::string_view level, std::string_view msg, LogFields fields) {
  return format_line(std::chrono::system_clock::now(), level, msg, fields);
}

// Formats outside any lock, then queues the line for the writer thread.
void log(std::string_view level, std::string_view msg, LogFields fields) {
  if (!level_enabled(level)) return;
  std::string line = format_line(level, msg, fields);
  if (g_forked.load(std::memory_order_relaxed)) {
    write_all(line.data(), line.size());
    return;
  }
  Sink& s = sink();
  if (s.mode.load(std::memory_order_acquire) == Mode::thread)
    s.queue.push(std::move(line));
  else
    start_or_write(s, std::move(line));
}

// Only the writer thread's queue needs waiting for; direct writes are done.
void flush_log(std::chrono::milliseconds within) {
  if (g_forked.load(std::memory_order_relaxed)) return;
  Sink& s = sink();
  if (s.mode.load(std::memory_order_acquire) == Mode::thread) s.queue.wait_idle(within);
}

// A warning, written whatever BGEXEC_LOG_LEVEL is: the lines it reports passed
// the level (log() filters before the queue), so their loss is news at that
// level too.  Under BGEXEC_LOG_LEVEL=error (every line dropped an error) it says
// level=error: written as warn, it showed below the level the operator set.
std::string dropped_line(std::uint64_t n) {
  return format_line(level_enabled("warn") ? "warn" : "error", "log lines dropped: stderr was not being read",
                     {{"dropped", std::to_string(n)}});
}

// A line longer than the bound is still kept when nothing else is queued,
// so a drop always has lines after it to report it.
bool LineQueue::push(std::string line) {
  const std::lock_guard lock(mutex_);
  if (bytes_ > 0 && bytes_ + line.size() > max_bytes_) {
    ++dropped_;
    return false;
  }
  if (dropped_ > 0) queue_drop_notice();
  bytes_ += line.size();
  lines_.push_back(std::move(line));
  ready_.notify_one();
  return true;
}

void LineQueue::queue_drop_notice() {
  std::string notice = dropped_line(dropped_);
  dropped_ = 0;
  bytes_ += notice.size();
  lines_.push_back(std::move(notice));
  ready_.notify_one();
}

void LineQueue::take(std::deque<std::string>* out) {
  std::unique_lock lock(mutex_);
  ready_.wait(lock, [this] { return !lines_.empty(); });
  out->swap(lines_);
  lines_.clear();
  taken_ = true;
}

void LineQueue::written(std::size_t bytes) {
  const std::lock_guard lock(mutex_);
  bytes_ -= bytes < bytes_ ? bytes : bytes_;
  taken_ = false;
  if (lines_.empty() && dropped_ > 0) queue_drop_notice();
  if (lines_.empty()) idle_.notify_all();
}

bool LineQueue::wait_idle(std::chrono::milliseconds within) {
  std::unique_lock lock(mutex_);
  return idle_.wait_for(lock, within, [this] { return lines_.empty() && !taken_; });
}

std::uint64_t LineQueue::dropped() const {
  const std::lock_guard lock(mutex_);
  return dropped_;
}

// Stores the rank atomically so log() can read it without the mutex.
bool set_level(std::string_view level) {
  const int rank = level_rank(level);
  if (rank < 0) return false;
  g_min_level.store(rank, std::memory_order_relaxed);
  return true;
}

// Compares against the current minimum; unknown names pass.
bool level_enabled(std::string_view level) {
  const int rank = level_rank(level);
  return rank < 0 || rank >= g_min_level.load(std::memory_order_relaxed);
}

bool LogThrottle::allow(std::chrono::steady_clock::time_point now, std::size_t* skipped) {
  std::lock_guard lock(mutex_);
  if (last_ && now - *last_ < every_) {
    ++skipped_;
    return false;
  }
  last_ = now;
  *skipped = skipped_;
  skipped_ = 0;
  return true;
}

RetryLog::Session& RetryLog::session(const std::string& name) {
  for (auto& [n, s] : sessions_)
    if (n == name) return s;
  return sessions_.emplace_back(name, Session{}).second;
}

void RetryLog::waiting(const std::string& name, int delta) {
  auto& s = session(name);
  if (delta < 0 && s.waiting < static_cast<std::size_t>(-delta))
    s.waiting = 0;
  else
    s.waiting += delta;
}

RetryLog::Line RetryLog::failed(const std::string& name, const std::string& sqlstate,
                                std::chrono::steady_clock::time_point now) {
  auto& s = session(name);
  Line line;
  line.waiting = s.waiting;
  if (s.down) ++s.failed;
  if (!s.keys.try_emplace(sqlstate, every_).first->second.allow(now, &line.held_back)) return line;
  line.write = true;
  if (!s.down) {
    s.down = true;
    s.failed = 1;
    ++down_;
  }
  return line;
}

std::size_t RetryLog::recovered(const std::string& name) {
  auto& s = session(name);
  if (!s.down) return 0;
  s.down = false;
  --down_;
  s.keys.clear();  // the next outage's first line is written at once
  return std::exchange(s.failed, 0);
}

}  // namespace bgexec::core
