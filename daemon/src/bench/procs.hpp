#pragma once
// Child processes of the benchmark: `bgexec worker` processes (the same
// binary) and pgbench.  Every child is tracked by pid and stopped by pid.

#include <sys/types.h>

#include <string>
#include <vector>

namespace bgexec::bench {

// Path of the running binary (/proc/self/exe resolved).
std::string self_exe();

// Starts argv[0] with argv, the current environment plus `extra_env`
// ("NAME=value"), stdout/stderr appended to `log_path` ("" = /dev/null).
// Returns the pid; throws std::runtime_error when the spawn fails.
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
            const std::string& log_path);

// Runs argv to completion and returns its stdout (stderr is appended to it);
// `exit_code` receives the exit status (-1 when killed by a signal).
std::string run_capture(const std::vector<std::string>& argv, int& exit_code);

// SIGTERM to each pid, waits up to `grace_s`, then SIGKILL; reaps all.
// Returns the CPU time (user + system, seconds) the reaped processes used.
double stop_pids(const std::vector<pid_t>& pids, double grace_s = 10);

// Resident set size of a process in KiB (VmRSS), -1 when unknown.
long rss_kib(pid_t pid);

// Memory of pid no other process shares (Private_Clean + Private_Dirty of
// /proc/PID/smaps_rollup), KiB; -1 when it cannot be read.
long private_kib(pid_t pid);

// The step guard a worker started (its child `bgexec __guard …`); 0 if none.
pid_t guard_of(pid_t worker);

// CPU time (user + system, seconds) a process of this host has used so far,
// from /proc/PID/stat; -1 when there is no such process or its command name
// is not `comm` (so a pid of another host's server never reads as ours).
double cpu_seconds(pid_t pid, const std::string& comm);

// This host's CPU time in jiffies since boot, all cores (/proc/stat): busy
// (user, nice, system, irq, softirq, steal) and total (busy, idle, iowait).
struct HostCpu {
  unsigned long long busy = 0, total = 0;
};
HostCpu host_cpu();

// Registers pids killed (SIGKILL) if the bench is interrupted (SIGINT/SIGTERM).
void track(pid_t pid);
void untrack(pid_t pid);
void install_interrupt_handler();

}  // namespace bgexec::bench
