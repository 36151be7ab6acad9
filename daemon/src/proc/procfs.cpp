// What the worker and its step guard read in /proc (see procfs.hpp).
#include "proc/procfs.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
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
  int ppid = 0, pgrp = 0, session = 0;
  unsigned long long start = 0;
  // state ppid pgrp session, fifteen fields (tty_nr … itrealvalue), starttime
  if (paren == std::string::npos ||
      std::sscanf(text.c_str() + paren + 1,
                  " %c %d %d %d %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu", &out.state,
                  &ppid, &pgrp, &session, &start) != 5)
    return false;
  out.ppid = ppid;
  out.pgrp = pgrp;
  out.session = session;
  out.start = start;
  return true;
}

bool listed_children(std::vector<pid_t>& out) {
  static const bool listed =
      ::access(("/proc/self/task/" + std::to_string(::getpid()) + "/children").c_str(), R_OK) == 0;
  if (!listed) return false;
  std::string text;
  for_each_pid_entry("/proc/self/task", [&](const char* tid) {
    if (!read_proc(std::string("/proc/self/task/") + tid + "/children", text)) return;
    const char* p = text.c_str();
    for (char* end;; p = end) {
      long pid = std::strtol(p, &end, 10);
      if (end == p) break;
      out.push_back(static_cast<pid_t>(pid));
    }
  });
  return true;
}

std::vector<pid_t> children_by_stat(pid_t parent) {
  std::vector<pid_t> kids;
  for_each_pid_entry("/proc", [&](const char* name) {
    pid_t pid = static_cast<pid_t>(std::atoi(name));
    if (ProcStat st; proc_stat(pid, st) && st.ppid == parent) kids.push_back(pid);
  });
  return kids;
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
