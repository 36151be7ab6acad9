#pragma once
// How long a worker's write is retried, for the worker, its jobs and the
// completer.

#include <chrono>
#include <functional>

namespace bgexec::worker {

using Clock = std::chrono::steady_clock;

// Until when a call that met a lost connection is made again: read before
// each retry, so a job's writes follow its lease as heartbeats renew it and
// stop once the job gives it up (Job::write_until).  Empty: no bound.
using Until = std::function<Clock::time_point()>;

}  // namespace bgexec::worker
