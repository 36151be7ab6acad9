#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
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
    flush_log();  // the writer thread's queue, into the file
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

// Bounded in bytes: a line that would pass the bound is dropped and
// counted; the kept lines come out in order.
TEST(LineQueue, BoundedDropsAndCounts) {
  LineQueue q(100);
  const std::string a(40, 'a'), b(40, 'b'), c(40, 'c');
  EXPECT_TRUE(q.push(a));
  EXPECT_TRUE(q.push(b));
  EXPECT_FALSE(q.push(c));
  EXPECT_FALSE(q.push(c));
  EXPECT_EQ(q.dropped(), 2u);
  std::deque<std::string> out;
  q.take(&out);
  EXPECT_EQ(out, (std::deque<std::string>{a, b}));
  // Taken but not yet written: still counts against the bound (a writer
  // stuck in write(2) holds its batch).
  EXPECT_FALSE(q.push(c));
  EXPECT_EQ(q.dropped(), 3u);
}

// Once the batch is written, the warn line with the count comes next,
// before any later line: the gap is where the lines were lost.
TEST(LineQueue, DropNoticeKeepsItsPlace) {
  LineQueue q(1000);  // room for the notice (it counts too) and d
  const std::string a(600, 'a'), b(600, 'b'), d(10, 'd');
  ASSERT_TRUE(q.push(a));
  ASSERT_FALSE(q.push(b));
  std::deque<std::string> out;
  q.take(&out);
  ASSERT_EQ(out.size(), 1u);
  q.written(a.size());
  EXPECT_EQ(q.dropped(), 0u);
  ASSERT_TRUE(q.push(d));
  out.clear();
  q.take(&out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NE(out[0].find("level=warn msg=\"log lines dropped: stderr was not being read\" dropped=1\n"),
            std::string::npos)
      << out[0];
  EXPECT_EQ(out[1], d);
}

// A line accepted after drops, before the writer is back, is preceded by
// the notice too.
TEST(LineQueue, NoticeBeforeTheFirstLineKeptAfterDrops) {
  LineQueue q(100);
  ASSERT_TRUE(q.push(std::string(90, 'a')));
  ASSERT_FALSE(q.push(std::string(20, 'b')));
  ASSERT_TRUE(q.push(std::string(5, 'c')));
  std::deque<std::string> out;
  q.take(&out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], std::string(90, 'a'));
  EXPECT_NE(out[1].find("dropped=1\n"), std::string::npos) << out[1];
  EXPECT_EQ(out[2], std::string(5, 'c'));
}

// A line longer than the bound is kept when nothing else is queued.
TEST(LineQueue, OversizedLineAloneIsKept) {
  LineQueue q(10);
  EXPECT_TRUE(q.push(std::string(50, 'x')));
  EXPECT_EQ(q.dropped(), 0u);
}

// wait_idle() waits for the taken batch to be written, and gives up after
// its bound.
TEST(LineQueue, WaitIdleIsBounded) {
  using namespace std::chrono_literals;
  LineQueue q(100);
  EXPECT_TRUE(q.wait_idle(0ms));
  ASSERT_TRUE(q.push("x\n"));
  std::deque<std::string> out;
  q.take(&out);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(q.wait_idle(50ms));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  q.written(2);
  EXPECT_TRUE(q.wait_idle(0ms));
}

// log() into a pipe nobody reads returns at once (it blocked in write(2)
// before, under a lock every logging thread waited on); the lines past the
// queue's 4 MiB are dropped, and once the pipe is read again the kept lines
// come out in order, followed by the warn line with the count.
TEST(Logfmt, LogDoesNotBlockOnAReaderThatStopped) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  std::fflush(stderr);
  flush_log();
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(p[1], STDERR_FILENO);
  ::close(p[1]);
  constexpr int n = 120000;  // ~57 bytes each: 6.8 MB, past the 4 MiB
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) log("info", "filler", {{"i", std::to_string(i)}});
  const auto took = std::chrono::steady_clock::now() - t0;
  // Now read, until the notice has come.
  std::string text;
  char buf[65536];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::size_t searched = 0;  // the text before it holds no notice
  while (text.find("log lines dropped", searched) == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    searched = text.size() > 64 ? text.size() - 64 : 0;
    pollfd pfd{p[0], POLLIN, 0};
    if (::poll(&pfd, 1, 200) <= 0) continue;
    const ssize_t r = ::read(p[0], buf, sizeof buf);
    if (r <= 0) break;
    text.append(buf, static_cast<std::size_t>(r));
  }
  flush_log();
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(p[0]);
  EXPECT_LT(took, std::chrono::seconds(10));
  const std::size_t at = text.find("msg=\"log lines dropped: stderr was not being read\" dropped=");
  ASSERT_NE(at, std::string::npos) << text.size();
  const long dropped = std::strtol(text.c_str() + text.find("dropped=", at) + 8, nullptr, 10);
  // In order, no line lost without being counted.
  long kept = 0, last = -1;
  bool ordered = true;
  for (std::size_t pos = text.find(" i="); pos != std::string::npos; pos = text.find(" i=", pos + 1)) {
    const long i = std::strtol(text.c_str() + pos + 3, nullptr, 10);
    if (i <= last) ordered = false;
    last = i;
    ++kept;
  }
  EXPECT_TRUE(ordered);
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(kept + dropped, n);
}

