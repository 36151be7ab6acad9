#include "core/suggest.hpp"

#include <algorithm>
#include <vector>

namespace bgexec::core {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  // Three rows: the one before last (for a swap), the last, the current.
  std::vector<std::size_t> prev2(m + 1), prev(m + 1), cur(m + 1);
  for (std::size_t j = 0; j <= m; ++j) prev[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[m];
}

std::optional<std::string> closest_name(std::string_view given, const std::set<std::string>& names,
                                        std::size_t max_distance) {
  std::string_view bare = given;
  while (!bare.empty() && bare.front() == '-') bare.remove_prefix(1);
  std::optional<std::string> best;
  std::size_t best_d = max_distance + 1;
  for (const auto& name : names) {
    if (name == given) return std::nullopt;
    const std::size_t d = edit_distance(given, name);
    if (d < best_d && 2 * d <= bare.size()) best = name, best_d = d;
  }
  return best;
}

}  // namespace bgexec::core
