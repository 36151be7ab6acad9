#!/usr/bin/env bash
# Configures and builds the C++ daemon into daemon/build (CMake project in daemon/).
# BUILD_TYPE (default RelWithDebInfo) and JOBS (default nproc) may be set;
# TARGET builds that target alone (bgexec: the binary without the unit tests).
# Install with: cmake --install daemon/build [--prefix DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmake -S "$root/daemon" -B "$root/daemon/build" \
  -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" ${CMAKE_ARGS:-} >/dev/null
cmake --build "$root/daemon/build" -j "${JOBS:-$(nproc)}" ${TARGET:+--target "$TARGET"}