// The worker's retry line in an outage: one per session and SQLSTATE per
// period, the first at once, with the calls waiting and the lines held
// back; the session's recovery said once, and the next outage's first line
// written at once.  (Each job in flight wrote its own every 5 s.)
TEST(RetryLog, OneLinePerSessionAndSqlstatePerPeriod) {
  using namespace std::chrono_literals;
  RetryLog r(10s);
  const std::chrono::steady_clock::time_point t0{};
  EXPECT_FALSE(r.any_down());
  EXPECT_EQ(r.recovered("finish"), 0u);  // nothing written: nothing to say
  for (int i = 0; i < 8; ++i) r.waiting("finish", 1);
  auto first = r.failed("finish", "08006", t0);
  EXPECT_TRUE(first.write);
  EXPECT_EQ(first.waiting, 8u);
  EXPECT_EQ(first.held_back, 0u);
  EXPECT_TRUE(r.any_down());
  // the other 7 jobs, then each of the 8 again 5 s later: held back
  for (int i = 0; i < 7; ++i) EXPECT_FALSE(r.failed("finish", "08006", t0 + 1ms * i).write);
  for (int i = 0; i < 8; ++i) EXPECT_FALSE(r.failed("finish", "08006", t0 + 5s).write);
  // another SQLSTATE, another session: lines of their own
  EXPECT_TRUE(r.failed("finish", "53300", t0 + 6s).write);
  EXPECT_TRUE(r.failed("control", "08006", t0 + 6s).write);
  auto next = r.failed("finish", "08006", t0 + 10s);
  EXPECT_TRUE(next.write);
  EXPECT_EQ(next.held_back, 15u);
  for (int i = 0; i < 8; ++i) r.waiting("finish", -1);
  EXPECT_EQ(r.recovered("finish"), 18u);  // 08006: 17, 53300: 1
  EXPECT_EQ(r.recovered("finish"), 0u);   // once
  EXPECT_TRUE(r.any_down());              // control still down
  EXPECT_EQ(r.recovered("control"), 1u);
  EXPECT_FALSE(r.any_down());
  // a later outage: its first line at once, whatever the period
  auto again = r.failed("finish", "08006", t0 + 11s);
  EXPECT_TRUE(again.write);
  EXPECT_EQ(again.waiting, 0u);
  EXPECT_EQ(again.held_back, 0u);
}

// The drop notice is never below --log-level: the lines it reports passed
// it.  Under --log-level error it says level=error (it said warn, a level
// the operator had turned off); under any other, warn.
TEST_F(LogLevelTest, DropNoticeNeverBelowTheLevel) {
  EXPECT_NE(dropped_line(3).find("level=warn msg=\"log lines dropped"), std::string::npos);
  ASSERT_TRUE(set_level("error"));
  LineQueue q(100);
  ASSERT_TRUE(q.push(std::string(90, 'a')));
  ASSERT_FALSE(q.push(std::string(20, 'b')));
  ASSERT_TRUE(q.push(std::string(5, 'c')));
  std::deque<std::string> out;
  q.take(&out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_NE(out[1].find("level=error msg=\"log lines dropped: stderr was not being read\" dropped=1\n"),
            std::string::npos)
      << out[1];
  ASSERT_TRUE(set_level("debug"));
  EXPECT_NE(dropped_line(1).find("level=warn "), std::string::npos);
}

}  // namespace
}  // namespace bgexec::core
