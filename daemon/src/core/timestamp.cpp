#include "timestamp.hpp"

#include <cstdio>
#include <ctime>
#include <set>
#include <utility>

namespace bgexec::core {
namespace {

// `n` ASCII digits at `s[at]` as a number, advancing `at`; nullopt if not.
std::optional<int> digits(std::string_view s, std::size_t& at, std::size_t n) {
  if (at + n > s.size()) return std::nullopt;
  int v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const char c = s[at + i];
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  at += n;
  return v;
}

bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int days_in(int y, int m) {
  static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap(y) ? 29 : d[m - 1];
}

}  // namespace

// A hand parser, not strptime or the server: both take forms (and locale
// names) the contract does not.
std::optional<IsoTime> parse_iso_time(std::string_view s) {
  IsoTime t;
  std::size_t at = 0;
  auto lit = [&](char c) {
    if (at < s.size() && s[at] == c) return ++at, true;
    return false;
  };
  auto y = digits(s, at, 4);
  if (!y || !lit('-')) return std::nullopt;
  auto mo = digits(s, at, 2);
  if (!mo || !lit('-')) return std::nullopt;
  auto d = digits(s, at, 2);
  if (!d || !(lit('T') || lit('t') || lit(' '))) return std::nullopt;
  auto h = digits(s, at, 2);
  if (!h || !lit(':')) return std::nullopt;
  auto mi = digits(s, at, 2);
  if (!mi) return std::nullopt;
  std::optional<int> sec = 0;
  if (lit(':')) {
    sec = digits(s, at, 2);
    if (!sec) return std::nullopt;
    if (lit('.')) {
      while (at < s.size() && s[at] >= '0' && s[at] <= '9') t.fraction += s[at++];
      if (t.fraction.empty()) return std::nullopt;
    }
  }
  if (at < s.size()) {
    if (lit('Z') || lit('z')) {
      t.offset_minutes = 0;
    } else if (s[at] == '+' || s[at] == '-') {
      const int sign = s[at++] == '-' ? -1 : 1;
      auto oh = digits(s, at, 2);
      if (!oh) return std::nullopt;
      std::optional<int> om = 0;
      if (lit(':')) {
        om = digits(s, at, 2);
      } else if (at < s.size()) {
        om = digits(s, at, 2);
      }
      if (!om || *oh > 23 || *om > 59) return std::nullopt;
      t.offset_minutes = sign * (*oh * 60 + *om);
    } else {
      return std::nullopt;
    }
  }
  if (at != s.size()) return std::nullopt;
  if (*y < 1 || *mo < 1 || *mo > 12 || *d < 1 || *d > days_in(*y, *mo) || *h > 23 || *mi > 59 || *sec > 59)
    return std::nullopt;
  t.year = *y, t.month = *mo, t.day = *d, t.hour = *h, t.minute = *mi, t.second = *sec;
  return t;
}

std::string iso_text(const IsoTime& t) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d", t.year, t.month, t.day, t.hour, t.minute,
                t.second);
  std::string out = buf;
  if (!t.fraction.empty()) out += "." + t.fraction;
  const int off = t.offset_minutes.value_or(0);
  const int a = off < 0 ? -off : off;
  std::snprintf(buf, sizeof buf, "%c%02d:%02d", off < 0 ? '-' : '+', a / 60, a % 60);
  return out + buf;
}

// mktime twice, as standard time and as DST, and keeps each answer whose
// local time reads back as `t`: none in a gap, two distinct instants in a
// fall-back hour.
LocalResult resolve_local(IsoTime t) {
  ::tzset();
  std::set<std::pair<std::time_t, long>> found;
  for (int dst : {0, 1}) {
    std::tm tm{};
    tm.tm_year = t.year - 1900, tm.tm_mon = t.month - 1, tm.tm_mday = t.day;
    tm.tm_hour = t.hour, tm.tm_min = t.minute, tm.tm_sec = t.second, tm.tm_isdst = dst;
    const std::time_t at = std::mktime(&tm);
    std::tm back{};
    if (!::localtime_r(&at, &back)) continue;
    if (back.tm_year == t.year - 1900 && back.tm_mon == t.month - 1 && back.tm_mday == t.day &&
        back.tm_hour == t.hour && back.tm_min == t.minute && back.tm_sec == t.second)
      found.emplace(at, back.tm_gmtoff);
  }
  if (found.empty()) return {std::nullopt, "does not exist in the local time zone (a daylight-saving gap)"};
  if (found.size() > 1)
    return {std::nullopt, "is ambiguous in the local time zone (a daylight-saving fall-back): add an offset"};
  const long off = found.begin()->second;
  if (off % 60 != 0) return {std::nullopt, "has a local offset of odd seconds: add an offset"};
  t.offset_minutes = static_cast<int>(off / 60);
  return {t, ""};
}

}  // namespace bgexec::core
