#pragma once
// The HTTP gateway: one coroutine per TCP connection (HTTP/1.1 keep-alive),
// requests answered as the bearer token's database role through Pool, event
// streams woken by the shared Notifier.

#include "http/notifier.hpp"
#include "http/pool.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <chrono>
#include <map>
#include <exception>
#include <tuple>
#include <memory>
#include <optional>
#include <string>

namespace bgexec::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

struct SharedBatch;  // gateway.cpp: a rendered event batch the streams at one cursor send

using Request = bhttp::request<bhttp::string_body>;
using Response = bhttp::response<bhttp::string_body>;

struct GatewayConfig {
  std::string conninfo;
  std::string host = "127.0.0.1";
  unsigned short port = 8080;
  std::map<std::string, std::string> tokens;  // bearer token -> database role
  std::size_t pool_size = 4;
  long statement_timeout_ms = 30000;  // per request statement; 0 = none
  // A request's header and body whole within this of its first byte (of
  // the connection's opening, of the last answer); past it, a request
  // begun gets 408 and the connection is closed (--request-timeout).
  std::chrono::milliseconds request_timeout{120000};
  // Open connections at most (serve.cpp derives it from RLIMIT_NOFILE).  At
  // the limit a new connection takes the place of the one that has waited
  // longest for its request, else it gets 503.
  std::size_t max_connections = 1000;
  // Bytes of responses and event batches waiting to be written to their
  // readers, at most (--response-memory): a role may hold half of it.
  std::size_t response_memory = std::size_t{256} << 20;
};

class Gateway {
 public:
  Gateway(asio::any_io_executor ex, GatewayConfig cfg);
  // Accepts connections forever on the configured address.
  asio::awaitable<void> listen(asio::ip::tcp::acceptor& acceptor);
  Notifier& notifier() { return notifier_; }
  // The event streams' safety net, forever: every 3 s, for each role with
  // streams open, one statement reads the jobs they follow (last_seq,
  // status, and whether the log was rewound at each stream's position) and
  // wakes the streams whose job has something they have not sent.  Events
  // written without a notification (claims send none; a session with
  // bgexec.notify_events off), a log rewound by a failover, a job purged
  // or a role revoked are found there.  Each stream polled on its own, two
  // statements every 3 s: 1 000 idle streams cost 776 transactions/s.
  asio::awaitable<void> sweep_streams();

 private:
  asio::awaitable<void> session(asio::ip::tcp::socket sock);
  // Answers 503 to a connection past max_connections and closes it.
  asio::awaitable<void> refuse(asio::ip::tcp::socket sock);
  // Closes the connection that has waited longest for (the rest of) its
  // request; false when every connection is being served.
  bool shed_waiting();
  asio::awaitable<Response> handle(const Request& req);
  asio::awaitable<Response> route(const Request& req, const std::string& path,
                                  const std::map<std::string, std::string>& qs);
  asio::awaitable<Response> schedules(const Request& req, const std::string& role,
                                      const std::vector<std::string>& seg,
                                      const std::map<std::string, std::string>& qs);
  // Streams a job's events; writes its own response.  Returns when the stream ends.
  asio::awaitable<void> stream_events(beast::tcp_stream& stream, const Request& req,
                                      std::int64_t job_id,
                                      const std::map<std::string, std::string>& qs);
  asio::awaitable<Response> metrics(const Request& req);
  const std::string* authenticate(const Request& req, const std::map<std::string, std::string>& qs,
                                  bool allow_query_token) const;

  // /metrics counters: jobs finished since this gateway started, added up
  // scrape by scrape from finished_at windows (metrics.cpp).
  struct FinishedCounters {
    std::optional<std::string> watermark;  // database time the counts reach
    std::map<std::pair<std::string, std::string>, double> jobs;  // (queue, status) -> finished
    double claims = 0, retries = 0, worker_lost = 0, timeouts = 0, count = 0, sum = 0;
    std::map<std::string, double> buckets;  // le -> count
  };

