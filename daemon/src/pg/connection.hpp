#pragma once
// Asynchronous PostgreSQL connection: libpq in non-blocking mode behind an
// Asio stream_descriptor.  The only place in the daemon that touches libpq.
//
// Built-ins a user could shadow.  The daemon's statements run with the
// session's search_path, the server's default ("$user", public): it sends
// no `options` startup parameter, which PgBouncer refuses.  PostgreSQL
// resolves an unqualified function or operator across every schema on the
// path and prefers one that takes the argument types as they are (an
// untyped literal taken for the other side's type) over a built-in that is
// polymorphic, takes "any" or needs a cast, wherever it sits: a role that
// may create in public, or create a schema named after the daemon's role
// (on PG 15 the database's owner may do both), would have the daemon run
// its function as the daemon's role.  So every statement the daemon writes
// names pg_catalog's built-ins of that kind: functions and aggregates that
// are polymorphic or take "any" (pg_catalog.array_to_json, unnest,
// count(x), lead, jsonb_build_object, percentile_cont), or take an untyped
// literal or a named argument (to_char, string_to_array, current_setting,
// pg_total_relation_size, make_interval), and operators whose types
// pg_catalog has no operator of exactly (OPERATOR(pg_catalog.=) on the
// enum job_status, ->> with a literal key, an int times an interval; such
// an OPERATOR() binds tighter than = but looser than * and +).  Calls
// whose arguments have exactly the types of a pg_catalog signature are
// left as written (now(), isfinite(timestamptz), sum(float8), count(*),
// text = text, bigint < int): pg_catalog is searched before the path, so a
// function of the same types elsewhere is never found.  EXTRACT, AT TIME
// ZONE, COALESCE and GREATEST are syntax for pg_catalog's.  The
// extension's functions set their own search_path.
// test/e2e/55-search-path-trap.sh plants such functions.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/json_input.hpp"
#include "core/sql_time.hpp"
#include "core/sqlstate.hpp"
#include "util/fifo_lock.hpp"
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

struct pg_conn;
struct pg_result;

namespace bgexec::pg {

namespace asio = boost::asio;

// A failed statement or connection; sqlstate is "08006" when the connection broke
// without the server naming a state.
class Error : public std::runtime_error {
 public:
  // The server's error fields, apart (empty when the error did not come from
  // the server): what() folds them, CONTEXT's call stack included, into one line.
  struct Fields {
    std::string primary, detail, hint, context;
  };
  // An error on a session that stays open (the server's answer to one
  // statement, whatever its SQLSTATE), or one that is not about a session.
  Error(std::string sqlstate, const std::string& message, Fields fields = {});
  // An error that ended the session, or met it ended: see connection_lost().
  static Error lost(std::string sqlstate, const std::string& message, Fields fields = {});
  const std::string& sqlstate() const { return sqlstate_; }
  const Fields& fields() const { return fields_; }
  // The session is gone; reconnect with backoff.  Set where the error is
  // raised, from what libpq says of the connection (PQstatus
  // CONNECTION_BAD: the server closed it, after a FATAL such as 57P01 or
  // not, or the network did), a connect that failed, a socket that failed
  // or was closed under the call (a Deadline, close()).  Not from the
  // SQLSTATE: the server answers some class 08 errors on a session that
  // stays open (08P01 protocol_violation: a statement given the wrong
  // number of parameters; a dblink 08001 about another connection).  Not
  // either when Connection closes the session itself to end a statement it
  // refuses (COPY, rows over query_rows' cap): that error is the
  // statement's.
  bool connection_lost() const { return lost_; }
  // The statement was never sent: the session it needed could not be
  // opened (the server refused it, 53300 too many connections; or could
  // not be reached), or was lost before the statement went out (while
  // preparing it).  A claim that failed so claimed nothing: there is no
  // lost reply to give back (bgexec.unclaim).
  bool unsent() const { return unsent_; }
  void mark_unsent() { unsent_ = true; }
  // core::classify of this error: `connection` exactly when connection_lost().
  core::ErrorClass classify() const;
  // For a data exception (class 22) raised while converting a statement
  // parameter, its number (1-based: "unnamed portal parameter $8" in
  // CONTEXT); else 0.
  std::size_t failed_param() const;
  // The server's hint; for an error saying bgexec's schema, one of its
  // tables or one of its functions does not exist (3F000, 42P01, 42883: the
  // extension is not installed in this database, or was dropped and its
  // schema left), one naming CREATE EXTENSION.  Empty when neither.
  std::string hint() const;

