#pragma once
// A small pool of database connections on which each statement runs as a
// given role.  Each connection is checked out exclusively for the role switch
// plus the statement, so two requests never interleave on one session.
//
// Role switching: `SELECT set_config('role', $1, false)` (the function form of
// SET ROLE, so the role name travels as a parameter and needs no quoting),
// with "none" meaning the gateway's own login role (RESET ROLE), before every
// statement: a role can never leak from one request to the next, whatever
// failed in between; a role revoked from the gateway's login is refused at
// the next request (PostgreSQL checks membership when a role is set, not
// after); and a session the server closed while it sat idle is found
// before anything is sent (pg::Connection::query_after), and replaced.
//
// The role switch and the statement go in one round trip, as one libpq
// pipeline (query_after): the server runs the statement only if the switch
// succeeded (an error aborts the rest of the pipeline up to its sync), and
// both run in one implicit transaction, so a failed statement also undoes
// its switch, which the next request sets again anyway.  With the switch as
// a round trip of its own, a request cost 15 % more CPU (gateway and
// server) and 16 clients got 10-12 % fewer answers, one client a third
// fewer (bench/README.md, "What changed, measured": the gateway).

#include "pg/connection.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace bgexec::http {

namespace asio = boost::asio;

// What Pool::query throws for a request whose client left while it waited.
struct ClientGone : std::exception {
  const char* what() const noexcept override { return "the client has gone"; }
};

class Pool {
 public:
  // statement_timeout_ms: the sessions' statement_timeout (0 = none), set
  // with the role.
  Pool(asio::any_io_executor ex, std::string conninfo, std::size_t size, long statement_timeout_ms = 0);
  // Runs `sql` as `role` ("" = the gateway's login role).  Throws pg::Error.
  // With idempotent=true a statement that failed because the connection was
  // lost (e.g. after a database restart) is retried once on a fresh connection.
  // With a statement timeout, a call the server has not answered 5 s past it
  // (a frozen host, a network partition: statement_timeout fires only in a
  // backend that runs) drops the connection and throws Error 08006.  A
  // call that is not idempotent and lost its connection (or its answer)
  // after it was sent throws 08007 (transaction_resolution_unknown): it
  // may have committed.
  // With `abandoned`, it is asked once a connection is free, before anything
  // runs: true (the request's client has gone) throws ClientGone instead.
  // While every connection is busy, requests wait in one queue per role,
  // and a freed connection goes to the roles in turn (the oldest request of
  // each): one tenant's thousand requests, or a flood of token-less
  // /metrics scrapes, delay another tenant's by one statement per role
  // ahead of it, not by the whole queue.  A role with max_waiting requests
  // waiting gets pg::Error 53400 for the next (429).  A call with
  // `uncapped` waits whatever the count, and is not counted: the event
  // streams' reads, whose number the gateway bounds itself (a role's open
  // streams, each with one read at a time, and one safety-net sweep per
  // role): a thousand browsers reconnecting at once after a gateway
  // restart got 645 429s, which EventSource gives up on.  Within a role's
  // turn its ordinary requests go first, each class in arrival order: a
  // burst of a thousand stream opens held the role's `GET /v1/jobs/ID`
  // behind every one of their reads (0.6-0.8 s with 4 connections,
  // bench/README.md, the fifty-fifth round).  Its stream reads (and its
  // sweep) wait while the role has ordinary requests waiting, as many as
  // it sends (max_waiting at most).
  asio::awaitable<pg::Result> query(const std::string& role, std::string sql, pg::Params params = {},
                                    bool idempotent = false, const std::function<bool()>& abandoned = {},
                                    bool uncapped = false);

  static constexpr std::size_t max_waiting = 256;

  // Calls waiting for a connection now, ordinary and `uncapped` (/metrics).
  std::size_t waiting_requests() const { return waiting_requests_; }
  std::size_t waiting_streams() const { return waiting_streams_; }

 private:
  struct Slot {
    std::unique_ptr<pg::Connection> conn;
    bool busy = false;
  };
  // A request waiting for a connection: release() hands it one (still
  // busy) and wakes it.
  struct Waiter {
    explicit Waiter(asio::any_io_executor ex) : timer(ex, asio::steady_timer::time_point::max()) {}
    asio::steady_timer timer;
    Slot* slot = nullptr;
  };
  // A role's waiting calls, by class, each oldest first.  A waiter leaves
  // only when handed a connection, so `ordinary.size()` is what max_waiting
  // counts.
  struct RoleQueue {
    std::deque<std::shared_ptr<Waiter>> ordinary;
    std::deque<std::shared_ptr<Waiter>> streams;  // `uncapped`: served once no ordinary one waits
  };
  asio::awaitable<Slot*> acquire(const std::string& role, bool uncapped);
  void release(Slot* s);
  asio::awaitable<pg::Result> run(Slot& s, const std::string& role, const std::string& sql,
                                  const pg::Params& params);

  asio::any_io_executor ex_;
  long statement_timeout_ms_;
  std::string statement_timeout_;  // milliseconds, as set_config takes it
  std::vector<std::unique_ptr<Slot>> slots_;
  std::map<std::string, RoleQueue> waiting_;  // by role; an entry only while one of its calls waits
  std::deque<std::string> turns_;  // the roles with requests waiting, in the order they are served
  std::size_t waiting_requests_ = 0;
  std::size_t waiting_streams_ = 0;
};

}  // namespace bgexec::http
