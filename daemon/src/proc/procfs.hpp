#pragma once
// What the worker and its step guard read of processes in /proc, and the
// marker by which a step's processes are known.

#include <dirent.h>
#include <sys/types.h>

#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace bgexec::proc {

// What marks a step's processes: the worker sets these for every step
// (job.cpp, worker_vars), a step's env cannot, and descendants inherit them.
// BGEXEC_WORKER_INSTANCE is a random id of the worker process: without it
// the step guard of a worker killed on a host found the steps of another
// worker there (another database's, whose jobs have the same ids) by the
// same job, step and attempt, and killed them too.  BGEXEC_JOB_ID first
// (guard.cpp, job_of).
inline constexpr std::string_view marker_vars[] = {"BGEXEC_JOB_ID=", "BGEXEC_STEP_ID=", "BGEXEC_ATTEMPT=",
                                                   "BGEXEC_WORKER_INSTANCE="};

// The marker in an environment: its marker_vars entries joined by NUL (no
// entry can hold one), in marker_vars' order; empty when one is missing.
template <class Entries>
std::string marker_of(const Entries& env) {
  std::string_view found[std::size(marker_vars)];
  for (std::string_view e : env)
    for (std::size_t i = 0; i < std::size(marker_vars); ++i)
      if (e.starts_with(marker_vars[i])) found[i] = e;
  std::string marker;
  for (std::string_view f : found) {
    if (f.empty()) return {};
    marker.append(f).push_back('\0');
  }
  return marker;
}

// The marker of a process.  /proc/PID/environ is its environment as of its
// exec, so a program that cleared it (env -i) has none; nor has one whose
// environment cannot be read (another user's, after a setuid exec), nor a
// zombie.
std::string marker_of_pid(pid_t pid);

// A process's state, parent, process group, session and start time, from
// /proc/PID/stat: "pid (comm) state ppid pgrp session … starttime …", where
// comm may hold spaces and parentheses.  False when it is gone (or cannot
// be read).  A pid and its start time name one process: a pid reused by
// another has a later start.
struct ProcStat {
  char state = 0;  // 'Z' for a zombie
  pid_t ppid = 0, pgrp = 0, session = 0;
  unsigned long long start = 0;  // clock ticks after boot
};
bool proc_stat(pid_t pid, ProcStat& out);

// Reads a /proc file whole; false when it cannot be (its process may have
// gone at any moment: ENOENT, ESRCH).
bool read_proc(const std::string& path, std::string& out);

// This process's children as the kernel lists them: each thread's, in
// /proc/self/task/TID/children (an adopted orphan goes to the first live
// thread).  False, and out untouched, on a kernel without those files
// (CONFIG_PROC_CHILDREN off).
bool listed_children(std::vector<pid_t>& out);

// The processes whose parent is `parent`, found by reading every
// /proc/PID/stat: what listed_children falls back on.
std::vector<pid_t> children_by_stat(pid_t parent);

// Calls f with the name of each numeric entry of a /proc directory.
template <class F>
void for_each_pid_entry(const char* dir, F f) {
  DIR* d = ::opendir(dir);
  if (!d) return;
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') f(e->d_name);
  ::closedir(d);
}

}  // namespace bgexec::proc
