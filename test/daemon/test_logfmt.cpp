#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "core/logfmt.hpp"

namespace bgexec::core {
namespace {

// 2026-11-29T09:00:00.123Z
std::chrono::system_clock::time_point fixed_ts() {
  return std::chrono::system_clock::time_point{std::chrono::milliseconds{1795942800123LL}};
}

// Restores the default level after each test that changes it.
class LogLevelTest : public ::testing::Test {
 protected:
  void TearDown() override { set_level("info"); }
};

// Redirects fd 2 into a temp file for the lifetime of the object.
class StderrCapture {
 public:
  StderrCapture() : file_(std::tmpfile()), saved_(::dup(STDERR_FILENO)) {
    std::fflush(stderr);
    ::dup2(::fileno(file_), STDERR_FILENO);
  }
  ~StderrCapture() {
    restore();
    std::fclose(file_);
  }
  // Stops capturing and returns everything written to fd 2.
  std::string text() {
    restore();
    std::string out;
    std::rewind(file_);
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, file_)) > 0) out.append(buf, n);
    return out;
  }

 private:
  void restore() {
    if (saved_ >= 0) {
      ::dup2(saved_, STDERR_FILENO);
      ::close(saved_);
      saved_ = -1;
    }
  }
  std::FILE* file_;
  int saved_;
};

TEST(Logfmt, ExactLine) {
  EXPECT_EQ(format_line(fixed_ts(), "info", "claimed jobs", {{"n", "3"}}),
            "ts=2026-11-29T09:00:00.123Z level=info msg=\"claimed jobs\" n=3\n");
}

TEST(Logfmt, MillisecondsZeroPadded) {
  const auto ts = std::chrono::system_clock::time_point{std::chrono::milliseconds{1795942800007LL}};
  EXPECT_EQ(format_line(ts, "warn", "x"), "ts=2026-11-29T09:00:00.007Z level=warn msg=x\n");
}

TEST(Logfmt, QuotesAndEscapes) {
  const std::string line = format_line(fixed_ts(), "error", "bad", {
      {"empty", ""},
      {"eq", "a=b"},
      {"quote", "say \"hi\""},
      {"nl", "two\nlines"},
      {"plain", "job-42"},
      {"bs", "C:\\dir"},
  });
  EXPECT_NE(line.find(" empty=\"\""), std::string::npos) << line;
  EXPECT_NE(line.find(" eq=\"a=b\""), std::string::npos) << line;
  EXPECT_NE(line.find(" quote=\"say \\\"hi\\\"\""), std::string::npos) << line;
  EXPECT_NE(line.find(" nl=\"two\\nlines\""), std::string::npos) << line;
  EXPECT_NE(line.find(" plain=job-42"), std::string::npos) << line;
  EXPECT_NE(line.find(" bs=\"C:\\\\dir\""), std::string::npos) << line;
  // Exactly one newline: the terminator.
  EXPECT_EQ(line.find('\n'), line.size() - 1);
}

TEST(Logfmt, ValueHelper) {
  EXPECT_EQ(logfmt_value("abc"), "abc");
  EXPECT_EQ(logfmt_value(""), "\"\"");
  EXPECT_EQ(logfmt_value("a b"), "\"a b\"");
  EXPECT_EQ(logfmt_value("tab\there"), "\"tab\\there\"");
  EXPECT_EQ(logfmt_value(std::string("\x01", 1)), "\"\\x01\"");
  // C1 controls (U+009B is CSI to some terminals) as \u escapes, quoted;
  // U+00A0 and é are text
  EXPECT_EQ(logfmt_value("\xC2\x9B" "31m"), "\"\\u009b31m\"");
  EXPECT_EQ(logfmt_value("a\xC2\x80" "b\xC2\x9F"), "\"a\\u0080b\\u009f\"");
  EXPECT_EQ(logfmt_value("nbsp\xC2\xA0\xC3\xA9"), "nbsp\xC2\xA0\xC3\xA9");
}

TEST(Logfmt, FieldsKeepOrder) {
  const std::string line = format_line(fixed_ts(), "info", "m", {{"b", "1"}, {"a", "2"}});
  EXPECT_LT(line.find(" b=1"), line.find(" a=2"));
}

