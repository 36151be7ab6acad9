#include "core/backoff.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <set>

using bgexec::core::Backoff;
using std::chrono::milliseconds;

TEST(Backoff, DoublesUpToItsCapAndStartsAgainOnReset) {
  Backoff b(milliseconds(100), milliseconds(500));
  EXPECT_EQ(b.seconds(), "0.100000");
  EXPECT_EQ(b.next(), milliseconds(100));
  EXPECT_EQ(b.next(), milliseconds(200));
  EXPECT_EQ(b.seconds(), "0.400000");
  EXPECT_EQ(b.next(), milliseconds(400));
  EXPECT_EQ(b.next(), milliseconds(500));
  EXPECT_EQ(b.next(), milliseconds(500));
  b.reset();
  EXPECT_EQ(b.next(), milliseconds(100));
}

TEST(Backoff, ACapBelowTheFirstWaitIsTheFirstWait) {
  Backoff b(milliseconds(300), milliseconds(100));
  EXPECT_EQ(b.next(), milliseconds(300));
  EXPECT_EQ(b.next(), milliseconds(300));
}

// A fleet that lost its server together must not retry together: each wait
// is drawn within +-25% of the nominal one, and they differ.
TEST(Backoff, JitterKeepsEachWaitWithinItsBoundsAndSpreadsThem) {
  for (int run = 0; run < 200; ++run) {
    Backoff b(milliseconds(100), milliseconds(800), 0.25);
    for (auto nominal : {100, 200, 400, 800, 800}) {
      auto w = b.next();
      EXPECT_GE(w, milliseconds(nominal * 3 / 4)) << "nominal " << nominal;
      EXPECT_LE(w, milliseconds(nominal * 5 / 4)) << "nominal " << nominal;
    }
  }
  std::set<long long> seen;
  for (int i = 0; i < 50; ++i) seen.insert(Backoff(milliseconds(1000), milliseconds(1000), 0.25).next().count());
  EXPECT_GT(seen.size(), 10u);
  // The log line names the nominal wait.
  Backoff b(milliseconds(100), milliseconds(500), 0.25);
  b.next();
  EXPECT_EQ(b.seconds(), "0.200000");
}
