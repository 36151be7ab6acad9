#pragma once
// What the worker and its step guard read of other processes in /proc.

#include <dirent.h>
#include <sys/types.h>

#include <string>

namespace bgexec::proc {

// The marker of a process (its BGEXEC_JOB_ID, BGEXEC_STEP_ID and
// BGEXEC_ATTEMPT entries joined by NUL; empty when one is missing).
// /proc/PID/environ is its environment as of its exec, so a program that
// cleared it (env -i) has none; nor has one whose environment cannot be read
// (another user's, after a setuid exec), nor a zombie.
std::string marker_of_pid(pid_t pid);

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
