#pragma once
// stdout of the commands that print and exit: the client commands, version,
// the usage and every --help.  A failed write is an exit status, never lost:
// 6 with the reason on stderr, or 141 quietly when the reader has gone.

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <string_view>

namespace bgexec::core {

// Exit statuses of a failed write (`bgexec --help` lists them): stdout could
// not be written (a full disk, a closed terminal); its reader is gone
// (EPIPE), 128 + SIGPIPE as a shell reports a process the signal killed.
inline constexpr int exit_output_error = 6;
inline constexpr int exit_output_closed = 141;

// A buffer written to fd 1 that keeps the errno of its first failed write.
// stdio's buffer drops its data and forgets why on the failure, and nothing
// looked: `bgexec jobs > /dev/full` exited 0, and `bgexec tail ID | head -1`
// followed a closed pipe until the job ended (SIGPIPE is ignored: main).
// After a failure every write is a no-op (the stream is bad).
class OutBuf : public std::streambuf {
 public:
  OutBuf() { setp(buf_, buf_ + sizeof buf_); }
  int error() const { return err_; }

 protected:
  int_type overflow(int_type c) override;
  int sync() override;

 private:
  char buf_[8192];
  int err_ = 0;
};

// stdout could not be written: err is the errno (EPIPE: the reader is
// gone); submitted, the job a submit had queued, whose id was lost.
struct OutputError : std::runtime_error {
  int err;
  std::optional<std::int64_t> submitted;
  explicit OutputError(int e);
};

// Flushes std::cout; throws OutputError when a write to it failed, now or
// before (its buffer an OutBuf, else the error is EIO).  Called where a
// command's output, or a part a reader waits for, is complete.
void check_output();

// The exit status for a failed write by `who` ("bgexec jobs"), its message
// on stderr first (`bgexec jobs: cannot write output: No space left on
// device`, and `(job 17 was submitted)` when a submitted id was lost);
// nothing for a closed pipe, which is no error (`| head -1`).
int output_failed(const std::string& who, const OutputError& e);

// Prints `text` on stdout (through an OutBuf, std::cout's own buffer back
// after) and returns `code`, or output_failed's status when it could not be
// written whole.  For the commands that print one text and exit: version,
// the usage and every --help.
int print(const std::string& who, std::string_view text, int code = 0);

}  // namespace bgexec::core
