#pragma once
// Whole-string decimal integers, for arguments from outside the process.

#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>

namespace bgexec::core {

// The whole of `text` as a decimal integer in [lo, hi]: digits with an
// optional '-', no spaces, no '+', no overflow; nullopt for anything else.
inline std::optional<long long> parse_integer(std::string_view text, long long lo, long long hi) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || v < lo || v > hi)
    return std::nullopt;
  return v;
}

}  // namespace bgexec::core