 private:
  std::string sqlstate_;
  Fields fields_;
  bool lost_ = false;
  bool unsent_ = false;
};

// What Connection::query_after throws when its second statement did not
// run, or ran and was rolled back: its first failed, or the connection
// failed before the whole pipeline was sent.  A lost connection is class 08
// (connection_lost()); safe to send both again on a new one.
class SetupError : public Error {
 public:
  explicit SetupError(const Error& e) : Error(e) {}
};

// RAII owner of one PGresult (text format).
class Result {
 public:
  Result() = default;
  explicit Result(pg_result* r);
  Result(Result&&) noexcept = default;
  Result& operator=(Result&&) noexcept = default;

  int rows() const;
  int columns() const;
  // The bytes libpq holds for the result (PQresultMemorySize).
  std::size_t memory() const;
  std::string column_name(int c) const;
  // Column index by name, -1 when absent.
  int column(std::string_view name) const;
  bool is_null(int r, int c) const;
  std::string_view value(int r, int c) const;
  std::optional<std::string> get(int r, int c) const;
  std::optional<std::string> get(int r, std::string_view name) const;
  // Rows as a JSON array of objects; numbers, booleans and json/jsonb keep their type.
  // exact_numbers: numbers as jsonb stores them (core/json_input.hpp,
  // Numbers::exact), a raw number where a double would round them (numeric
  // and json/jsonb hold any precision): numeric and jsonb as the server
  // printed them, json and float8 as numeric would (1e+16 is
  // 10000000000000000), which is how a sql step's rows are stored and read
  // back; for answers to clients and a sql step's rows.  Without it, a
  // double, as a worker reads JSON.  A json/jsonb value nested deeper than
  // max_depth is its text (a string), and *too_deep, when given, names its
  // column.
  nlohmann::json to_json(bool exact_numbers = false, std::size_t max_depth = core::max_stored_json_depth,
                         std::string* too_deep = nullptr) const;

