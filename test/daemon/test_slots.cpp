// Worker::Slots (daemon/src/worker/slots.hpp): tickets granted in the order
// asked, and the wait for one, which ends on a grant or a cut and reads its
// `ended` only then (a sql step's wait for a session read it every 20 ms).
#include <gtest/gtest.h>

#include "worker/slots.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <chrono>
#include <optional>

namespace bgexec::worker {
namespace {

namespace asio = boost::asio;

TEST(Slots, GrantedInTheOrderAsked) {
  asio::io_context io;
  Slots slots(io.get_executor(), 1);
  auto a = slots.take();
  auto b = slots.take();
  auto c = slots.take();
  EXPECT_TRUE(a->granted);
  EXPECT_FALSE(b->granted);
  EXPECT_FALSE(c->granted);
  slots.release(a);
  EXPECT_TRUE(b->granted);
  EXPECT_FALSE(c->granted);
  // A ticket given back before it was granted leaves the queue.
  auto d = slots.take();
  slots.release(c);
  slots.release(b);
  EXPECT_TRUE(d->granted);
  slots.release(d);
  // Free again: granted at once, with no event.
  auto e = slots.take();
  EXPECT_TRUE(e->granted);
  EXPECT_FALSE(e->granted_event.has_value());
  slots.release(e);
}

// A waiter: its result once the wait returns, and how often it read `ended`.
struct Waiter {
  std::optional<bool> result;
  int reads = 0;
  bool ended = false;
};

void start_wait(asio::io_context& io, Slots::Held& held, Waiter& w) {
  asio::co_spawn(
      io,
      [&held, &w]() -> asio::awaitable<void> {
        w.result = co_await held.wait([&w] {
          ++w.reads;
          return w.ended;
        });
      },
      asio::detached);
}

// What Worker::step_room reads: held, waiting, and a callback after each
// ticket given back (the fetcher may claim into the slot).
TEST(Slots, CountsAndReleasedCallback) {
  asio::io_context io;
  Slots slots(io.get_executor(), 1);
  int released = 0;
  slots.released = [&] { ++released; };
  EXPECT_EQ(slots.limit(), 1);
  auto a = slots.take();
  auto b = slots.take();
  EXPECT_EQ(slots.held(), 1);
  EXPECT_EQ(slots.waiting(), 1);
  slots.release(a);  // b granted
  EXPECT_EQ(released, 1);
  EXPECT_EQ(slots.held(), 1);
  EXPECT_EQ(slots.waiting(), 0);
  slots.release(b);
  EXPECT_EQ(released, 2);
  EXPECT_EQ(slots.held(), 0);
}

TEST(Slots, WaitEndsWhenGranted) {
  asio::io_context io;
  Slots slots(io.get_executor(), 1);
  std::optional<Slots::Held> first(std::in_place, slots, slots.take());
  Slots::Held second(slots, slots.take());
  Waiter w;
  start_wait(io, second, w);
  // Waiting 100 ms reads `ended` once, as the wait starts: no polling.
  io.run_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(w.result.has_value());
  EXPECT_EQ(w.reads, 1);
  first.reset();  // given back: the second is granted
  io.run_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(w.result.has_value());
  EXPECT_TRUE(*w.result);
  EXPECT_TRUE(second.ticket->granted);
}

TEST(Slots, WaitEndsWhenCut) {
  asio::io_context io;
  Slots slots(io.get_executor(), 1);
  Slots::Held first(slots, slots.take());
  std::optional<Slots::Held> second(std::in_place, slots, slots.take());
  Slots::Held third(slots, slots.take());
  Waiter w;
  start_wait(io, *second, w);
  io.run_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(w.result.has_value());
  // The step ended (its killer): `ended` says so, and the cut wakes the wait.
  asio::post(io, [&] {
    w.ended = true;
    second->ticket->cut_wait();
  });
  io.run_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(w.result.has_value());
  EXPECT_FALSE(*w.result);
  // Given back ungranted, it leaves the queue: the third is next.
  second.reset();
  EXPECT_FALSE(third.ticket->granted);
}

TEST(Slots, WaitCutBeforeItStartsReturnsAtOnce) {
  asio::io_context io;
  Slots slots(io.get_executor(), 1);
  Slots::Held first(slots, slots.take());
  Slots::Held second(slots, slots.take());
  second.ticket->cut_wait();
  Waiter w;
  start_wait(io, second, w);
  io.run_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(w.result.has_value());
  EXPECT_FALSE(*w.result);
}

TEST(Slots, WaitEndedBeforeItStartsReturnsAtOnce) {
  asio::io_context io;
  Slots slots(io.get_executor(), 1);
  Slots::Held first(slots, slots.take());
  Slots::Held second(slots, slots.take());
  Waiter w;
  w.ended = true;  // the step's deadline passed before it waited
  start_wait(io, second, w);
  io.run_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(w.result.has_value());
  EXPECT_FALSE(*w.result);
}

}  // namespace
}  // namespace bgexec::worker
