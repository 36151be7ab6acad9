#pragma once
// One run at a time of a check whose answer every caller wants: a caller
// that comes while a run is in flight waits for that run to end and takes
// its answer, instead of running one of its own.  The run ends, and wakes
// every caller waiting for it, however its scope ends (an exception too).
// Single-threaded event loop only.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <utility>

namespace bgexec {

class SingleFlight {
 public:
  explicit SingleFlight(boost::asio::any_io_executor ex)
      : ended_(std::move(ex), boost::asio::steady_timer::time_point::max()) {}

  // The run in flight while it lives (start it when join() said false).
  class Run {
   public:
    explicit Run(SingleFlight& flight) : flight_(&flight) { flight.busy_ = true; }
    Run(const Run&) = delete;
    Run& operator=(const Run&) = delete;
    ~Run() { end(); }

    // Ends it now (once): its waiters resume at their next turn.
    void end() {
      if (!flight_) return;
      flight_->busy_ = false;
      flight_->ended_.cancel();
      flight_ = nullptr;
    }

   private:
    SingleFlight* flight_;
  };

  bool busy() const { return busy_; }

  // A run in flight: waits for it to end, true.  None: false at once, and
  // the caller makes its own (a Run).
  boost::asio::awaitable<bool> join() {
    if (!busy_) co_return false;
    while (busy_) co_await ended_.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    co_return true;
  }

 private:
  boost::asio::steady_timer ended_;  // cancelled as a run ends: wakes every waiter
  bool busy_ = false;
};

}  // namespace bgexec
