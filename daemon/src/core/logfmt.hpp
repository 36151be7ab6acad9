#pragma once

#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace bgexec::core {

using LogFields = std::initializer_list<std::pair<std::string_view, std::string>>;

// Writes one logfmt line to stderr, e.g.
//   ts=2026-11-29T09:00:00.123Z level=info msg="claimed jobs" n=3
// if `level` is at or above the global minimum. Thread-safe: lines from
// concurrent callers never interleave (mutex + a single write(2) per line).
void log(std::string_view level, std::string_view msg, LogFields fields = {});

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

}  // namespace bgexec::core
