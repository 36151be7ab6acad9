#pragma once

#include <cstddef>

namespace bgexec::core {

// Raises the soft limit on open descriptors to the hard one (systemd's soft
// default is 1024, a login shell's often 1024 too), at most 2^20; returns
// the soft limit in force, 0 when it cannot be read.  Every connection,
// step process pipe and sql step session holds descriptors.
std::size_t raise_nofile();

// Descriptors the worker may hold at once: its own (connections, the
// event loop's, the process guard's, stdio: own_files), one per sql step
// session, three per step process (its stdin, stdout and stderr pipes; a
// spawn holds the child's three ends too, one spawn at a time: the slack).
// The --concurrency slots hold none of their own: their steps do.
constexpr std::size_t own_files = 64;
constexpr std::size_t files_per_process = 3;
std::size_t files_wanted(int sql_steps, int step_processes);

// --step-processes left unset: as many as the open-file limit (nofile, 0
// when unknown) holds beside own_files and the sql step sessions, 1 to
// 1024.  A workflow of 600 parallel action steps at a limit of 1024 failed
// its steps with EMFILE: steps past the cap wait instead.
int default_step_processes(std::size_t nofile, int sql_steps);

}  // namespace bgexec::core