 private:
  struct Deleter {
    void operator()(pg_result* r) const;
  };
  std::unique_ptr<pg_result, Deleter> res_;
};

using Params = std::vector<std::optional<std::string>>;

// UTC ISO 8601 times in SQL (core/sql_time.hpp), as pg::utc_iso.
using core::Time;
using core::utc_iso;

struct Notification {
  std::string channel;
  std::string payload;
};

// The program part of what this process's connections show as
// application_name in pg_stat_activity; main() sets it once ("bgexec
// worker", "bgexec serve", ...), the default is "bgexec".
void set_program(std::string program);

// libpq's keyword/value arrays for PQconnect*Params: the user's conninfo as
// an expanded dbname (key=value or URI, as PQconnectdb takes it) plus
// fallback_application_name "<program> <connection>" ("bgexec worker
// control"), cut to the server's 63 bytes; an application_name in the
// conninfo wins.  Pass expand_dbname = 1.
//
// Before the conninfo (so that it overrides any of them), TCP settings that
// notice a server gone silent (a failover, a host powered off, a NAT or
// firewall that forgot the flow): keepalive probes after 10 s of silence,
// every 5 s, 3 unanswered (keepalives_idle, _interval, _count), and data
// unacknowledged for 30 s (tcp_user_timeout) drop the connection, and the
// worker reconnects.  With the operating system's defaults an idle
// connection to a vanished peer stays open for two hours, and one with a
// statement in flight for about fifteen minutes: a worker would neither
// claim nor heartbeat meanwhile.  Unix sockets ignore them.
// The same values, as libpq's keywords and the server's settings of the same
// names take them; a sql step's transaction sets them on the server's side.
struct TcpDefaults {
  static constexpr const char* keepalives_idle = "10";      // seconds
  static constexpr const char* keepalives_interval = "5";   // seconds
  static constexpr const char* keepalives_count = "3";
  static constexpr const char* tcp_user_timeout = "30000";  // milliseconds
};

// One server of a connection string that names several, tried on its own.
struct HostAttempt {
  std::string host, hostaddr, port;  // empty: not given
};

// How Connection::connect tries a connection string.  libpq bounds each
// server of a multi-host string by connect_timeout in its blocking connect
// only; in PQconnectPoll nothing moves it on from a server that accepts and
// never answers (or drops the SYN), so a bound on the whole attempt spent
// itself on the first server every time and never reached the second: the
// failover README promises ("host=pg1,pg2").  With more than one server,
// each is tried on its own, in order, with its own bound.  `hosts` is empty
// when libpq takes the string whole, in one attempt under `timeout_s`: one
// server, an empty entry in a list (libpq's default socket), host and port
// lists libpq would refuse to pair, target_session_attrs=prefer-standby
// (which ranks all servers at once), or a string it cannot parse (it says
// why at the attempt).
struct ConnectPlan {
  std::vector<HostAttempt> hosts;
  std::vector<std::pair<std::string, std::string>> options;  // every other option given
  int timeout_s = 10;  // per server: connect_timeout (2 at least, as libpq), else 10 shared
};

// Reads `conninfo` (and libpq's PGHOST, PGHOSTADDR, PGPORT,
// PGCONNECT_TIMEOUT and PGTARGETSESSIONATTRS through `env`, where the
// string does not set them).
ConnectPlan connect_plan(const std::string& conninfo,
                         const std::function<const char*(const char*)>& env = ::getenv);

struct ConnectParams {
  // The string whole, expanded by libpq (expand_dbname).
  ConnectParams(const std::string& conninfo, std::string_view connection);
  // One server of a plan: its options, then that server's host, hostaddr and port.
  ConnectParams(const ConnectPlan& plan, const HostAttempt& host, std::string_view connection);
  ConnectParams(const ConnectParams&) = delete;  // keywords and values point into strings_
  ConnectParams& operator=(const ConnectParams&) = delete;
  std::vector<const char*> keywords;  // null-terminated, as libpq takes them
  std::vector<const char*> values;
  int expand_dbname = 1;