  asio::any_io_executor ex_;
  GatewayConfig cfg_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  Pool pool_;
  Notifier notifier_;
  FinishedCounters finished_;
  std::size_t connections_ = 0;  // sessions running
  std::size_t refusing_ = 0;     // 503s being written (refuse())
  static constexpr std::size_t max_refusing = 8;
  // Sessions reading a request (or waiting for one), oldest first: the ones
  // a new connection may take the place of.
  std::map<std::uint64_t, beast::tcp_stream*> waiting_;
  std::uint64_t next_waiting_ = 0;
  // Open event streams by role: a role holds at most half the connection
  // limit in them.  Streams are never shed for a new connection, so one
  // tenant's streams could take every connection, and every other tenant's
  // request got 503.
  std::map<std::string, std::size_t> streams_;
  // An open stream as the sweep sees it: its job and where it is (pointers
  // into the stream's own state), its subscription (to wake it) and `due`,
  // set by the sweep when the job has something for it.
  struct StreamWatch {
    std::int64_t job;
    const std::int64_t* cursor;
    const std::optional<std::string>* created;  // created_at of the event at the cursor, once sent
    Subscription* sub;
    bool due = false;
  };
  // The open streams past their first batch, by role, by serial; an entry
  // per token's role, a fixed few: none is erased.
  std::map<std::string, std::map<std::uint64_t, StreamWatch*>> watches_;
  std::uint64_t next_watch_ = 0;
  asio::awaitable<void> sweep_role(const std::string& role);
  // /metrics: sweeps run (one statement each), and streams they woke.
  std::uint64_t sweeps_ = 0;
  std::uint64_t sweep_wakes_ = 0;
  // Bytes of responses and event batches being written, in all and by
  // role ("" for requests without a known token): see hold() in gateway.cpp.
  std::size_t held_ = 0;
  std::map<std::string, std::size_t> held_by_role_;
  // A stream's read in flight (its events query, or its poll's read of the
  // job row), which the streams asking the same (role, statement,
  // parameters: job, cursor, batch) await instead of each sending it: every
  // announcement of a job's event woke all its streams, and each queried
  // the shared pool (3000 streams on one job kept other requests waiting a
  // second and more); and a thousand streams polling one job in step sent
  // a thousand reads of its row, past the pool's queue (Pool::max_waiting),
  // every 3 s.
  struct SharedFetch {
    explicit SharedFetch(asio::any_io_executor ex) : over(ex, asio::steady_timer::time_point::max()) {}
    asio::steady_timer over;  // cancelled when the query is over: wakes every waiter
    bool done = false;
    bool leader_gone = false;  // the query was not sent: its stream's reader left
    std::shared_ptr<const pg::Result> result;
    // The rows rendered as SSE, once for every stream at this cursor, when
    // asked (shared_events): 200 streams of one job each rendered and
    // serialized its 2.5 MB events themselves, 1 GB of JSON work on the
    // gateway's one thread per event, and every other request waited
    // seconds for it.
    std::shared_ptr<const SharedBatch> batch;
    std::exception_ptr error;
  };
  using FetchKey = std::tuple<std::string, const std::string*, pg::Params>;
  std::map<FetchKey, std::shared_ptr<SharedFetch>> fetches_;
  // The rows of `sql` (a statement of static storage, told apart by its
  // address) with `params` as role, shared with the streams asking the
  // same at the same time.  ClientGone when `left` says this stream's
  // reader has gone.
  asio::awaitable<std::shared_ptr<const pg::Result>> shared_read(const std::string& role, const std::string& sql,
                                                                 pg::Params params, const std::function<bool()>& left);
  // The events after `cursor` (events_sql with params: job, cursor, batch)
  // rendered as SSE, shared as shared_read shares the rows: one rendering
  // for the streams asking the same at the same time.
  asio::awaitable<std::shared_ptr<const SharedBatch>> shared_events(const std::string& role, pg::Params params,
                                                                    std::int64_t cursor,
                                                                    const std::function<bool()>& left);
  // shared_read and shared_events: the fetch, rendered when `render_after` is set.
  asio::awaitable<std::shared_ptr<SharedFetch>> shared_fetch(const std::string& role, const std::string& sql,
                                                             pg::Params params, std::optional<std::int64_t> render_after,
                                                             const std::function<bool()>& left);
  // /metrics: event batches rendered (one per shared fetch of events that
  // found any), and batches written to streams (one per stream that sends it).
  std::uint64_t batches_rendered_ = 0;
  std::uint64_t batches_sent_ = 0;
};

}  // namespace bgexec::http
