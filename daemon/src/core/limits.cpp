#include "limits.hpp"

#include <sys/resource.h>

#include <algorithm>

namespace bgexec::core {

std::size_t raise_nofile() {
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) != 0) return 0;
  if (nofile.rlim_cur < nofile.rlim_max) {
    rlimit raised = nofile;
    raised.rlim_cur = std::min<rlim_t>(nofile.rlim_max, 1 << 20);
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) nofile = raised;
  }
  return nofile.rlim_cur == RLIM_INFINITY ? std::size_t{1} << 20 : static_cast<std::size_t>(nofile.rlim_cur);
}

}  // namespace bgexec::core
