#include "read_capped.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <new>

namespace bgexec::core {

CappedRead read_capped(int fd, std::size_t max, bool regular_only) {
  CappedRead r;
  using Status = CappedRead::Status;
  try {
    struct stat st {};
    const bool is_regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    if (regular_only && !is_regular) {
      r.status = Status::not_regular;
      return r;
    }
    if (is_regular) {
      if (static_cast<std::uintmax_t>(st.st_size) > max) {
        r.status = Status::too_large;
        return r;
      }
      r.text.reserve(static_cast<std::size_t>(st.st_size));
    }
    char chunk[65536];
    for (;;) {
      const ssize_t n = ::read(fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      // a read that failed part way (EIO) is that failure, not what was read before it
      if (n < 0) {
        r.status = Status::failed;
        r.error = errno;
        return r;
      }
      if (n == 0) break;
      if (static_cast<std::size_t>(n) > max - r.text.size()) {
        r.status = Status::too_large;
        return r;
      }
      r.text.append(chunk, static_cast<std::size_t>(n));
    }
  } catch (const std::bad_alloc&) {
    r.status = Status::out_of_memory;
  }
  return r;
}

}  // namespace bgexec::core
