// core::read_capped and core::raise_nofile (from a mutation test: neither
// had a unit test).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/limits.hpp"
#include "core/read_capped.hpp"

namespace bgexec::core {
namespace {

using Status = CappedRead::Status;

// A regular file of `size` bytes, removed with the object.
class TempFile {
 public:
  explicit TempFile(std::size_t size) {
    char name[] = "/tmp/bgexec-read-capped-XXXXXX";
    fd_ = ::mkstemp(name);
    if (fd_ < 0) throw std::runtime_error("mkstemp failed");
    path_ = name;
    const std::string text(size, 'x');
    if (::write(fd_, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
      throw std::runtime_error("write failed");
  }
  ~TempFile() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  // A fresh descriptor at the file's start.
  int open() const { return ::open(path_.c_str(), O_RDONLY | O_CLOEXEC); }

 private:
  int fd_;
  std::string path_;
};

CappedRead read_file(const TempFile& f, std::size_t max, bool regular_only = false) {
  const int fd = f.open();
  CappedRead r = read_capped(fd, max, regular_only);
  ::close(fd);
  return r;
}

// A pipe holding `size` bytes and closed for writing (less than a pipe's buffer).
CappedRead read_pipe(std::size_t size, std::size_t max, bool regular_only = false) {
  int p[2];
  if (::pipe(p) != 0) throw std::runtime_error("pipe failed");
  const std::string text(size, 'y');
  if (::write(p[1], text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw std::runtime_error("write failed");
  ::close(p[1]);
  CappedRead r = read_capped(p[0], max, regular_only);
  ::close(p[0]);
  return r;
}

// The cap itself is allowed; a byte past it is not, by the file's size or
// by what a pipe gives.
TEST(ReadCapped, CapIsInclusive) {
  const TempFile exact(100), over(101);
  const CappedRead a = read_file(exact, 100);
  EXPECT_EQ(a.status, Status::ok);
  EXPECT_EQ(a.text, std::string(100, 'x'));
  EXPECT_EQ(read_file(over, 100).status, Status::too_large);
  const CappedRead p = read_pipe(100, 100);
  EXPECT_EQ(p.status, Status::ok);
  EXPECT_EQ(p.text, std::string(100, 'y'));
  EXPECT_EQ(read_pipe(101, 100).status, Status::too_large);
  EXPECT_EQ(read_pipe(0, 0).status, Status::ok);
}

// regular_only refuses a pipe unread, and reads a regular file.
TEST(ReadCapped, RegularOnly) {
  EXPECT_EQ(read_pipe(5, 100, true).status, Status::not_regular);
  EXPECT_EQ(read_pipe(5, 100, true).text, "");
  const TempFile f(5);
  EXPECT_EQ(read_file(f, 100, true).status, Status::ok);
}

// A descriptor that cannot be read is a failure with its errno.
TEST(ReadCapped, ReadErrorIsReported) {
  const int fd = ::open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const CappedRead r = read_capped(fd, 100);
  ::close(fd);
  EXPECT_EQ(r.status, Status::failed);
  EXPECT_EQ(r.error, EISDIR);
}

// The soft limit on descriptors is raised to the hard one, at most 2^20.
TEST(RaiseNofile, RaisesTheSoftLimitToTheHardOne) {
  rlimit before{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &before), 0);
  rlimit low = before;
  low.rlim_cur = std::min<rlim_t>(before.rlim_max, 64);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  const std::size_t expected =
      before.rlim_max == RLIM_INFINITY ? std::size_t{1} << 20 : std::min<std::size_t>(before.rlim_max, 1 << 20);
  EXPECT_EQ(raise_nofile(), expected);
  rlimit after{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &after), 0);
  EXPECT_EQ(after.rlim_cur, before.rlim_max == RLIM_INFINITY ? rlim_t{1} << 20 : std::min<rlim_t>(before.rlim_max, 1 << 20));
  ::setrlimit(RLIMIT_NOFILE, &before);
}

// --step-processes left unset: what the open-file limit holds beside the
// worker's own descriptors and its sql step sessions, three per process, so
// that a fan-out of action steps never meets EMFILE; 1 to 1024.
TEST(Limits, DefaultStepProcessesFitTheLimit) {
  EXPECT_EQ(files_wanted(10, 0), own_files + 10 + files_per_process);
  EXPECT_EQ(files_wanted(10, 5), own_files + 10 + 6 * files_per_process);
  for (std::size_t nofile : {std::size_t{1024}, std::size_t{4096}, std::size_t{200}, std::size_t{100}}) {
    for (int sql : {1, 10, 40}) {
      const int n = default_step_processes(nofile, sql);
      ASSERT_GE(n, 1);
      if (files_wanted(sql, 1) <= nofile) {
        EXPECT_LE(files_wanted(sql, n), nofile) << nofile << " " << sql;
        if (n < 1024) {  // the most that fit
          EXPECT_GT(files_wanted(sql, n + 1), nofile) << nofile << " " << sql;
        }
      }
    }
  }
  // A login shell's 1024, the default 10 sql sessions: (1024 - 64 - 10 - 3) / 3.
  EXPECT_EQ(default_step_processes(1024, 10), 315);
  EXPECT_EQ(default_step_processes(48, 30), 1);         // short of even one: one at a time
  EXPECT_EQ(default_step_processes(1 << 20, 10), 1024);  // at most the flag's most
  EXPECT_EQ(default_step_processes(0, 10), 1024);        // limit unknown
}

}  // namespace
}  // namespace bgexec::core