TEST(Logfmt, CurrentTimeStamp) {
  const std::string line = format_line("info", "hello");
  EXPECT_TRUE(std::regex_match(
      line, std::regex(R"(ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=info msg=hello\n)")))
      << line;
}

TEST_F(LogLevelTest, Levels) {
  EXPECT_TRUE(level_enabled("info"));
  EXPECT_FALSE(level_enabled("debug"));
  EXPECT_TRUE(set_level("error"));
  EXPECT_FALSE(level_enabled("warn"));
  EXPECT_TRUE(level_enabled("error"));
  EXPECT_TRUE(level_enabled("custom"));  // unknown levels always pass
  EXPECT_TRUE(set_level("debug"));
  EXPECT_TRUE(level_enabled("debug"));
  EXPECT_FALSE(set_level("loud"));
  EXPECT_TRUE(level_enabled("debug"));  // unchanged by the bad name
  EXPECT_TRUE(set_level("warning"));
  EXPECT_FALSE(level_enabled("info"));
}

TEST_F(LogLevelTest, LogWritesToStderrAndFilters) {
  StderrCapture cap;
  set_level("warn");
  log("info", "hidden");
  log("warn", "shown line", {{"job_id", "7"}});
  const std::string out = cap.text();
  EXPECT_EQ(out.find("hidden"), std::string::npos) << out;
  EXPECT_NE(out.find("level=warn msg=\"shown line\" job_id=7\n"), std::string::npos) << out;
}

TEST_F(LogLevelTest, ConcurrentLinesDoNotInterleave) {
  StderrCapture cap;
  constexpr int threads = 4;
  constexpr int per_thread = 200;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([t] {
      const std::string payload(200, static_cast<char>('a' + t));
      for (int i = 0; i < per_thread; ++i) log("info", "line", {{"p", payload}});
    });
  }
  for (auto& th : pool) th.join();
  const std::string out = cap.text();
  const std::regex line_re(R"(ts=\S+ level=info msg=line p=([a-d])\1{199})");
  std::size_t start = 0;
  int lines = 0;
  while (start < out.size()) {
    const std::size_t nl = out.find('\n', start);
    ASSERT_NE(nl, std::string::npos);
    const std::string line = out.substr(start, nl - start);
    EXPECT_TRUE(std::regex_match(line, line_re)) << line;
    ++lines;
    start = nl + 1;
  }
  EXPECT_EQ(lines, threads * per_thread);
}

// The first line is written, the rest within the period counted, and the
// next line written carries the count.
TEST(LogThrottle, OneLinePerPeriodWithTheCount) {
  using namespace std::chrono_literals;
  LogThrottle t(10s);
  const std::chrono::steady_clock::time_point t0{};
  std::size_t skipped = 99;
  EXPECT_TRUE(t.allow(t0 + 1s, &skipped));
  EXPECT_EQ(skipped, 0u);
  for (int i = 0; i < 500; ++i) EXPECT_FALSE(t.allow(t0 + 2s + i * 1ms, &skipped));
  EXPECT_FALSE(t.allow(t0 + 10s, &skipped));
  EXPECT_TRUE(t.allow(t0 + 11s, &skipped));
  EXPECT_EQ(skipped, 501u);
  EXPECT_TRUE(t.allow(t0 + 60s, &skipped));
  EXPECT_EQ(skipped, 0u);
}

// From a mutation test of logfmt.cpp: cases no test above told apart.

// Every control character is quoted and escaped, 0x1f and DEL (0x7f)
// included, even with nothing else in the value to quote.
TEST(Logfmt, LastControlCharacterAndDelAreEscaped) {
  EXPECT_EQ(logfmt_value("a\x1f"), "\"a\\x1f\"");
  EXPECT_EQ(logfmt_value("a\x7f"), "\"a\\x7f\"");
  EXPECT_EQ(logfmt_value("a~"), "a~");
}

// A time before 1970 has its milliseconds counted forward from the second
// before: 1 ms before the epoch is 23:59:59.999 of the day before.
TEST(Logfmt, TimeBeforeTheEpoch) {
  const auto ts = std::chrono::system_clock::time_point{std::chrono::milliseconds{-1}};
  EXPECT_EQ(format_line(ts, "info", "x"), "ts=1969-12-31T23:59:59.999Z level=info msg=x\n");
}

}  // namespace
}  // namespace bgexec::core
