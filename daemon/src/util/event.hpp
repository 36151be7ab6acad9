#pragma once
// A wake-up flag for one waiting coroutine: notify() before or during wait()
// is never lost.  Single-threaded event loop only.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>

namespace bgexec {

class Event {
 public:
  explicit Event(boost::asio::any_io_executor ex)
      : timer_(ex, boost::asio::steady_timer::time_point::max()) {}

  void notify() {
    pending_ = true;
    timer_.cancel();
  }

  // Waits for notify(); returns at once if one is pending.
  boost::asio::awaitable<void> wait() {
    co_await wait_until(boost::asio::steady_timer::time_point::max());
  }

  // Waits for notify() or the time point; true when notified.
  boost::asio::awaitable<bool> wait_until(boost::asio::steady_timer::time_point tp) {
    if (!pending_) {
      timer_.expires_at(tp);
      co_await timer_.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    }
    bool notified = pending_;
    pending_ = false;
    co_return notified;
  }

  boost::asio::awaitable<bool> wait_for(std::chrono::steady_clock::duration d) {
    co_return co_await wait_until(std::chrono::steady_clock::now() + d);
  }

 private:
  boost::asio::steady_timer timer_;
  bool pending_ = false;
};

// Sleeps on a fresh timer.
inline boost::asio::awaitable<void> sleep_for(std::chrono::steady_clock::duration d) {
  boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, d);
  co_await t.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
}

// Seconds as a steady_clock duration, within +-200 years (NaN: 0): past
// about 292 years the cast to int64 nanoseconds overflowed, and a job whose
// timeout a superuser had set to 300 years was timed out as it was claimed.
inline std::chrono::steady_clock::duration seconds(double s) {
  constexpr double bound = 200.0 * 365.25 * 86400;
  if (!(s == s)) s = 0;
  s = s > bound ? bound : s < -bound ? -bound : s;
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

}  // namespace bgexec
