#pragma once

#include <algorithm>
#include <chrono>
#include <string>

namespace bgexec::core {

// The wait of a loop that tries again after a failure (a reconnect, a
// retried call): `first` after the first failure, doubling after each one
// that follows, up to `cap`; reset() once a try succeeds.
class Backoff {
 public:
  using duration = std::chrono::steady_clock::duration;

  Backoff(duration first, duration cap) : first_(first), cap_(std::max(cap, first)), wait_(first) {}

  // The wait before the next try; the one after it is twice as long.
  duration next() {
    auto w = wait_;
    wait_ = std::min(wait_ * 2, cap_);
    return w;
  }
  // The wait next() returns next, in seconds ("0.100000"), for a log line.
  std::string seconds() const {
    return std::to_string(std::chrono::duration<double>(wait_).count());
  }
  void reset() { wait_ = first_; }

 private:
  duration first_, cap_, wait_;
};

}  // namespace bgexec::core
