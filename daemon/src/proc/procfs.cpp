// What the worker and its step guard read in /proc (see procfs.hpp).
#include "proc/procfs.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <vector>

namespace bgexec::proc {

bool read_proc(const std::string& path, std::string& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out.clear();
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) != 0) {
    if (n > 0) out.append(buf, static_cast<std::size_t>(n));
    else if (errno != EINTR) break;
  }
  ::close(fd);
  return n == 0;
}

bool proc_stat(pid_t pid, ProcStat& out) {
  std::string text;
  if (!read_proc("/proc/" + std::to_string(pid) + "/stat", text)) return false;
  std::size_t paren = text.rfind(')');
  int ppid = 0, pgrp = 0;
  if (paren == std::string::npos ||
      std::sscanf(text.c_str() + paren + 1, " %c %d %d", &out.state, &ppid, &pgrp) != 3)
    return false;
  out.ppid = ppid;
  out.pgrp = pgrp;
  return true;
}

std::string marker_of_pid(pid_t pid) {
  std::string env;
  if (!read_proc("/proc/" + std::to_string(pid) + "/environ", env)) return {};
  std::vector<std::string_view> entries;
  for (std::size_t at = 0; at < env.size();) {
    std::size_t end = std::min(env.find('\0', at), env.size());
    entries.emplace_back(env.data() + at, end - at);
    at = end + 1;
  }
  return marker_of(entries);
}

}  // namespace bgexec::proc
