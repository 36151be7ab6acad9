#include "core/suggest.hpp"

#include <gtest/gtest.h>

using bgexec::core::closest_name;
using bgexec::core::edit_distance;

TEST(EditDistance, CountsEachEdit) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("--priority", "--priority"), 0u);
  EXPECT_EQ(edit_distance("--priorty", "--priority"), 1u);   // a deletion
  EXPECT_EQ(edit_distance("--priorrity", "--priority"), 1u); // an insertion
  EXPECT_EQ(edit_distance("--priorizy", "--priority"), 1u);  // a substitution
  EXPECT_EQ(edit_distance("--wiat", "--wait"), 1u);          // a swap of neighbours
  EXPECT_EQ(edit_distance("--qeueu", "--queue"), 2u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("--zz", "--db"), 2u);
  EXPECT_EQ(edit_distance("ca", "abc"), 3u);  // optimal string alignment: no edit of a swapped pair
}

TEST(ClosestName, TheNearestWithinTwo) {
  const std::set<std::string> submit = {"--queue", "--priority", "--max-attempts", "--timeout", "--wait",
                                        "--follow", "--db", "--json"};
  EXPECT_EQ(closest_name("--priorty", submit), "--priority");
  EXPECT_EQ(closest_name("--folow", submit), "--follow");
  EXPECT_EQ(closest_name("--wiat", submit), "--wait");
  EXPECT_EQ(closest_name("-queue", submit), "--queue");
  EXPECT_EQ(closest_name("--max-atempts", submit), "--max-attempts");
  EXPECT_EQ(closest_name("--prio", submit), std::nullopt);     // 4 away
  EXPECT_EQ(closest_name("--zz", submit), std::nullopt);       // 2 from --db, but as long as the name
  EXPECT_EQ(closest_name("--all", submit), std::nullopt);      // 2 from --db: more than half its length
  EXPECT_EQ(closest_name("--jsn", submit), "--json");
  EXPECT_EQ(closest_name("--dv", submit), "--db");             // 1 away: half its length is near enough
  EXPECT_EQ(closest_name("--maxatemts", submit), std::nullopt); // 3 away, though short of half its length
  EXPECT_EQ(closest_name("--status", submit), std::nullopt);
  EXPECT_EQ(closest_name("--queue", submit), std::nullopt);    // no misspelling
  EXPECT_EQ(closest_name("--x", {}), std::nullopt);
  // Of two as near, the first in order.
  EXPECT_EQ(closest_name("--limt", {"--limit", "--lima"}), "--lima");
}