 private:
  void add(const char* keyword, std::string value);
  std::deque<std::string> strings_;  // stable addresses
};

// Why libpq would refuse `conninfo` before connecting (an unknown keyword,
// a malformed key=value string or URI), in libpq's words with no part of a
// password in them (redact_passwords); nullopt when it parses.  A bare
// database name (no '=', not a URI) is not parsed: libpq takes it whole as
// dbname.  What the values name (a host, a database, a role) is not
// checked: that takes a connection.
std::optional<std::string> conninfo_error(const std::string& conninfo);

// `msg`, libpq's reason for refusing `conninfo`, with no part of a password
// in it.  libpq quotes what it could not read: a URI whole, or one token.
// A URI's passwords (user:PASSWORD@, ?password= and ?sslpassword= values)
// are found as libpq finds them and read *** wherever the message quotes
// them; in a key=value string that libpq could not split, where a password
// ends is unknown (`password=abc def` is two tokens), so every token after
// a password keyword that the message quotes reads "***"
// (`missing "=" after "***"`), a keyword misspelt there too.  A connect's
// message goes through it too: when a '/' or '@' written raw in a URI's
// password made libpq read the rest of it as host, port or database, those
// pieces read *** wherever they stand as a word, and a hint names the
// escapes (%2F, %40).
std::string redact_passwords(std::string msg, std::string_view conninfo);

// A libpq message on one line: its trailing newline trimmed, its newlines
// and tabs folded into single spaces (for logfmt lines and error objects).
std::string one_line(const char* msg);

// One connection; statements are serialized in FIFO order (one at a time on
// the wire).  Connects lazily.  All waits are asynchronous: nothing blocks
// the event loop except close() of a broken socket.
class Connection {
 public:
  Connection(asio::any_io_executor ex, std::string conninfo, std::string name);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Opens a fresh connection (closing any old one).  Throws a lost Error
  // (class 08) on failure.
  asio::awaitable<void> connect();
  // Hands the connected session's libpq handle to the caller, who must
  // PQfinish it, in blocking mode, its notices logged as on_notice does
  // with no connection name; this Connection is left closed.  What
  // SyncConnection connects with: the same plan of servers, bounds and
  // errors (the server's SQLSTATE when it refused the session).
  pg_conn* release_blocking();
  // Connects in its turn on the wire, under the call bound, unless
  // connected: a connection that must be known to work before a call needs
  // it (the worker's finish and heartbeat connections, whose state decides
  // whether it claims).  A statement of another caller is never cut short.
  // Throws a lost Error (class 08) on failure.
  asio::awaitable<void> open();
  bool connected() const;
  // Whether a connect ever succeeded: a client tells "cannot connect" from
  // a session lost under it.
  bool ever_connected() const { return ever_connected_; }
  // Drops the connection; pending waits end with an Error.
  void close();
  // A bound on every later call (query, query_rows; not the wait for
  // notifications), counted from its turn on the wire, a reconnect
  // included: a call still unanswered when it passes closes the connection
  // (the server ends the statement when it next looks for the client) and
  // throws Error 08006 "... did not answer within N s; connection dropped",
  // connection_lost(), as any lost connection.  Keepalives and
  // tcp_user_timeout catch a server gone silent at the TCP level; this
  // catches one that still acknowledges every packet and answers nothing:
  // a backend stopped or stuck, a proxy holding the session.  0 (the
  // default): no bound.
  // A call that sends more than send_allowance_from bytes (its text and
  // parameters) has a bound longer by send_allowance_per_mib for each MiB
  // it sends: the server parses, stores and logs what it is sent, and a
  // finish of a 15 MB result took 10 s here, past a quarter of the lease;
  // cut at the bound and sent again, it never got through.
  void set_call_timeout(std::chrono::steady_clock::duration bound) { call_timeout_ = bound; }
  static constexpr std::size_t send_allowance_from = 64 * 1024;
  static constexpr std::chrono::microseconds send_allowance_per_mib{2'000'000};
  // Whether query() opens a session the server ended while it sat idle
  // (ended_while_idle) again before sending, rather than fail on it.  Only
  // for a connection whose user keeps no state in its session but what the
  // connection itself restores (prepared statements): a LISTEN, a SET, a
  // temporary table would be gone without a word.  Off by default.
  void set_reopen_when_ended_idle(bool on) { reopen_idle_ = on; }
  // Whether query() closes the connection after a call that sent or
  // received more than recycle_after bytes, outside a transaction (the
  // next call connects again): libpq keeps its buffers at the size of the
  // largest message for the session's life, and a resumed job's 45 MB of
  // completed outputs in one claim row left the worker at 68 MB instead of
  // 11.  For a connection whose session state its user restores (as above;
  // a LISTEN connection whose large calls come only while it is not
  // listening).  Off by default.
  void set_recycle_after_large_calls(bool on) { recycle_large_ = on; }
  static constexpr std::size_t recycle_after = 8u << 20;
  // Whether every connect turns off the server's own bounds on the session:
  // statement_timeout, lock_timeout and idle_in_transaction_session_timeout
  // become 0 (set_config, one round trip per connect) unless the startup
  // `options` (the conninfo's, or PGOPTIONS) name them.  A
  // statement_timeout a DBA sets on every role (ALTER ROLE worker SET
  // statement_timeout = '2s') cancelled the worker's finish of a large
  // result each time it was made again, for as long as the lease lasted.
  // For the worker's own connections, whose calls are bounded by
  // set_call_timeout and whose functions set their own lock_timeout; not
  // for a sql step's session (the owner's settings are its statement's)
  // nor a client's.  Set after connecting, not as a startup `options`,
  // which PgBouncer refuses: behind a transaction-mode pooler it reaches
  // the server session of that connect only.  Off by default.
  void set_own_timeouts(bool on) { own_timeouts_ = on; }
  // Whether every connect turns JIT off for the session (jit = off, in the
  // same set_config round trip as set_own_timeouts), unless the startup
  // `options` name jit.  For sessions whose statements are all short (the
  // gateway's pool, the CLI): with 2 000 queues the planner's estimates
  // for queue_stats put it past jit_above_cost, and compiling it took
  // 1.3 s of a 1.4 s `bgexec queues` (53 ms without), every 3 s for each
  // open dashboard.  Off by default.
  void set_jit_off(bool on) { jit_off_ = on; }
  // Whether every connect sets IntervalStyle = postgres (same round trip),
  // even when the startup `options` name it: for sessions whose interval
  // output is an API's (the gateway's `timeout`, the CLI's status), which
  // followed the login's IntervalStyle ("@ 1 min 30 secs", "PT1M30S").
  // Also fixes how interval input with a sign is read (sql_standard reads
  // "-1 2:00" otherwise).  Off by default.
  void set_interval_style(bool on) { interval_style_ = on; }
  const asio::any_io_executor& executor() const { return ex_; }
  // Runs one statement with text parameters; waits its turn.  Throws Error.
  // `prepare`: as a named prepared statement, parsed and planned once per
  // session (the hot worker calls).  When the server loses it (SQLSTATE
  // 26000: a transaction-mode pooler switched server connections) the
  // statement runs as text instead, and so does every later one on this
  // connection.
  asio::awaitable<Result> query(const std::string& sql, const Params& params = {}, bool prepare = false);
  // Runs `setup` (as a prepared statement, as query's `prepare` does) and
  // then `sql` (as text) in one round trip: libpq's pipeline mode, both up
  // to one sync, so one implicit transaction that commits after `sql`.
  // `sql` runs only when `setup` succeeded: after an error the server skips
  // the rest of the pipeline.  Returns sql's result.  Throws SetupError
  // when `setup` failed or the connection failed before all was sent
  // (nothing committed), Error when `sql` failed or the connection broke
  // before `setup` was answered (`sql` may have committed).  Before
  // sending, a session the server closed while it sat idle (a restart,
  // pg_terminate_backend: its FATAL or the end of the stream is waiting on
  // the socket) is replaced by a new one, so neither statement is lost on it.
  asio::awaitable<Result> query_after(const std::string& setup, const Params& setup_params,
                                      const std::string& sql, const Params& params);
  // Runs one statement as text in single-row mode and returns its rows as
  // Result::to_json(true) does (numbers as the server printed them: a sql
  // step's output), never holding more than max_bytes of them: past
  // that (the rows' size as JSON text: values, column names, punctuation)
  // the connection is closed, so the server rolls the transaction back, and
  // Error 54000 is thrown (not connection_lost(): the statement's error; the
  // next call reconnects).  So is a json/jsonb value nested deeper than
  // max_json_depth - 2 levels (the rows, an array of objects, would nest
  // past max_json_depth).
  asio::awaitable<nlohmann::json> query_rows(const std::string& sql, const Params& params,
                                             std::size_t max_bytes);
  // Waits until notifications arrive (after LISTEN); throws Error when the connection breaks.
  asio::awaitable<std::vector<Notification>> wait_notifications();
  // Asks the server to cancel the statement in flight (PQcancel, on a
  // detached thread: it connects to the server and waits for the reply).
  // One at a time per Connection: while one is still waiting (a server
  // that accepts and never answers) another is not sent.
  void cancel();
  const std::string& name() const { return name_; }
  // Where the server's notices (RAISE NOTICE, warnings) go instead of the
  // worker's log: a sql step makes them the job's log events, masked and
  // capped like its other output (unset: the log, as "server notice").
  void set_notice_sink(std::function<void(std::string)> sink) { notice_sink_ = std::move(sink); }

