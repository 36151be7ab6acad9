#pragma once

#include <algorithm>
#include <chrono>
#include <random>
#include <string>

namespace bgexec::core {

// The wait of a loop that tries again after a failure (a reconnect, a
// retried call): `first` after the first failure, doubling after each one
// that follows, up to `cap`; reset() once a try succeeds.  With `jitter`
// (0.25: +-25%), each wait is drawn uniformly around that one, so many
// processes that failed together (a fleet of workers at a server restart)
// do not try again together.
class Backoff {
 public:
  using duration = std::chrono::steady_clock::duration;

  Backoff(duration first, duration cap, double jitter = 0)
      : first_(first), cap_(std::max(cap, first)), wait_(first), jitter_(std::clamp(jitter, 0.0, 1.0)) {}

  // The wait before the next try (within +-jitter of the nominal one); the
  // nominal one after it is twice as long.
  duration next() {
    auto w = wait_;
    wait_ = std::min(wait_ * 2, cap_);
    if (jitter_ == 0) return w;
    thread_local std::minstd_rand rng{std::random_device{}()};
    std::uniform_real_distribution<double> f(1 - jitter_, 1 + jitter_);
    return std::chrono::duration_cast<duration>(std::chrono::duration<double, duration::period>(w.count() * f(rng)));
  }
  // The nominal wait next() returns next, in seconds ("0.100000"), for a log line.
  std::string seconds() const {
    return std::to_string(std::chrono::duration<double>(wait_).count());
  }
  void reset() { wait_ = first_; }

 private:
  duration first_, cap_, wait_;
  double jitter_;
};

}  // namespace bgexec::core
