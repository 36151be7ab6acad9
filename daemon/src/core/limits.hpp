#pragma once

#include <cstddef>

namespace bgexec::core {

// Raises the soft limit on open descriptors to the hard one (systemd's soft
// default is 1024, a login shell's often 1024 too), at most 2^20; returns
// the soft limit in force, 0 when it cannot be read.  Every connection,
// step process pipe and sql step session holds descriptors.
std::size_t raise_nofile();

}  // namespace bgexec::core