 private:
  // Runs `call` in its turn on the wire, under the call bound (longer when
  // `sent`, the bytes of its statements and parameters, is large: see
  // set_call_timeout).  unanswered(): the error of a call that outlived it.
  template <class T>
  asio::awaitable<T> in_turn(asio::awaitable<T> call, std::size_t sent = 0);
  Error unanswered(std::chrono::steady_clock::duration bound) const;
  static void on_notice(void* arg, const char* message);
  asio::awaitable<void> open_locked();
  // sent: the bytes the call sends (sent_bytes), counted once by query().
  asio::awaitable<Result> query_locked(const std::string& sql, const Params& params, bool prepare,
                                       std::size_t sent);
  asio::awaitable<Result> query_after_locked(const std::string& setup, const Params& setup_params,
                                             const std::string& sql, const Params& params);
  asio::awaitable<std::string> prepared_name(const std::string& sql, int params);
  bool closed_while_idle() const;
  std::optional<std::string> ended_while_idle() const;
  void prepared_lost(const Error& err);
  static bool plan_changed(const Error& err);
  asio::awaitable<std::string> prepare_again(const std::string& sql, int params, const std::string& stmt);
  asio::awaitable<nlohmann::json> query_rows_locked(const std::string& sql, const Params& params,
                                                    std::size_t max_bytes);
  asio::awaitable<void> wait(bool write);
  void attach_socket();
  [[noreturn]] void fail(const std::string& what);
  // One connection attempt under its bound: nullopt once connected, else
  // why not (the connection closed).  Throws when interrupted (close()).
  struct AttemptFailed {
    std::string message;
    bool timed_out = false;
    std::string sqlstate;  // the server's, when it refused the session (53300 ...)
  };
  asio::awaitable<std::optional<AttemptFailed>> attempt(const ConnectParams& params, int timeout_s);
  asio::awaitable<void> connect_any();
  asio::awaitable<void> set_own_settings_now();
  std::vector<Notification> drain_notifies();
  static std::string statement_name(const std::string& sql);
  static std::vector<const char*> c_values(const Params& params);
  void send_text(const std::string& sql, const std::vector<const char*>& values);
  asio::awaitable<void> flush_out();
  asio::awaitable<Result> read_results(std::optional<Error>& err,
                                       const std::function<void(Result)>& on_row = {});

