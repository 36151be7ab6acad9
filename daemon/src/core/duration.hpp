#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace bgexec::core {

// Parses a non-negative duration: a bare number of seconds ("30", "1.5") or a
// number with one unit suffix: ms, s, m, h ("500ms", "30s", "5m", "2h").
// Returns nullopt for anything else (empty, negative, non-finite, junk), so
// callers can name the offending flag or key in their own error message.
std::optional<double> parse_seconds(std::string_view text);

// A delay before a job may run (HTTP `run_after: "+DUR"`, `submit
// --run-after +DUR`): parse_seconds's forms, or a number of days with the
// suffix d ("2d", "1.5d"), a day being 86 400 s, not a calendar day,
// whose length would follow a session's TimeZone across a DST night.
std::optional<double> parse_delay(std::string_view text);

// Renders seconds as a PostgreSQL interval literal ("30 seconds",
// "0.5 seconds"), microsecond precision, locale-independent, for passing as
// an `interval` query parameter. Throws std::invalid_argument on NaN/inf.
std::string to_pg_interval(double seconds);

// A number of seconds for a log line or a message, in its shortest form
// that reads back as the same double: 30, 0.5, 1e-06 (std::to_string's
// 30.000000 was six digits of noise).
std::string seconds_text(double seconds);

}  // namespace bgexec::core
