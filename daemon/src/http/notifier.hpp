#pragma once
// The one LISTEN connection of the gateway.  A single coroutine LISTENs on
// bgexec_events and fans each "job_id:seq" notification out to the event
// streams subscribed to that job, so thousands of streams share one database
// session.  Notifications only wake streams; a stream always reads the events
// themselves with bgexec.events(job, cursor), so coalesced or lost
// notifications cost latency, never events.

#include "pg/connection.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

namespace bgexec::http {

namespace asio = boost::asio;

class Notifier;

// One stream's registration for a job.  Registered on construction,
// unregistered on destruction.  `seen` is the highest seq a notification
// announced (or INT64_MAX after the listener reconnected: refetch).
class Subscription {
 public:
  Subscription(Notifier& n, std::int64_t job_id);
  ~Subscription();
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

  // Waits until a notification for the job arrives or `d` passes.
  asio::awaitable<void> wait(std::chrono::steady_clock::duration d);
  std::int64_t seen() const { return seen_; }
  // Forgets announcements (called right before the stream reads the events).
  void clear() { seen_ = 0; }
  // Ends a wait() now without an announcement (the gateway's sweep found
  // the job changed: Gateway::sweep_streams).
  void poke() { timer_.cancel(); }

 private:
  friend class Notifier;
  void wake(std::int64_t seq);

  Notifier& n_;
  std::int64_t job_id_;
  std::int64_t seen_ = 0;
  asio::steady_timer timer_;
  std::list<Subscription*>::iterator pos_;
};

class Notifier {
 public:
  Notifier(asio::any_io_executor ex, std::string conninfo);
  // Runs forever: connect, LISTEN, dispatch; reconnects with backoff.
  asio::awaitable<void> run();
  // Waits (at most `d`) until LISTEN is in effect; true when it is.  No
  // wait while the server refuses LISTEN (a hot standby): streams poll.
  asio::awaitable<bool> wait_listening(std::chrono::steady_clock::duration d);
  std::size_t subscribers() const { return count_; }

 private:
  friend class Subscription;
  void dispatch(const std::string& payload);
  void set_listening(bool on, bool refused = false);

  asio::any_io_executor ex_;
  pg::Connection conn_;
  bool listening_ = false;
  bool refused_ = false;  // the last LISTEN was refused (25006): until one is not
  std::size_t count_ = 0;
  std::unordered_map<std::int64_t, std::list<Subscription*>> subs_;
  std::list<std::shared_ptr<asio::steady_timer>> listen_waiters_;
};

}  // namespace bgexec::http
