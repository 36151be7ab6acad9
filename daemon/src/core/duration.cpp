#include "duration.hpp"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <system_error>

namespace bgexec::core {

// Splits the numeric prefix from the unit suffix and scales by the unit; the
// number must use the whole prefix (from_chars, no locale, no leading '+').
std::optional<double> parse_seconds(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::size_t unit_at = text.size();
  while (unit_at > 0 && ((text[unit_at - 1] >= 'a' && text[unit_at - 1] <= 'z') ||
                         (text[unit_at - 1] >= 'A' && text[unit_at - 1] <= 'Z'))) {
    --unit_at;
  }
  const std::string_view number = text.substr(0, unit_at);
  const std::string_view unit = text.substr(unit_at);
  if (number.empty()) return std::nullopt;

  double value = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value,
                                         std::chars_format::fixed);
  if (ec != std::errc{} || end != number.data() + number.size()) return std::nullopt;
  if (!std::isfinite(value) || value < 0) return std::nullopt;

  double scale = 1;
  if (unit.empty() || unit == "s") {
    scale = 1;
  } else if (unit == "ms") {
    scale = 0.001;
  } else if (unit == "m") {
    scale = 60;
  } else if (unit == "h") {
    scale = 3600;
  } else {
    return std::nullopt;
  }
  const double seconds = value * scale;
  if (!std::isfinite(seconds)) return std::nullopt;
  return seconds;
}

// Days scaled here; everything else is parse_seconds's.
std::optional<double> parse_delay(std::string_view text) {
  if (text.size() > 1 && text.back() == 'd') {
    const char last = text[text.size() - 2];
    if (!(last >= '0' && last <= '9') && last != '.') return std::nullopt;  // "2hd"
    const auto days = parse_seconds(text.substr(0, text.size() - 1));
    if (!days || !std::isfinite(*days * 86400)) return std::nullopt;
    return *days * 86400;
  }
  return parse_seconds(text);
}

// Fixed notation with 6 decimals (PostgreSQL's interval resolution), then
// trailing zeros and a dangling '.' are dropped so 30 reads "30 seconds".
std::string to_pg_interval(double seconds) {
  if (!std::isfinite(seconds)) throw std::invalid_argument("interval must be finite");
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, seconds, std::chars_format::fixed, 6);
  if (ec != std::errc{}) throw std::invalid_argument("interval out of range");
  std::string number(buf, end);
  if (number.find('.') != std::string::npos) {
    while (!number.empty() && number.back() == '0') number.pop_back();
    if (!number.empty() && number.back() == '.') number.pop_back();
  }
  if (number == "-0") number = "0";
  return number + " seconds";
}

std::string seconds_text(double seconds) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, seconds);
  return ec == std::errc{} ? std::string(buf, end) : std::to_string(seconds);
}

}  // namespace bgexec::core
