#pragma once
// `bgexec bench`: the burn-down benchmark against a given database (see
// bench/README.md for the method).  Runs in the calling thread, blocking;
// spawns real `bgexec worker` processes of this same binary and pgbench.

#include <string>
#include <vector>

namespace bgexec::bench {

// Runs the benchmark with its arguments (without "bench"); returns the exit
// code: 0 ok, 1 an exactly-once check failed, 2 usage error, 3 database error.
int run_bench(const std::vector<std::string>& args);

}  // namespace bgexec::bench
