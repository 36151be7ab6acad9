#pragma once
// A FIFO lock for coroutines on one single-threaded event loop: lock() waits
// its turn, unlock() hands ownership straight to the longest waiter (no
// coroutine can slip in between).  Used for a connection's statement order
// and a job's one-append-at-a-time rule.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <deque>
#include <memory>

namespace bgexec {

class FifoLock {
 public:
  explicit FifoLock(boost::asio::any_io_executor ex) : ex_(std::move(ex)) {}

  boost::asio::awaitable<void> lock() {
    if (!busy_) {
      busy_ = true;
      co_return;
    }
    auto t = std::make_shared<boost::asio::steady_timer>(ex_, boost::asio::steady_timer::time_point::max());
    waiters_.push_back(t);
    co_await t->async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    // ownership was handed over by unlock(); busy_ stays true
  }

  void unlock() {
    if (waiters_.empty()) {
      busy_ = false;
      return;
    }
    auto t = waiters_.front();
    waiters_.pop_front();
    t->cancel();
  }

  // Unlocks when it goes out of scope (however the holding coroutine ends).
  struct Guard {
    FifoLock& lock;
    explicit Guard(FifoLock& l) : lock(l) {}
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() { lock.unlock(); }
  };

 private:
  boost::asio::any_io_executor ex_;
  bool busy_ = false;
  std::deque<std::shared_ptr<boost::asio::steady_timer>> waiters_;
};

}  // namespace bgexec
