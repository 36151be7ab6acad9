// Role-switching connection pool (see pool.hpp).
#include "http/pool.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace bgexec::http {

namespace {
// How long past the statement timeout a call may go unanswered: the server's
// own timeout (and the cancel it sends) normally ends a statement first.
constexpr std::chrono::milliseconds unanswered_grace{5000};

// The connection broke before the statement ran or before anything
// committed (pg::SetupError): safe to send again.
struct RoleSwitchLost : pg::Error {
  explicit RoleSwitchLost(const pg::Error& e) : pg::Error(e) {}
};
// SET ROLE in function form: the role name is a parameter ("none" = RESET ROLE).
// The session's statement_timeout goes with it, so no session runs a request
// without the timeout.
const std::string set_role_sql =
    "SELECT pg_catalog.set_config('role', $1, false), pg_catalog.set_config('statement_timeout', $2, false)";

[[noreturn]] void role_error(const pg::Error& e) {
  const auto& f = e.fields();
  auto msg = "cannot act as the token's role: " + (f.primary.empty() ? std::string(e.what()) : f.primary);
  throw pg::Error("42501", msg, {msg, f.detail, f.hint, ""});
}
}  // namespace

Pool::Pool(asio::any_io_executor ex, std::string conninfo, std::size_t size, long statement_timeout_ms)
    : ex_(ex), statement_timeout_ms_(statement_timeout_ms), statement_timeout_(std::to_string(statement_timeout_ms)) {
  for (std::size_t i = 0; i < size; ++i) {
    auto s = std::make_unique<Slot>();
    s->conn = std::make_unique<pg::Connection>(ex, conninfo, "http-pool-" + std::to_string(i));
    // Short statements only: JIT's compile of queue_stats took longer than
    // the query itself with thousands of queues (connection.hpp).
    s->conn->set_jit_off(true);
    s->conn->set_interval_style(true);  // `timeout` as the API shows it
    slots_.push_back(std::move(s));
  }
}

// Takes a free connection; when all are checked out, waits in the role's
// queue of its class until release() hands it one.  A connection is free
// only while no request waits, as release() hands each one over.
asio::awaitable<Pool::Slot*> Pool::acquire(const std::string& role, bool uncapped) {
  for (auto& s : slots_)
    if (!s->busy) {
      s->busy = true;
      co_return s.get();
    }
  auto& queue = waiting_[role];
  if (!uncapped && queue.ordinary.size() >= max_waiting) {
    auto msg = std::to_string(max_waiting) + " requests of this role are already waiting for a database connection";
    throw pg::Error("53400", msg, {msg, "", "Send fewer requests at once, or try again shortly.", ""});
  }
  auto w = std::make_shared<Waiter>(ex_);
  if (queue.ordinary.empty() && queue.streams.empty()) turns_.push_back(role);
  (uncapped ? queue.streams : queue.ordinary).push_back(w);
  ++(uncapped ? waiting_streams_ : waiting_requests_);
  co_await w->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  if (!w->slot) throw std::runtime_error("the gateway is stopping");  // woken by the executor's end
  co_return w->slot;
}

// Hands the connection to the role whose turn it is (that role goes to the
// back of the turns if it has more): to its oldest ordinary request, or
// with none, to its oldest stream read.  With nobody waiting, frees it.
void Pool::release(Slot* s) {
  if (turns_.empty()) {
    s->busy = false;
    return;
  }
  std::string role = std::move(turns_.front());
  turns_.pop_front();
  auto it = waiting_.find(role);
  auto& q = it->second;
  const bool ordinary = !q.ordinary.empty();
  auto& from = ordinary ? q.ordinary : q.streams;
  auto w = std::move(from.front());
  from.pop_front();
  --(ordinary ? waiting_requests_ : waiting_streams_);
  if (q.ordinary.empty() && q.streams.empty()) waiting_.erase(it);
  else turns_.push_back(std::move(role));
  w->slot = s;
  w->timer.cancel();
}

// Sets the role and runs the statement, in one round trip (pool.hpp: why
// the role before every statement, and why in one pipeline).
asio::awaitable<pg::Result> Pool::run(Slot& s, const std::string& role, const std::string& sql,
                                      const pg::Params& params) {
  const pg::Params p{role.empty() ? std::string("none") : role, statement_timeout_};
  try {
    co_return co_await s.conn->query_after(set_role_sql, p, sql, params);
  } catch (const pg::SetupError& e) {
    // The statement did not run: a lost connection is retried by the
    // caller; any other failure means the token's role is missing or not
    // granted to the gateway.
    if (e.connection_lost()) throw RoleSwitchLost(e);
    role_error(e);
  }
}

asio::awaitable<pg::Result> Pool::query(const std::string& role, std::string sql, pg::Params params,
                                        bool idempotent, const std::function<bool()>& abandoned,
                                        bool uncapped) {
  Slot* s = co_await acquire(role, uncapped);
  struct Release {
    Pool* p;
    Slot* s;
    ~Release() { p->release(s); }
  } guard{this, s};
  if (abandoned && abandoned()) throw ClientGone();
  // The bound on the whole call, retry and reconnect included.
  pg::Deadline deadline(*s->conn, statement_timeout_ms_ > 0
                                      ? std::chrono::milliseconds(statement_timeout_ms_) + unanswered_grace
                                      : std::chrono::milliseconds(0));
  auto unanswered = [this] {
    auto msg = "the database did not answer within " +
               std::to_string(statement_timeout_ms_ + unanswered_grace.count()) +
               " ms (the statement timeout + 5 s); connection dropped";
    return pg::Error::lost("08006", msg, {msg, "", "", ""});
  };
  // A write whose statement went out and whose answer did not come back
  // may have committed (a commit waiting for a synchronous standby that
  // has gone, say, past the statement timeout, which does not cover that
  // wait): the client must not read "nothing was written" into it.
  auto unknown = [&](const pg::Error& e) {
    std::string msg = (deadline.fired() ? unanswered().fields().primary
                                         : "the connection to the database was lost before its answer") +
                      ": the request may or may not have been applied";
    return pg::Error::lost("08007", msg,
                           {msg, e.fields().primary,
                            "repeat a submit with the same idempotency_key: it returns the job, created or not; "
                            "look at the job before repeating anything else",
                            ""});
  };
  try {
    co_return co_await run(*s, role, sql, params);
  } catch (const RoleSwitchLost&) {
    // the statement never reached the server: always safe to retry
    if (deadline.fired()) throw unanswered();
  } catch (const pg::Error& e) {
    if (!idempotent && (deadline.fired() || e.connection_lost())) throw unknown(e);
    if (deadline.fired()) throw unanswered();
    if (!idempotent || !e.connection_lost()) throw;
  }
  try {
    co_return co_await run(*s, role, sql, params);
  } catch (const pg::Error&) {
    if (deadline.fired()) throw unanswered();
    throw;
  }
}

}  // namespace bgexec::http
