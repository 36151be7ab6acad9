#include "core/backoff.hpp"

#include <gtest/gtest.h>

#include <chrono>

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
