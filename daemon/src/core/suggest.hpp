#pragma once
// "did you mean": the nearest of a set of names to one misspelt.

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace bgexec::core {

// The edit distance of a and b: the fewest insertions, deletions,
// substitutions and swaps of two adjacent characters that turn one into the
// other (the optimal string alignment distance: "priorty" is 1 from
// "priority", "--wiat" 1 from "--wait").  Bytes, not characters.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The name of `names` nearest to `given`, when at most max_distance from it
// and half as far as `given` is long without its leading dashes at most
// (--zz is no misspelling of --db, nor --all of it); the first in order of
// those as near.  nullopt when none is, or `given` is one of them.
std::optional<std::string> closest_name(std::string_view given, const std::set<std::string>& names,
                                        std::size_t max_distance = 2);

}  // namespace bgexec::core
