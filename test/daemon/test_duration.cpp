#include <gtest/gtest.h>

#include <stdexcept>
#include <limits>

#include "core/duration.hpp"
#include "util/event.hpp"

namespace bgexec::core {
namespace {

TEST(ParseSeconds, BareNumbers) {
  EXPECT_EQ(parse_seconds("30"), 30.0);
  EXPECT_EQ(parse_seconds("1.5"), 1.5);
  EXPECT_EQ(parse_seconds("0"), 0.0);
}

TEST(ParseSeconds, Units) {
  EXPECT_DOUBLE_EQ(*parse_seconds("500ms"), 0.5);
  EXPECT_EQ(parse_seconds("30s"), 30.0);
  EXPECT_EQ(parse_seconds("5m"), 300.0);
  EXPECT_EQ(parse_seconds("2h"), 7200.0);
  EXPECT_EQ(parse_seconds("1.5m"), 90.0);
}

TEST(ParseSeconds, RejectsJunk) {
  EXPECT_FALSE(parse_seconds(""));
  EXPECT_FALSE(parse_seconds("abc"));
  EXPECT_FALSE(parse_seconds("s"));
  EXPECT_FALSE(parse_seconds("-1"));
  EXPECT_FALSE(parse_seconds("10x"));
  EXPECT_FALSE(parse_seconds("10 s"));
  EXPECT_FALSE(parse_seconds("5mm"));
  EXPECT_FALSE(parse_seconds("1e3"));
  EXPECT_FALSE(parse_seconds("nan"));
  EXPECT_FALSE(parse_seconds("inf"));
  EXPECT_FALSE(parse_seconds("3d"));
}

TEST(ToPgInterval, Formats) {
  EXPECT_EQ(to_pg_interval(30), "30 seconds");
  EXPECT_EQ(to_pg_interval(0.5), "0.5 seconds");
  EXPECT_EQ(to_pg_interval(0), "0 seconds");
  EXPECT_EQ(to_pg_interval(1.25), "1.25 seconds");
  EXPECT_EQ(to_pg_interval(0.000001), "0.000001 seconds");
  EXPECT_EQ(to_pg_interval(86400), "86400 seconds");
}

TEST(ToPgInterval, RoundsToMicroseconds) {
  EXPECT_EQ(to_pg_interval(1.0000004), "1 seconds");
  EXPECT_EQ(to_pg_interval(-0.0000001), "0 seconds");
}

TEST(ToPgInterval, RejectsNonFinite) {
  EXPECT_THROW(to_pg_interval(std::numeric_limits<double>::infinity()), std::invalid_argument);
  EXPECT_THROW(to_pg_interval(std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
}

// A deadline's seconds as a steady_clock duration: a timeout past 292
// years overflowed int64 nanoseconds (negative: the job timed out at once).
TEST(Seconds, BoundedNotOverflowed) {
  using namespace std::chrono;
  EXPECT_EQ(bgexec::seconds(1.5), milliseconds(1500));
  const auto year = duration_cast<steady_clock::duration>(duration<double>(365.25 * 86400));
  EXPECT_GT(bgexec::seconds(300.0 * 365.25 * 86400), 199 * year);
  EXPECT_GT(bgexec::seconds(1e300), 199 * year);
  EXPECT_LT(bgexec::seconds(-1e300), -199 * year);
  EXPECT_EQ(bgexec::seconds(std::numeric_limits<double>::quiet_NaN()), steady_clock::duration::zero());
  EXPECT_GT(bgexec::seconds(std::numeric_limits<double>::infinity()), 199 * year);
}

TEST(SecondsText, ShortestForm) {
  EXPECT_EQ(seconds_text(30), "30");
  EXPECT_EQ(seconds_text(0.5), "0.5");
  EXPECT_EQ(seconds_text(1.25), "1.25");
  EXPECT_EQ(seconds_text(0.1), "0.1");
  EXPECT_EQ(seconds_text(86400), "86400");
  EXPECT_EQ(seconds_text(0), "0");
}

}  // namespace
}  // namespace bgexec::core
