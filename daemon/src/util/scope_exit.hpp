#pragma once
// Runs a callable when its scope ends, however it ends (an exception too),
// or earlier by run(), and then once only.  For the worker's flags that
// say a call is in flight: cleared on the normal and pg::Error paths alone,
// another exception left them set, and what waited for them waited for good.

#include <utility>

namespace bgexec {

template <class F>
class ScopeExit {
 public:
  explicit ScopeExit(F f) : f_(std::move(f)) {}
  ScopeExit(const ScopeExit&) = delete;
  ScopeExit& operator=(const ScopeExit&) = delete;
  ~ScopeExit() { run(); }

  // Now, where the scope's work is done: not again at its end.
  void run() {
    if (std::exchange(armed_, false)) f_();
  }

 private:
  F f_;
  bool armed_ = true;
};

}  // namespace bgexec
