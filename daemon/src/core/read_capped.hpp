#pragma once

#include <cstddef>
#include <string>

namespace bgexec::core {

// The whole of an open descriptor, read in chunks up to `max` bytes (a
// regular file's size checked before reading).  An unbounded read (ss <<
// rdbuf()) of /dev/zero or /dev/urandom grew until the kernel killed the
// process.  With regular_only, anything but a regular file is not read (a
// FIFO would wait for a writer).  Never throws.
struct CappedRead {
  enum class Status { ok, not_regular, too_large, failed, out_of_memory };
  Status status = Status::ok;
  std::string text;
  int error = 0;  // errno, when failed
};
CappedRead read_capped(int fd, std::size_t max, bool regular_only = false);

}  // namespace bgexec::core
