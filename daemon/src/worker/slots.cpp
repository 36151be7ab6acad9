// Worker::Slots: slots.hpp.
#include "worker/slots.hpp"

#include <algorithm>

namespace bgexec::worker {

std::shared_ptr<Slots::Ticket> Slots::take() {
  auto ticket = std::make_shared<Ticket>();
  if (waiting_.empty() && held_ < limit_) {
    ++held_;
    ticket->granted = true;
    return ticket;
  }
  ticket->granted_event.emplace(ex_);
  waiting_.push_back(ticket);
  return ticket;
}

void Slots::release(const std::shared_ptr<Ticket>& ticket) {
  if (ticket->granted) {
    ticket->granted = false;
    --held_;
  } else {
    waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), ticket), waiting_.end());
  }
  grant();
  if (released) released();
}

void Slots::grant() {
  while (held_ < limit_ && !waiting_.empty()) {
    auto next = std::move(waiting_.front());
    waiting_.pop_front();
    ++held_;
    next->granted = true;
    next->granted_event->notify();
  }
}

boost::asio::awaitable<bool> Slots::Held::wait(std::function<bool()> ended) {
  while (!ticket->granted && !ticket->cut && !ended()) co_await ticket->granted_event->wait();
  co_return !ticket->cut && !ended();
}

}  // namespace bgexec::worker
