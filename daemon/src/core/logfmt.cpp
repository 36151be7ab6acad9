#include "logfmt.hpp"

#include "utf8.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace bgexec::core {

namespace {

std::atomic<int> g_min_level{1};
std::mutex g_write_mutex;

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

// Formats outside the lock, then writes the whole line with write(2) under
// the mutex, retrying partial writes and EINTR; a failing stderr is ignored.
void log(std::string_view level, std::string_view msg, LogFields fields) {
  if (!level_enabled(level)) return;
  const std::string line = format_line(level, msg, fields);
  const std::lock_guard lock(g_write_mutex);
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
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

}  // namespace bgexec::core
