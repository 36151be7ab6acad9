#pragma once
// Times as bgexec prints them, in SQL: UTC ISO 8601 whatever the session's
// DateStyle and TimeZone (the server's own text of a timestamptz follows
// both: "12/06/2026 19:13:03.914461 EST" under DateStyle SQL in
// America/New_York).

#include <string>

namespace bgexec::core {

// Digits of the second: 0 as the CLI's tables print times
// (2026-12-02T03:00:00Z), 3 as `status` does (…03:00:00.123Z), 6 in every
// --json output and HTTP response (…03:00:00.123456Z: the value exactly,
// which a reader may send back, as the event followers do).
enum class Time { seconds = 0, millis = 3, json = 6 };

// SQL that shows the timestamptz expression `expr` so (pg_catalog's
// to_char: its format is an untyped literal).  NULL for a NULL or an
// infinite time (the API refuses infinite ones).
inline std::string utc_iso(const std::string& expr, Time digits = Time::seconds) {
  const char* fraction = digits == Time::json ? ".US" : digits == Time::millis ? ".MS" : "";
  return "pg_catalog.to_char((" + expr + ") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS" + fraction +
         "\"Z\"')";
}

}  // namespace bgexec::core
