#include <gtest/gtest.h>

#include "core/claim_gate.hpp"

namespace bgexec::core {
namespace {

using Change = ClaimGate::Change;

TEST(ClaimGate, OpenUntilAConnectionFails) {
  ClaimGate g;
  EXPECT_TRUE(g.open());
  EXPECT_EQ(g.up("finish"), Change::none);  // a success while open changes nothing
  EXPECT_TRUE(g.open());
  EXPECT_EQ(g.down("finish", "finish: connect: too many connections for role"), Change::unavailable);
  EXPECT_FALSE(g.open());
  EXPECT_TRUE(g.is_down("finish"));
  EXPECT_FALSE(g.is_down("heartbeat"));
}

// The worker logs once a stretch: retries that fail again change nothing.
TEST(ClaimGate, RepeatedFailuresAreOneChange) {
  ClaimGate g;
  EXPECT_EQ(g.down("heartbeat", "a"), Change::unavailable);
  EXPECT_EQ(g.down("heartbeat", "b"), Change::none);
  EXPECT_EQ(g.down("heartbeat", "c"), Change::none);
  EXPECT_EQ(g.up("heartbeat"), Change::reopened);
  EXPECT_TRUE(g.open());
  EXPECT_EQ(g.up("heartbeat"), Change::none);
  // A new stretch is logged again.
  EXPECT_EQ(g.down("heartbeat", "d"), Change::unavailable);
}

// Claims resume only once every connection the jobs report back on works.
TEST(ClaimGate, ReopensWhenTheLastConnectionWorks) {
  ClaimGate g;
  EXPECT_EQ(g.down("finish", "x"), Change::unavailable);
  EXPECT_EQ(g.down("heartbeat", "y"), Change::unavailable);  // each connection is said once
  EXPECT_EQ(g.up("finish"), Change::none);
  EXPECT_FALSE(g.open());
  EXPECT_EQ(g.up("finish"), Change::none);
  EXPECT_EQ(g.up("heartbeat"), Change::reopened);
  EXPECT_TRUE(g.open());
}

}  // namespace
}  // namespace bgexec::core
