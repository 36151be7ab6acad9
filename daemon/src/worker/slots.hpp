#pragma once
// Worker::Slots: what the worker holds a counted number of at once, first
// come first served: sql step sessions (--sql-steps) and action and run
// step processes (--step-processes).  A step takes a ticket before it
// connects or spawns (take), granted at once when one is free and no one
// waits; else queued, with an event notified when it is granted.  It gives
// the ticket back (release) when its connection is closed or its process
// has ended and its pipes are closed; a ticket given back before it was
// granted leaves the queue.  Uncapped, a workflow of many parallel sql
// steps took the server's connections, and one of 600 parallel action
// steps failed them with EMFILE (three pipes each).  A ticket granted at
// once makes no event: nothing but a count on the one-step path.
// Single-threaded event loop only.

#include "util/event.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <deque>
#include <functional>
#include <memory>
#include <optional>

namespace bgexec::worker {

class Slots {
 public:
  struct Ticket {
    std::optional<Event> granted_event;  // a ticket that waited
    bool granted = false;
    bool cut = false;  // the step ended (a stop, its deadline) while waiting
    // Ends a wait for this ticket (Held::wait), now or before it starts:
    // the step ended.  Called by the step's killer.
    void cut_wait() {
      cut = true;
      if (granted_event) granted_event->notify();
    }
  };
  // A ticket taken, given back as it goes out of scope.
  struct Held {
    Slots& slots;
    std::shared_ptr<Ticket> ticket;
    Held(Slots& s, std::shared_ptr<Ticket> t) : slots(s), ticket(std::move(t)) {}
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    ~Held() { slots.release(ticket); }
    // Waits until the ticket is granted; false when it was cut (cut_wait)
    // or `ended` is true first.  Woken by a grant or a cut only: `ended`
    // is read when the wait starts and at each wake, never polled, so
    // whatever makes it true must cut the ticket.
    boost::asio::awaitable<bool> wait(std::function<bool()> ended);
  };
  Slots(boost::asio::any_io_executor ex, int limit) : ex_(std::move(ex)), limit_(limit) {}
  Held hold() { return Held(*this, take()); }
  std::shared_ptr<Ticket> take();
  void release(const std::shared_ptr<Ticket>& ticket);
  int limit() const { return limit_; }
  int held() const { return held_; }
  int waiting() const { return static_cast<int>(waiting_.size()); }
  // Called once a ticket is given back (the worker's fetcher may claim
  // into the slot: Worker::step_room).
  std::function<void()> released;

 private:
  void grant();
  boost::asio::any_io_executor ex_;
  int limit_;
  int held_ = 0;                                 // granted tickets
  std::deque<std::shared_ptr<Ticket>> waiting_;  // in the order they asked
};

}  // namespace bgexec::worker
