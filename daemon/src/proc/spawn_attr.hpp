#pragma once
// The posix_spawn attributes of the processes the worker starts (steps, its
// step guard): no signal blocked, every signal back to its default action
// (but `keep`, which stays as the worker has it), in a process group of its
// own, or (a step) in a session of its own.

#include <signal.h>
#include <spawn.h>

namespace bgexec::proc {

// group: a process group of its own in the worker's session.  session: a
// session of its own (setsid), whose group it leads too (pgid = sid = pid),
// without a controlling terminal: a step of a worker started on a terminal
// that opens /dev/tty gets ENXIO, where in a background group of the
// worker's session its read was stopped (SIGTTIN) for ever.
enum class Detach { group, session };

struct SpawnAttr {
  posix_spawnattr_t attr;
  explicit SpawnAttr(Detach detach, int keep = 0) {
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    if (keep) sigdelset(&all, keep);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    // Not both: setpgid() after setsid() fails (EPERM: a session leader).
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (detach == Detach::session) {
      flags |= POSIX_SPAWN_SETSID;
    } else {
      posix_spawnattr_setpgroup(&attr, 0);
      flags |= POSIX_SPAWN_SETPGROUP;
    }
    posix_spawnattr_setflags(&attr, flags);
  }
  ~SpawnAttr() { posix_spawnattr_destroy(&attr); }
  SpawnAttr(const SpawnAttr&) = delete;
  SpawnAttr& operator=(const SpawnAttr&) = delete;
};

}  // namespace bgexec::proc