  asio::any_io_executor ex_;
  std::string conninfo_;
  std::string name_;
  std::function<void(std::string)> notice_sink_;
  pg_conn* conn_ = nullptr;
  std::unique_ptr<asio::posix::stream_descriptor> sd_;
  int fd_ = -1;
  FifoLock order_;  // one statement at a time on the wire, in FIFO order
  std::shared_ptr<std::atomic<bool>> cancelling_ = std::make_shared<std::atomic<bool>>(false);
  bool prepare_ok_ = true;
  std::chrono::steady_clock::duration call_timeout_{0};
  bool reopen_idle_ = false;
  bool recycle_large_ = false;
  bool own_timeouts_ = false;
  bool jit_off_ = false;
  bool interval_style_ = false;
  bool ever_connected_ = false;
  std::set<std::string> prepared_;
};

// A bound on a call on `conn`, for as long as the Deadline lives: once
// `after` has passed, the statement is cancelled and the connection closed,
// so the wait in flight ends with an Error, and fired() tells the caller
// why.  The cancel is for the server: a backend waiting for a synchronous
// standby, or for a lock, does not notice its client has gone, and a
// worker whose calls timed out every few seconds left one such backend
// behind each time, until the server's connections ran out.  A bound of zero (or
// less) is none.  The state is shared with the timer's handler, which may
// run after the Deadline is gone.  Connection's call bound and the
// gateway's pool use it.
class Deadline {
 public:
  Deadline(Connection& conn, std::chrono::steady_clock::duration after);
  ~Deadline();
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;
  bool fired() const { return state_->fired; }

 private:
  struct State {
    bool done = false, fired = false;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
  asio::steady_timer timer_;
};

}  // namespace bgexec::pg
