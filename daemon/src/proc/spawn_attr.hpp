#pragma once
// The posix_spawn attributes of the processes the worker starts (steps, its
// step guard): no signal blocked, every signal back to its default action
// (but `keep`, which stays as the worker has it), in a process group of its
// own.

#include <signal.h>
#include <spawn.h>

namespace bgexec::proc {

struct SpawnAttr {
  posix_spawnattr_t attr;
  explicit SpawnAttr(int keep = 0) {
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    if (keep) sigdelset(&all, keep);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  ~SpawnAttr() { posix_spawnattr_destroy(&attr); }
  SpawnAttr(const SpawnAttr&) = delete;
  SpawnAttr& operator=(const SpawnAttr&) = delete;
};

}  // namespace bgexec::proc
