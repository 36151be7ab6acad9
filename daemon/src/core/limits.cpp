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

std::size_t files_wanted(int sql_steps, int step_processes) {
  return own_files + static_cast<std::size_t>(std::max(sql_steps, 0)) +
         files_per_process * (static_cast<std::size_t>(std::max(step_processes, 0)) + 1);
}

int default_step_processes(std::size_t nofile, int sql_steps) {
  constexpr std::size_t most = 1024;
  if (nofile == 0) return static_cast<int>(most);
  const std::size_t fixed = files_wanted(sql_steps, 0);
  const std::size_t fits = nofile > fixed ? (nofile - fixed) / files_per_process : 0;
  return static_cast<int>(std::clamp<std::size_t>(fits, 1, most));
}

}  // namespace bgexec::core
