#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>

#include "core/duration.hpp"
#include "core/timestamp.hpp"

namespace bgexec::core {
namespace {

std::string text(const char* s) {
  auto t = parse_iso_time(s);
  return t ? iso_text(*t) : "none";
}

TEST(ParseIsoTime, Rfc3339Forms) {
  EXPECT_EQ(text("2026-12-08T03:00:00Z"), "2026-12-08T03:00:00+00:00");
  EXPECT_EQ(text("2026-12-08t03:00:00z"), "2026-12-08T03:00:00+00:00");
  EXPECT_EQ(text("2026-12-08 03:00:00.123456+05:30"), "2026-12-08T03:00:00.123456+05:30");
  EXPECT_EQ(text("2026-12-08T03:00-08:00"), "2026-12-08T03:00:00-08:00");
  EXPECT_EQ(text("2026-12-08T03:00:00+0530"), "2026-12-08T03:00:00+05:30");
  EXPECT_EQ(text("2026-12-08T03:00:00-03"), "2026-12-08T03:00:00-03:00");
  EXPECT_EQ(text("2028-02-29T23:59:59Z"), "2028-02-29T23:59:59+00:00");
}

TEST(ParseIsoTime, OffsetIsOptionalButReported) {
  auto t = parse_iso_time("2026-12-08T03:00");
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->offset_minutes);
  EXPECT_EQ(parse_iso_time("2026-12-08T03:00-01:30")->offset_minutes, -90);
}

// What the server took by DateStyle and TimeZone, and its special words.
TEST(ParseIsoTime, RefusesLocaleFormsAndWords) {
  for (const char* s : {"08/12/2026 03:00", "12/08/2026", "2026-12-08", "08.12.2026 03:00", "now", "epoch",
                        "tomorrow", "infinity", "-infinity", "Dec 8 2026 03:00", "2026-12-08 03:00 EST",
                        "2026-12-08 03:00 Asia/Tokyo", "20261208T030000Z", "", " 2026-12-08T03:00Z",
                        "2026-12-08T03:00Z ", "2026-12-08T03:00:00.Z", "2026-12-08T3:00Z", "26-12-08T03:00Z",
                        "2026-12-08T03:00:00+25:00", "2026-12-08T03:00:00+05:60", "2026-12-08T03:00:00+5",
                        "2026-12-08T03:00+05:30:00", "2026-12-08T03:00 BC"})
    EXPECT_FALSE(parse_iso_time(s)) << s;
}

TEST(ParseIsoTime, RefusesOutOfRangeFields) {
  for (const char* s : {"2026-13-01T00:00Z", "2026-00-01T00:00Z", "2026-02-29T00:00Z", "2026-04-31T00:00Z",
                        "2100-02-29T00:00Z", "2026-12-00T00:00Z", "2026-12-08T24:00Z", "2026-12-08T23:60Z",
                        "2026-12-08T23:59:60Z", "0000-01-01T00:00Z"})
    EXPECT_FALSE(parse_iso_time(s)) << s;
}

// TZ set for one test, restored after.
struct ScopedTz {
  std::optional<std::string> old;
  explicit ScopedTz(const char* tz) {
    if (const char* o = std::getenv("TZ")) old = o;
    ::setenv("TZ", tz, 1);
    ::tzset();
  }
  ~ScopedTz() {
    if (old) ::setenv("TZ", old->c_str(), 1); else ::unsetenv("TZ");
    ::tzset();
  }
};

std::string local(const char* s) {
  auto r = resolve_local(*parse_iso_time(s));
  return r.time ? iso_text(*r.time) : "error: " + r.error;
}

TEST(ResolveLocal, ReadsInTheProcessTimeZone) {
  {
    ScopedTz tz("America/New_York");
    EXPECT_EQ(local("2026-12-08T03:00"), "2026-12-08T03:00:00-05:00");
    EXPECT_EQ(local("2026-07-08T03:00:00.25"), "2026-07-08T03:00:00.25-04:00");
  }
  {
    ScopedTz tz("Asia/Kolkata");
    EXPECT_EQ(local("2026-12-08T03:00"), "2026-12-08T03:00:00+05:30");
  }
  {
    ScopedTz tz("UTC");
    EXPECT_EQ(local("2026-12-08T03:00"), "2026-12-08T03:00:00+00:00");
  }
}

TEST(ResolveLocal, RefusesDstGapsAndOverlaps) {
  ScopedTz tz("America/New_York");
  EXPECT_NE(local("2026-03-08T02:30").find("does not exist"), std::string::npos);  // spring forward
  EXPECT_NE(local("2026-11-01T01:30").find("ambiguous"), std::string::npos);       // fall back
  EXPECT_EQ(local("2026-11-01T00:59:59"), "2026-11-01T00:59:59-04:00");
  EXPECT_EQ(local("2026-11-01T02:00"), "2026-11-01T02:00:00-05:00");
  EXPECT_EQ(local("2026-03-08T03:00"), "2026-03-08T03:00:00-04:00");
}

TEST(ParseDelay, DaysAreFixedLength) {
  EXPECT_EQ(parse_delay("1d"), 86400.0);
  EXPECT_EQ(parse_delay("1.5d"), 129600.0);
  EXPECT_EQ(parse_delay("2h"), 7200.0);
  EXPECT_EQ(parse_delay("90"), 90.0);
  EXPECT_EQ(parse_delay("500ms"), 0.5);
  for (const char* s : {"", "d", "-1d", "2hd", "1 day", "1dd", "+1d", "1e3d", "abc"}) EXPECT_FALSE(parse_delay(s)) << s;
}

}  // namespace
}  // namespace bgexec::core
