// util/single_flight.hpp (the worker's check_room: one check of the
// connection limits at a time, a caller during one waits for its answer)
// and util/scope_exit.hpp (the worker's claim-in-flight flags, cleared
// however the claim ends), on Asio alone.
#include <gtest/gtest.h>

#include "util/event.hpp"
#include "util/scope_exit.hpp"
#include "util/single_flight.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

namespace bgexec {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// check_room's shape: a caller that comes during a check waits for it and
// takes its answer (ran stays false); else it runs one (the query: `hold`
// long), under a Run, ended however the query ends (`fail`: a throw).
struct Checker {
  SingleFlight flight;
  int runs = 0;
  explicit Checker(asio::io_context& io) : flight(io.get_executor()) {}

  asio::awaitable<void> check(std::vector<std::string>& log, std::string who,
                              std::chrono::milliseconds hold, bool fail = false) {
    const bool joined = co_await flight.join();
    if (joined) {
      log.push_back(who + " joined");
      co_return;
    }
    SingleFlight::Run run(flight);
    ++runs;
    log.push_back(who + " runs");
    co_await sleep_for(hold);
    if (fail) throw std::runtime_error("not a pg::Error");
    run.end();
    log.push_back(who + " ran");
  }
};

void spawn(asio::io_context& io, asio::awaitable<void> a, int& done) {
  asio::co_spawn(io, std::move(a), [&done](std::exception_ptr) { ++done; });
}

TEST(SingleFlight, ACallerDuringACheckWaitsForItsEnd) {
  asio::io_context io;
  Checker c(io);
  std::vector<std::string> log;
  int done = 0;
  spawn(io, c.check(log, "a", 100ms), done);
  // Two more while a's check is in flight: both wait for it, neither runs.
  spawn(io, c.check(log, "b", 0ms), done);
  spawn(io, c.check(log, "c", 0ms), done);
  const auto start = std::chrono::steady_clock::now();
  io.run_for(5s);  // a mutant that never wakes the waiters stops here, b and c not done
  EXPECT_EQ(done, 3);
  EXPECT_EQ(c.runs, 1);
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[0], "a runs");
  EXPECT_EQ(log[1], "a ran");
  EXPECT_EQ(log[2], "b joined");
  EXPECT_EQ(log[3], "c joined");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_FALSE(c.flight.busy());
}

TEST(SingleFlight, ACheckThatThrowsWakesItsWaiters) {
  asio::io_context io;
  Checker c(io);
  std::vector<std::string> log;
  int done = 0;
  spawn(io, c.check(log, "a", 50ms, /*fail=*/true), done);
  spawn(io, c.check(log, "b", 0ms), done);
  io.run_for(5s);
  EXPECT_EQ(done, 2);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0], "a runs");
  EXPECT_EQ(log[1], "b joined");
  // Not left in flight: the next caller runs a check of its own.
  EXPECT_FALSE(c.flight.busy());
  io.restart();
  spawn(io, c.check(log, "d", 0ms), done);
  io.run_for(5s);
  EXPECT_EQ(done, 3);
  EXPECT_EQ(c.runs, 2);
  EXPECT_EQ(log.back(), "d ran");
}

TEST(SingleFlight, NoneInFlightRunsAtOnce) {
  asio::io_context io;
  Checker c(io);
  std::vector<std::string> log;
  int done = 0;
  spawn(io, c.check(log, "a", 0ms), done);
  io.run_for(5s);
  spawn(io, c.check(log, "b", 0ms), done);
  io.restart();
  io.run_for(5s);
  EXPECT_EQ(done, 2);
  EXPECT_EQ(c.runs, 2);
}

// The worker's claim in flight: the flag is cleared, and its waiter woken,
// on the normal path (run()), and however else the scope ends.
TEST(ScopeExit, RunsOnceOnRunOrAtTheEnd) {
  int calls = 0;
  {
    ScopeExit g([&] { ++calls; });
    g.run();
    EXPECT_EQ(calls, 1);
  }
  EXPECT_EQ(calls, 1);
  {
    ScopeExit g([&] { ++calls; });
  }
  EXPECT_EQ(calls, 2);
}

TEST(ScopeExit, AnExceptionInACoroutineClearsTheFlag) {
  asio::io_context io;
  int asked = 0;
  Event ended(io.get_executor());
  bool waiter_done = false;
  // The claim: sets the flag, then throws something other than pg::Error.
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asked = 4;
        ScopeExit g([&] {
          asked = 0;
          ended.notify();
        });
        co_await sleep_for(10ms);
        throw std::runtime_error("not a pg::Error");
      },
      [](std::exception_ptr) {});
  // give_back's wait for no claim in flight.
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        while (asked > 0) co_await ended.wait();
        waiter_done = true;
      },
      [](std::exception_ptr) {});
  io.run_for(5s);
  EXPECT_EQ(asked, 0);
  EXPECT_TRUE(waiter_done);
}

}  // namespace
}  // namespace bgexec
