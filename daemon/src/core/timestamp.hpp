#pragma once
// Times as a user types them (HTTP `run_after`, `bgexec submit
// --run-after`), read here and not by the server: its reading follows the
// session's DateStyle and TimeZone ("08/12/2026 03:00" was 12 August at
// UTC on one gateway and 8 December in IST on another).

#include <optional>
#include <string>
#include <string_view>

namespace bgexec::core {

// An ISO 8601 / RFC 3339 date and time: YYYY-MM-DD, 'T' (or 't', or one
// space), HH:MM, optionally :SS and a fraction, optionally an offset: 'Z'
// (or 'z'), ±HH:MM, ±HHMM or ±HH.  Fields in range (the day in its month,
// leap years counted; second 60 refused); nothing before or after it.
struct IsoTime {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  std::string fraction;                // digits after the '.', "" if none
  std::optional<int> offset_minutes;   // east of UTC; nullopt: no offset given
};
std::optional<IsoTime> parse_iso_time(std::string_view text);

// `t` as timestamptz input text every DateStyle reads alike:
// "2026-12-08T03:00:00.5+05:30" (offset_minutes must be set).
std::string iso_text(const IsoTime& t);

// An offset-less `t` read in the process's local time zone (TZ, else
// /etc/localtime, through the C library): `t` with its offset set, or why
// not: the time falls in a gap (a DST spring-forward) or twice (a
// fall-back), where only an offset says which instant is meant.
struct LocalResult {
  std::optional<IsoTime> time;
  std::string error;  // "does not exist" / "is ambiguous" ...
};
LocalResult resolve_local(IsoTime t);

}  // namespace bgexec::core
