// The HTTP gateway (see gateway.hpp and README-http.md).
#include "http/gateway.hpp"

#include "core/duration.hpp"
#include "core/event_batch.hpp"
#include "core/events_page.hpp"
#include "core/json_input.hpp"
#include "core/logfmt.hpp"
#include "core/many.hpp"
#include "core/number.hpp"
#include "core/numeric.hpp"
#include "core/timestamp.hpp"
#include "core/utf8.hpp"
#include "http/assets.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <set>

namespace bgexec::http {

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t max_body = 1 << 20;       // 413 above 1 MiB
constexpr auto keepalive_every = 15s;           // SSE comment while idle
constexpr auto poll_every = 3s;                 // SSE safety net when a NOTIFY is missed
constexpr int replay_batch = 1000;              // events per bgexec.events() fetch, at most
constexpr int replay_batch_bytes = 256 * 1024;  // and their data's text up to this (one event at least)

// A request-level failure with its HTTP status and the SQLSTATE reported in the body.
struct HttpError {
  HttpError(bhttp::status st, std::string state, std::string msg, std::string det = {}, std::string hin = {})
      : status(st), sqlstate(std::move(state)), message(std::move(msg)), detail(std::move(det)),
        hint(std::move(hin)) {}
  bhttp::status status;
  std::string sqlstate;
  std::string message;
  std::string detail, hint;  // the database's DETAIL and HINT, when it gave them
  std::string allow;         // 405: the methods the path takes
};

// Maps a database error to the HTTP status the README documents.  Class 22
// (data exception: a value's syntax, range or encoding) and class 54
// (program limit exceeded: too long, nested too deep) are always the
// request's own values, like a violated CHECK (23514) or NOT NULL (23502).
bhttp::status status_for(const std::string& st) {
  if (st == "P0002") return bhttp::status::not_found;
  if (st.rfind("22", 0) == 0 || st.rfind("54", 0) == 0 || st == "23514" || st == "23502")
    return bhttp::status::unprocessable_entity;
  if (st == "53400") return bhttp::status::too_many_requests;
  if (st == "55006") return bhttp::status::conflict;  // run_schedule while its last run's job is unfinished
  if (st == "55000") return bhttp::status::conflict;  // reschedule of a job that is not queued
  // retry of an ended job whose unique_key another active job holds: the
  // state of the tenant's jobs, as a refused retry's 409, not a fault (500)
  if (st == "23505") return bhttp::status::conflict;
  if (st == "57014") return bhttp::status::gateway_timeout;  // --statement-timeout (or a cancel)
  if (st == "42501") return bhttp::status::forbidden;
  // 25006: a write on a hot standby (the gateway's conninfo names one, or a
  // failover is under way): the database's state, not the request's.  Class
  // 53 (53000 insufficient resources, 53100 disk full, 53200 out of memory,
  // 53300 too many connections): the server short of a resource, which
  // passes; a submit on a full disk answered a bare 500.
  if (st.rfind("08", 0) == 0 || st == "57P01" || st == "57P02" || st == "57P03" || st.rfind("53", 0) == 0 ||
      st == "25006")
    return bhttp::status::service_unavailable;
  return bhttp::status::internal_server_error;
}

// Serializes a response body with core::dump: invalid UTF-8 (an error
// message quoting the request, text from a SQL_ASCII database) becomes U+FFFD
// instead of an exception that would leave the request without an answer.
using core::dump;

Response make_json(unsigned version, bhttp::status status, const json& body) {
  Response res{status, version};
  res.set(bhttp::field::server, "bgexec");
  res.set(bhttp::field::content_type, "application/json");
  res.set(bhttp::field::cache_control, "no-store");
  res.set("X-Content-Type-Options", "nosniff");
  res.body() = dump(body) + "\n";
  return res;
}

// The dashboard's headers.  Its page acts with the token it keeps in
// localStorage, so another site must not frame it and have a user click
// its buttons (stop, delete, pause) unawares: frame-ancestors 'none' and,
// for older browsers, X-Frame-Options.  Its script and style come from its
// own files only (no inline code, no eval), so the policy allows nothing
// else: a value a tenant controls that ever reached the page as markup
// could run no script.  nosniff keeps each file the type it is served as.
void dashboard_headers(Response& res) {
  res.set("Content-Security-Policy",
          "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
          "base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  res.set("X-Frame-Options", "DENY");
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Referrer-Policy", "no-referrer");
}

Response make_error(unsigned version, const HttpError& e) {
  json err{{"sqlstate", e.sqlstate}, {"message", e.message}};
  if (!e.detail.empty()) err["detail"] = e.detail;
  if (!e.hint.empty()) err["hint"] = e.hint;
  auto res = make_json(version, e.status, json{{"error", err}});
  // Too many of the caller's own, or the gateway short of a resource (class 53).
  if (e.status == bhttp::status::too_many_requests ||
      (e.status == bhttp::status::service_unavailable &&
       (e.sqlstate.rfind("53", 0) == 0 || e.sqlstate == "25006")))
    res.set(bhttp::field::retry_after, "5");
  if (e.status == bhttp::status::unauthorized)
    res.set(bhttp::field::www_authenticate, "Bearer realm=\"bgexec\"");
  if (!e.allow.empty()) res.set(bhttp::field::allow, e.allow);
  return res;
}

// A database error as the client sees it: the server's primary message (its
// CONTEXT, a PL/pgSQL call stack, stays out), prefixed with the request field
// it is about when `params` names the statement's parameters.
HttpError from_pg(const pg::Error& e, const std::vector<std::string>& params = {}) {
  const auto& f = e.fields();
  std::string msg = f.primary;
  if (msg.empty()) {  // not from the server: a lost connection, say
    msg = e.what();
    if (msg.rfind("ERROR:  ", 0) == 0) msg = msg.substr(8);
  }
  if (auto n = e.failed_param(); n >= 1 && n <= params.size() && !params[n - 1].empty())
    msg = params[n - 1] + ": " + msg;
  auto status = status_for(e.sqlstate());
  if (status == bhttp::status::service_unavailable && f.primary.empty()) {
    // libpq's own text names the server's socket path or address and the
    // pool connection: the operator's to read in the log, not a tenant's.
    // One line per 10 s: a dashboard refreshes every 3 s, each of its
    // requests failing while the database is away.
    static core::LogThrottle throttle(std::chrono::seconds(10));
    if (std::size_t skipped = 0; throttle.allow(&skipped))
      core::log("warn", "database unavailable",
                {{"error", msg}, {"sqlstate", e.sqlstate()}, {"skipped", std::to_string(skipped)}});
    msg = "the gateway cannot reach the database (its log says why); try again";
  }
  if (status == bhttp::status::service_unavailable && !f.primary.empty() && e.sqlstate().rfind("53", 0) == 0) {
    // The server out of disk, memory or connections: the operator's to
    // hear of too, not only the client that got the 503.  One line per 10 s.
    static core::LogThrottle throttle(std::chrono::seconds(10));
    if (std::size_t skipped = 0; throttle.allow(&skipped))
      core::log("warn", "database short of a resource",
                {{"error", msg}, {"sqlstate", e.sqlstate()}, {"skipped", std::to_string(skipped)}});
  }
  if (status == bhttp::status::service_unavailable) msg = "database unavailable: " + msg;
  if (status == bhttp::status::gateway_timeout) msg = "database statement timed out: " + msg;
  return {status, e.sqlstate(), msg, f.detail, e.hint()};
}

// How long a response or an event batch of this many bytes may take to
// reach the client's socket: 30 s, and one more per 16 KiB.  A flat 30 s
// cut a reader of 40 kB/s off in the middle of a 9 MB step output, at the
// same place on every reconnect, so it never got past that event.
std::chrono::steady_clock::duration write_deadline(std::size_t bytes) {
  return std::chrono::seconds(30 + bytes / (16 * 1024));
}

// 120 s, 1.5 s, 0.25 s: a duration of whole milliseconds as a message says it.
std::string seconds_text(std::chrono::milliseconds d) {
  std::string s = std::to_string(d.count() / 1000);
  if (const auto ms = d.count() % 1000) {
    std::string frac = std::to_string(1000 + ms).substr(1);
    while (frac.back() == '0') frac.pop_back();
    s += "." + frac;
  }
  return s + " s";
}

HttpError http_error(bhttp::status status, std::string sqlstate, std::string message) {
  return HttpError{status, std::move(sqlstate), std::move(message)};
}
HttpError bad_request(std::string msg) { return {bhttp::status::bad_request, "08P01", std::move(msg)}; }
HttpError invalid(std::string msg) {
  return {bhttp::status::unprocessable_entity, "22023", std::move(msg)};
}
HttpError not_found(std::string msg) { return {bhttp::status::not_found, "P0002", std::move(msg)}; }
HttpError method_not_allowed(std::string allow) {
  HttpError e{bhttp::status::method_not_allowed, "08P01", "method not allowed"};
  e.allow = std::move(allow);
  return e;
}
// A request string holding U+0000: a text parameter would be cut at it
// (libpq takes C strings) and jsonb refuses it (22021: character_not_in_repertoire).
HttpError nul_in(const std::string& what) {
  return {bhttp::status::unprocessable_entity, "22021", what + " must not contain NUL (\\u0000)"};
}
// A request value holding a number PostgreSQL's numeric refuses
// (1e-16384; 22003: numeric_value_out_of_range).  Found here, where the
// field is known: the database's own "value overflows numeric format" was
// pinned on the field whose cast read the body, the payload, whichever
// field held the number.
HttpError unstorable_in(const std::string& what, const std::string& number) {
  return {bhttp::status::unprocessable_entity, "22003", what + " holds " + core::numeric_refuses(number)};
}
// A request value nested past core::max_json_depth (54000: program_limit_exceeded).
HttpError too_deep(const std::string& what) {
  return {bhttp::status::unprocessable_entity, "54000",
          what + " nested deeper than " + std::to_string(core::max_json_depth) + " levels"};
}
// A request body with a key twice in one object: one of the values would
// win unnoticed (as a query parameter given twice would), so it is refused,
// naming the key and its object (`what`, then the path from its top).
HttpError duplicate_key(const core::JsonInput& in, const std::string& what) {
  return bad_request("duplicate key " + core::dump(in.key) + " in " + what +
                     (in.path.empty() ? "" : " at " + in.path));
}

int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes a query component ('+' is a space) or, with
// plus_is_space false, a path segment ('+' is itself).
std::string url_decode(std::string_view s, bool plus_is_space = true) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+' && plus_is_space) {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() + 0 && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
      out += static_cast<char>(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

using core::valid_utf8;  // well-formed UTF-8: what PostgreSQL and JSON accept as text

// A name in the path (a schedule's, a queue's: `what`): percent-decoded, as
// clients escape ':' (encodeURIComponent), which a name may hold; decoded,
// checked as a query value is.
std::string path_name(const std::string& segment, const std::string& what) {
  std::string name = url_decode(segment, false);
  if (!valid_utf8(name)) throw bad_request(what + " name in the path is not valid UTF-8");
  if (name.find('\0') != std::string::npos) throw nul_in("name");
  return name;
}

// parse_query marks a parameter given more than once with a key of this
// prefix and its name, which no route takes, so the /v1 routes refuse it
// (unknown_param) rather than let one of the values win silently
// (?status=failed&status=queued).
const std::string repeated_prefix = "\x01repeated ";

std::map<std::string, std::string> parse_query(std::string_view q) {
  std::map<std::string, std::string> out;
  auto put = [&out](std::string k, std::string v) {
    // No route takes a name with a control character: as U+FFFD, so that
    // a name sent as %01repeated%20limit is unknown, not "limit given twice".
    if (std::any_of(k.begin(), k.end(), [](char c) { return (c >= 0 && c < 0x20) || c == 0x7f; })) {
      std::string shown;
      for (char c : k) shown += (c >= 0 && c < 0x20) || c == 0x7f ? std::string("\xEF\xBF\xBD") : std::string(1, c);
      k = std::move(shown);
    }
    if (out.count(k)) out[repeated_prefix + k];
    out[std::move(k)] = std::move(v);
  };
  while (!q.empty()) {
    auto amp = q.find('&');
    auto part = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view{} : q.substr(amp + 1);
    if (part.empty()) continue;
    auto eq = part.find('=');
    if (eq == std::string_view::npos)
      put(url_decode(part), "");
    else
      put(url_decode(part.substr(0, eq)), url_decode(part.substr(eq + 1)));
  }
  return out;
}

// The path and the decoded query must be UTF-8: they are quoted in error
// messages and passed to the database as text.  The path is matched as sent
// (not percent-decoded; only a schedule's name is, and checked where it is),
// so only raw bytes can make it invalid.  A value must not hold NUL either
// (%00), which a text parameter would be cut at.
std::optional<HttpError> check_text(const std::string& path, const std::map<std::string, std::string>& qs) {
  if (!valid_utf8(path)) return bad_request("request path is not valid UTF-8");
  for (const auto& [k, v] : qs) {
    if (!valid_utf8(k)) return bad_request("a query parameter name is not valid UTF-8");
    if (!valid_utf8(v)) return bad_request("query parameter \"" + k + "\" is not valid UTF-8");
    if (v.find('\0') != std::string::npos) return nul_in("query parameter \"" + k + "\"");
  }
  return std::nullopt;
}

// The query parameters each route takes.
const std::set<std::string> no_params;
const std::set<std::string> list_params = {"queue", "kind", "status", "before", "limit"};  // GET /v1/jobs
const std::set<std::string> event_params = {"after", "token"};
const std::set<std::string> workers_params = {"all"};  // GET /v1/workers

// An unknown query parameter is refused rather than ignored: a misspelt
// filter or cursor would otherwise pass silently.
std::optional<HttpError> unknown_param(const std::map<std::string, std::string>& qs,
                                       const std::set<std::string>& known) {
  for (const auto& [k, v] : qs) {
    if (k.rfind(repeated_prefix, 0) == 0)
      return bad_request("query parameter \"" + k.substr(repeated_prefix.size()) + "\" is given more than once");
    if (!known.count(k)) return bad_request("unknown query parameter \"" + k + "\"");
  }
  return std::nullopt;
}
void check_params(const std::map<std::string, std::string>& qs, const std::set<std::string>& known) {
  if (auto e = unknown_param(qs, known)) throw *e;
}

// The body of a route that takes none (stop, retry, a schedule's pause, run,
// resume and DELETE): empty, or an object without fields.  Anything else is
// refused as a submit's bad body is, so options a client means to pass (or a
// body meant for another route) are not dropped while the action goes ahead.
// Read one level deep only: a member of any value is already one too many.
void check_no_body(const std::string& body) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return;
  auto in = core::parse_json_input(body, 1);
  // A member holding a number past a double's range is one too many as well.
  if (in.error == core::JsonInput::Error::too_deep || in.error == core::JsonInput::Error::number_out_of_range) {
    if (in.field.empty()) throw bad_request("request body must be a JSON object");
    throw bad_request("unknown field \"" + in.field + "\"");
  }
  if (!in) throw bad_request("request body is not valid JSON: " + in.message);
  if (!in.value.is_object()) throw bad_request("request body must be a JSON object");
  if (!in.value.empty()) throw bad_request("unknown field \"" + in.value.begin().key() + "\"");
}

// Whether a request names a job's event stream (/v1/jobs/{id}/events, any
// id, any method): where ?token= is a token, for browsers' EventSource,
// which cannot send headers.
bool events_path(const std::vector<std::string>& seg) {
  return seg.size() == 4 && seg[0] == "v1" && seg[1] == "jobs" && seg[3] == "events";
}

// A request whose token is ambiguous: the Authorization header given twice,
// or on the event stream ?token= given twice or beside the header.  One
// would win unnoticed, so it is refused before any token is looked up,
// saying nothing of the API (as a query that is not UTF-8 is).
std::optional<HttpError> ambiguous_token(const Request& req, const std::vector<std::string>& seg,
                                         const std::map<std::string, std::string>& qs) {
  if (req.count(bhttp::field::authorization) > 1)
    return bad_request("the Authorization header is given more than once");
  if (!events_path(seg) || !qs.count("token")) return std::nullopt;
  if (qs.count(repeated_prefix + "token")) return bad_request("query parameter \"token\" is given more than once");
  if (req.count(bhttp::field::authorization))
    return bad_request("a token is given both in the Authorization header and as ?token=");
  return std::nullopt;
}

// Strict decimal parse of the whole string (at most 19 characters).
std::optional<std::int64_t> parse_int(std::string_view s) {
  if (s.size() > 19) return std::nullopt;
  return core::parse_integer(s, INT64_MIN, INT64_MAX);
}

// Splits "/v1/jobs/42/stop" into segments.
std::vector<std::string> segments(std::string_view path) {
  std::vector<std::string> out;
  while (!path.empty()) {
    if (path.front() == '/') {
      path.remove_prefix(1);
      continue;
    }
    auto slash = path.find('/');
    out.emplace_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash);
  }
  return out;
}

bool is_stream_end(std::string_view kind) {
  return kind == "completed" || kind == "failed" || kind == "cancelled" || kind == "timed_out" ||
         kind == "suspended";
}

// {k: v} and {k1: v1, k2: v2}, built outside coroutines (GCC 12 miscompiles
// braced JSON initializers holding string literals inside coroutine frames).
json kv(const std::string& k, json v) {
  json o = json::object();
  o[k] = std::move(v);
  return o;
}
json kv(const std::string& k1, json v1, const std::string& k2, json v2) {
  json o = kv(k1, std::move(v1));
  o[k2] = std::move(v2);
  return o;
}

// Statement parameters, built outside coroutines (an initializer_list inside a
// co_await expression trips the same GCC 12 bug).
pg::Params args(std::optional<std::string> a) {
  pg::Params p;
  p.push_back(std::move(a));
  return p;
}
pg::Params args(std::optional<std::string> a, std::optional<std::string> b) {
  pg::Params p = args(std::move(a));
  p.push_back(std::move(b));
  return p;
}

// A table's columns as the API answers them: `times` through pg::utc_iso,
// UTC ISO 8601 to the microsecond whatever the login role's DateStyle and
// TimeZone (SELECT * answered them in those: "12/06/2026 19:13:03.914461
// EST" under DateStyle SQL in America/New_York, "2026-12-06
// 22:59:37.51726+01" in Europe/Berlin).  A column the table gains is
// answered once it is listed here (http test api checks the job's).
std::string columns(const std::string& alias, std::initializer_list<const char*> plain,
                    std::initializer_list<const char*> times) {
  std::string out;
  for (const char* c : plain) out += (out.empty() ? "" : ", ") + alias + "." + c;
  for (const char* c : times)
    out += ", " + pg::utc_iso(alias + "." + c, pg::Time::json) + " AS " + c;
  return out;
}
std::string job_columns(const std::string& alias) {
  return columns(alias,
                 {"id", "queue", "kind", "owner", "priority", "status", "payload", "result", "error", "attempt",
                  "max_attempts", "timeout", "idempotency_key", "unique_key", "concurrency_key", "lease", "lease_owner",
                  "last_seq"},
                 {"run_after", "deadline", "lease_expires_at", "stop_requested_at", "created_at", "started_at",
                  "finished_at"});
}
const std::string schedule_columns =
    columns("s",
            {"owner", "name", "cron", "kind", "payload", "queue", "priority", "max_attempts", "timeout",
             "concurrency_key", "time_zone", "overlap", "paused", "last_job_id", "last_error"},
            {"next_run_at", "last_run_at", "created_at"});

// A batch of a stream's events: up to $3 (replay_batch at most), cut by
// size (core::events_page_sql).
const std::string events_sql = core::events_page_sql(replay_batch_bytes);
// A new stream's read of its job's row, when it has nothing after its cursor.
const std::string job_end_sql = "SELECT status::text, last_seq FROM bgexec.job WHERE id = $1::bigint";
// The sweep (Gateway::sweep_streams): for each (job, position, created_at of
// the event read there) of a role's streams, the job's status and last_seq,
// and whether its log was rewound at the position (core::rewind_check_sql's
// test; the stream's own check then finds where to resume).  No row: the
// job is gone, or hidden from the role.
const std::string sweep_sql =
    "SELECT s.i, j.status::text, j.last_seq,"
    " CASE WHEN s.cur > 0 AND (s.created IS NOT NULL OR j.last_seq < s.cur) AND NOT EXISTS ("
    "        SELECT 1 FROM bgexec.events(s.job, s.cur - 1, 1) e"
    "        WHERE e.seq = s.cur AND (s.created IS NULL OR e.created_at = s.created::timestamptz))"
    "      THEN true ELSE false END AS rewound"
    " FROM jsonb_to_recordset($1::jsonb) AS s(i int, job bigint, cur int, created text)"
    " JOIN bgexec.job j ON j.id = s.job";

// Whether a stream's reader has gone: it sends nothing after its request,
// so its socket at end of file, or in error (reset), means it closed.
// Bytes it sent anyway are read and dropped (the stream owns the connection
// to its end).  Never waits.
bool reader_left(beast::tcp_stream& stream, std::size_t* dropped = nullptr) {
  std::array<char, 512> sink{};
  beast::error_code ec;
  stream.socket().non_blocking(true, ec);
  const auto n = stream.socket().read_some(asio::buffer(sink), ec);
  if (dropped && !ec) *dropped += n;
  return ec != asio::error::would_block && (ec || n == 0);
}

// GET /v1/jobs's parameters, by position, for from_pg.
const std::vector<std::string> list_fields = {"queue", "status", "before", "limit", "kind"};
// The most bytes of payloads, results and errors one page of GET /v1/jobs
// holds (its first job whatever its size; next_before continues it).
constexpr std::int64_t list_page_bytes = 4 * 1024 * 1024;
// POST /v1/jobs/stop|retry's (core::many_sql).
const std::vector<std::string> many_fields = {"queue", "kind", "status", "after", "limit"};
// POST /v1/jobs/{id}/resume's.
const std::vector<std::string> resume_fields = {"id", "resume input"};

// The longest numeric timeout: 100 years as PostgreSQL compares intervals
// (36000 days of 86400 s), the extension's cap.  Larger values also
// overflowed make_interval into a negative interval.
constexpr double max_timeout_seconds = 36000.0 * 86400;

// Whether a JSON number's text is a whole number: no digit other than 0
// after the decimal point once the exponent moves it (1e3 and 2.50e1 are,
// 1.0000000000000001 is not, although a double reads it as 1).
bool whole_number_text(std::string_view t) {
  if (!t.empty() && t[0] == '-') t.remove_prefix(1);
  const auto e = t.find_first_of("eE");
  long long exp = 0;
  if (e != std::string_view::npos) {
    std::string_view x = t.substr(e + 1);
    if (!x.empty() && x[0] == '+') x.remove_prefix(1);
    const auto [end, ec] = std::from_chars(x.data(), x.data() + x.size(), exp);
    if (ec != std::errc{} || end != x.data() + x.size()) return false;  // past long long: no int field's
    // (a JSON number's text is far shorter: bounded, point's sum below cannot overflow)
    exp = std::clamp(exp, -1000000LL, 1000000LL);
    t = t.substr(0, e);
  }
  const auto dot = t.find('.');
  std::string digits(t.substr(0, dot));
  const long long point = static_cast<long long>(digits.size()) + exp;  // digits before the point
  if (dot != std::string_view::npos) digits += t.substr(dot + 1);
  for (long long i = std::max(point, 0LL); i < static_cast<long long>(digits.size()); ++i)
    if (digits[static_cast<std::size_t>(i)] != '0') return false;
  return true;
}

// A JSON number that is a whole number (2, 2.0, 1e3; a raw number by its
// text; 1e20, which JavaScript writes as 100000000000000000000, arrives as a
// double): `whole`, and its value when it lies in [min, max].  Not whole
// (1.5, a string): `whole` false.
struct WholeNumber {
  bool whole = false;
  std::optional<std::int64_t> value;  // none: whole, but out of [min, max]
};
WholeNumber whole_number(const json& v, std::int64_t min, std::int64_t max) {
  const bool raw = core::is_raw_number(v);
  const auto d = core::number_of(v);
  WholeNumber w;
  w.whole = raw ? whole_number_text(core::raw_number_text(v))
                : v.is_number_integer() || (v.is_number_float() && d && std::isfinite(*d) && std::trunc(*d) == *d);
  if (!w.whole) return w;
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) &&
        static_cast<std::int64_t>(u) >= min && static_cast<std::int64_t>(u) <= max)
      w.value = static_cast<std::int64_t>(u);
  } else if (v.is_number_integer()) {
    if (v.get<std::int64_t>() >= min && v.get<std::int64_t>() <= max) w.value = v.get<std::int64_t>();
  } else if (d && *d >= static_cast<double>(min) && *d <= static_cast<double>(max) && *d < 0x1p63) {
    w.value = static_cast<std::int64_t>(*d);  // a double, or a raw number (1e400: none)
  }
  return w;
}

// A request body that must be a JSON object of the `known` fields, else
// the 400 (or 422 for a member nested too deep, or holding a number past a
// double's range) saying why.  One level more than the limit: the body
// object itself, so a payload may nest max_json_depth levels of its own.
// Numbers exact: an int field's 1.0000000000000001 is no integer, though a
// double reads it as 1.
json body_object(const std::string& text, const std::set<std::string>& known) {
  auto in = core::parse_json_input(text, core::max_json_depth + 1, core::DuplicateKeys::refuse, core::Numbers::exact);
  if (in.error == core::JsonInput::Error::duplicate_key) throw duplicate_key(in, "the request body");
  if (in.error == core::JsonInput::Error::too_deep) {
    // Unnamed: the limit was hit outside any member, so the body is an array.
    if (in.field.empty()) throw bad_request("request body must be a JSON object");
    throw too_deep(in.field);
  }
  if (!in && in.error != core::JsonInput::Error::number_out_of_range)
    throw bad_request("request body is not valid JSON: " + in.message);
  if (!in.value.is_object()) throw bad_request("request body must be a JSON object");
  for (auto it = in.value.begin(); it != in.value.end(); ++it)
    if (!known.count(it.key())) throw bad_request("unknown field \"" + it.key() + "\"");
  // Found by the parser, where the field is known, so named with it, as
  // the SQL functions raise it (22003): nlohmann stops at such a number,
  // and the whole body was a 400 syntax error.
  if (in.error == core::JsonInput::Error::number_out_of_range)
    throw http_error(bhttp::status::unprocessable_entity, "22003",
                     in.path + " holds " + core::double_refuses(in.number));
  return std::move(in.value);
}

// POST /v1/jobs/stop|retry's body: {"queue", "kind", "status", "after",
// "limit"}, at least one of the first three; the statement's parameters
// (core::many_sql) and the batch's limit.
struct Many {
  pg::Params params;
  std::int64_t limit = 500;
};
Many parse_many(const std::string& body_text, bool retry) {
  // (an empty body is an object without fields, as for the routes that take none)
  const std::string text = body_text.find_first_not_of(" \t\r\n") == std::string::npos ? "{}" : body_text;
  static const std::set<std::string> known = {"queue", "kind", "status", "after", "limit"};
  const json body = body_object(text, known);
  auto str = [&](const char* f) -> std::optional<std::string> {
    if (!body.contains(f) || body[f].is_null()) return std::nullopt;
    if (!body[f].is_string()) throw invalid(std::string(f) + " must be a string");
    auto v = body[f].get<std::string>();
    if (v.find('\0') != std::string::npos) throw nul_in(f);
    return v;
  };
  // A whole number (2, 2.0, 1e2) from lo to hi, as submit's int fields.
  auto integer = [&](const char* f, std::int64_t lo, std::int64_t hi, std::int64_t dflt) -> std::int64_t {
    if (!body.contains(f) || body[f].is_null()) return dflt;
    const std::string range = std::string(f) + " must be an integer from " + std::to_string(lo) + " to " +
                              std::to_string(hi);
    const auto w = whole_number(body[f], lo, hi);
    if (!w.whole) throw invalid(range);
    if (!w.value) throw http_error(bhttp::status::unprocessable_entity, "22003", range);
    return *w.value;
  };
  Many m;
  auto queue = str("queue"), kind = str("kind");
  std::string statuses;
  if (body.contains("status") && !body["status"].is_null()) {
    const auto& st = body["status"];
    std::vector<std::string> named;
    if (st.is_string()) {
      named.push_back(st.get<std::string>());
    } else if (st.is_array() && !st.empty()) {
      for (const auto& e : st) {
        if (!e.is_string()) throw invalid("status must be a string or an array of strings");
        named.push_back(e.get<std::string>());
      }
    } else {
      throw invalid("status must be a string or a non-empty array of strings");
    }
    std::set<std::string> seen;
    for (const auto& n : named) {
      if (!core::many_statuses(retry).count(n))
        throw invalid(std::string("status: ") + (retry ? "retry" : "stop") + " acts on " +
                      core::many_statuses_text(retry) + " jobs, got " + core::dump(json(n)));
      if (seen.insert(n).second) statuses += (statuses.empty() ? "" : ",") + n;
    }
  }
  if (!queue && !kind && statuses.empty())
    throw invalid("give at least one of queue, kind and status: the jobs to " + std::string(retry ? "retry" : "stop"));
  if (statuses.empty()) statuses = core::many_default_statuses(retry);
  const auto after = integer("after", 0, std::numeric_limits<std::int64_t>::max(), 0);
  m.limit = integer("limit", 1, 500, 500);
  m.params = {queue, kind, statuses, std::to_string(after), std::to_string(m.limit)};
  return m;
}

// POST /v1/jobs/stop|retry's answer from core::many_sql's row: next_after
// when the batch was full (there may be more), else null.
json many_answer(const pg::Result& r, bool retry, std::int64_t limit) {
  const auto count = [&](int col) { return std::stoll(r.get(0, col).value_or("0")); };
  json o = json::object();
  o["matched"] = count(2);
  if (retry) {
    o["retried"] = count(0);
  } else {
    o["cancelled"] = count(0);
    o["stop_requested"] = count(1);
  }
  o["next_after"] = count(2) == limit ? json(std::stoll(r.get(0, 3).value_or("0"))) : json(nullptr);
  return o;
}

struct Submit {
  std::string sql;
  pg::Params params;
  std::vector<std::string> fields;  // request field of each parameter
};

// A body's run_after (POST /v1/jobs, POST /v1/jobs/{id}/reschedule): the
// statement parameter and the SQL expression that takes it (`?` for it).
struct RunAfterParam {
  std::string value, expr;
};
RunAfterParam run_after_param(const std::string& r) {
  // Read here, not by the session's DateStyle and TimeZone ("08/12/2026
  // 03:00" was August at UTC, December in IST): an RFC 3339 time with
  // its offset, or "+DUR" after now() on the database's clock (a day is
  // 86 400 s), so a client's clock never enters the schedule.
  const auto bad = [&] {
    return http_error(bhttp::status::unprocessable_entity, "22007",
                      "run_after must be an RFC 3339 time with an offset or Z (2026-12-08T03:00:00Z, "
                      "2026-12-08T08:30:00+05:30) or +DUR (+90, +30s, +5m, +2h, +1d): was \"" +
                          core::utf8_cut(r, 100, "...") + "\"");
  };
  if (r.find('\0') != std::string::npos) throw nul_in("run_after");
  if (!r.empty() && r[0] == '+') {
    const auto secs = core::parse_delay(std::string_view(r).substr(1));
    if (!secs || *secs > max_timeout_seconds) throw bad();  // 100 years, as a timeout
    return {core::seconds_text(*secs), "pg_catalog.now() + pg_catalog.make_interval(secs => ?::float8)"};
  }
  const auto t = core::parse_iso_time(r);
  if (!t || !t->offset_minutes) throw bad();
  return {core::iso_text(*t), "?::timestamptz"};
}

// A whole number (2, 2.0, 1e3; 1e20, which JavaScript writes as
// 100000000000000000000, reaches here as a double) that fits an int, else
// 22003 naming the range the field takes (from `lo`: a value under it but
// in an int's range is left to the database's check); not whole 22023.
std::optional<std::string> int_field(const json& body, const char* f, std::int32_t lo) {
  if (!body.contains(f) || body[f].is_null()) return std::nullopt;
  constexpr auto min = std::numeric_limits<std::int32_t>::min(), max = std::numeric_limits<std::int32_t>::max();
  const auto w = whole_number(body[f], min, max);
  if (!w.whole) throw invalid(std::string(f) + " must be an integer");
  if (!w.value)
    throw http_error(bhttp::status::unprocessable_entity, "22003",
                     std::string(f) + " must be an integer from " + std::to_string(lo) + " to " +
                         std::to_string(max));
  return std::to_string(*w.value);
}

// POST /v1/jobs/{id}/reschedule's body, {"run_after", "priority"} (either
// may be left out or null; both left out is reschedule's own 22023): the
// statement moving the job, with the job id as $1, and its parameters.
struct Reschedule {
  std::string sql;
  pg::Params params;
};
const std::vector<std::string> reschedule_fields = {"id", "run_after", "priority"};
Reschedule build_reschedule(const std::string& body_text, const std::string& id) {
  // (an empty body is an object without fields, as for the routes that take none)
  const std::string text = body_text.find_first_not_of(" \t\r\n") == std::string::npos ? "{}" : body_text;
  static const std::set<std::string> known = {"run_after", "priority"};
  const json body = body_object(text, known);
  std::optional<std::string> run_after;
  std::string expr = "?::timestamptz";
  if (body.contains("run_after") && !body["run_after"].is_null()) {
    if (!body["run_after"].is_string()) throw invalid("run_after must be a string");
    auto ra = run_after_param(body["run_after"].get<std::string>());
    run_after = std::move(ra.value);
    expr = std::move(ra.expr);
  }
  expr.replace(expr.find('?'), 1, "$2");
  Reschedule r;
  r.params = {id, run_after, int_field(body, "priority", std::numeric_limits<std::int32_t>::min())};
  r.sql = "SELECT " +
          pg::utc_iso("bgexec.reschedule($1::bigint, run_after => " + expr + ", priority => $3::int)",
                      pg::Time::json) +
          " AS run_after";
  return r;
}

// Translates a POST /v1/jobs body into one statement calling bgexec.submit
// with named arguments (omitted fields keep submit's defaults); or, given a
// schedule name, a PUT /v1/schedules/{name} body into one calling
// bgexec.schedule (cron instead of run_after and idempotency_key).
Submit build_submit(const std::string& text, const std::optional<std::string>& schedule = std::nullopt) {
  static const std::set<std::string> known = {"kind", "payload", "queue", "priority",
                                              "run_after", "max_attempts", "timeout",
                                              "idempotency_key", "concurrency_key", "unique_key"};
  static const std::set<std::string> known_schedule = {"cron",         "kind",    "payload",         "queue",
                                                       "priority",     "timeout", "concurrency_key", "time_zone",
                                                       "max_attempts", "overlap"};
  json body = body_object(text, schedule ? known_schedule : known);
  pg::Params params;
  std::vector<std::string> fields, args;
  auto arg = [&](const std::string& name, std::string value, const std::string& expr) {
    if (value.find('\0') != std::string::npos) throw nul_in(name);
    params.push_back(std::move(value));
    fields.push_back(name);
    std::string n = "$" + std::to_string(params.size());
    std::string e = expr;
    auto p = e.find('?');
    e.replace(p, 1, n);
    args.push_back(name + " => " + e);
  };
  auto str = [&](const char* f) -> std::optional<std::string> {
    if (!body.contains(f) || body[f].is_null()) return std::nullopt;
    if (!body[f].is_string()) throw invalid(std::string(f) + " must be a string");
    return body[f].get<std::string>();
  };
  // An int field (int_field).
  auto integer = [&](const char* f, std::int32_t lo) { return int_field(body, f, lo); };
  if (schedule) {
    arg("name", *schedule, "?::text");
    auto cron = str("cron");
    if (!cron) throw invalid("cron is required");
    arg("cron", *cron, "?::text");
  }
  auto kind = str("kind");
  if (!kind) throw invalid("kind is required");
  arg("kind", *kind, "?::text");
  if (body.contains("payload") && !body["payload"].is_null()) {
    if (!body["payload"].is_object()) throw invalid("payload must be a JSON object");
    if (core::contains_nul(body["payload"])) throw nul_in("payload");
    // From the body as sent, by the database: the parser here keeps numbers
    // as doubles, and its dump stored 123456789012345678901234567890 as
    // 1.2345678901234568e+29 and 0.1000000000000000001 as 0.1.  pg_catalog's
    // -> (pg/connection.hpp): a ->(jsonb, jsonb) elsewhere would be taken
    // for the untyped key.
    arg("payload", text, "(?::jsonb) OPERATOR(pg_catalog.->) 'payload'");
    // So a number numeric refuses anywhere in the body fails that cast.
    for (auto it = body.begin(); it != body.end(); ++it)
      if (auto n = core::unstorable_number(it.value()); !n.empty()) throw unstorable_in(it.key(), n);
  }
  if (auto q = str("queue")) arg("queue", *q, "?::text");
  if (auto p = integer("priority", std::numeric_limits<std::int32_t>::min())) arg("priority", *p, "?::int");
  if (auto r = str("run_after")) {
    const auto ra = run_after_param(*r);
    arg("run_after", ra.value, ra.expr);
  }
  if (auto m = integer("max_attempts", 1)) arg("max_attempts", *m, "?::int");
  if (body.contains("timeout") && !body["timeout"].is_null()) {
    const auto& t = body["timeout"];
    if (auto secs = core::number_of(t)) {  // a raw number (2.50) too
      // 0: no timeout, whatever the queue's default (submit's interval 0).
      // Else positive once rounded to microseconds, as the interval is:
      // 1e-7 was the SQL's "a positive interval" message, and is no 0.
      if (*secs != 0 &&
          (!std::isfinite(*secs) || !(std::rint(*secs * 1e6) >= 1) || *secs > max_timeout_seconds))
        throw invalid("timeout must be a positive number of seconds, at most 3110400000 (100 years), "
                      "or 0 or \"none\" for no timeout");
      arg("timeout", *secs == 0 ? "0" : core::dump(t), "pg_catalog.make_interval(secs => ?::float8)");
    } else if (t.is_string() && t.get<std::string>() == "none") {
      arg("timeout", "0", "?::interval");  // as the CLI's --timeout none
    } else if (t.is_string()) {
      arg("timeout", t.get<std::string>(), "?::interval");
    } else {
      throw invalid("timeout must be a number of seconds or an interval string");
    }
  }
  bool keyed = false;
  if (auto k = str("idempotency_key")) {
    arg("idempotency_key", *k, "?::text");
    keyed = true;
  }
  if (auto c = str("concurrency_key")) arg("concurrency_key", *c, "?::text");
  if (auto u = str("unique_key")) {  // a job while active: as an idempotency key, 200 when returned
    arg("unique_key", *u, "?::text");
    keyed = true;
  }
  if (schedule) {
    if (auto z = str("time_zone")) arg("time_zone", *z, "?::text");
    if (body.contains("overlap") && !body["overlap"].is_null()) {
      if (!body["overlap"].is_boolean()) throw invalid("overlap must be true or false");
      arg("overlap", body["overlap"].get<bool>() ? "true" : "false", "?::boolean");
    }
  }
  std::string call = schedule ? "bgexec.schedule(" : "bgexec.submit(";
  for (std::size_t i = 0; i < args.size(); ++i) call += (i ? ", " : "") + args[i];
  call += ")";
  if (schedule)
    return {"SELECT " + pg::utc_iso(call, pg::Time::json) + " AS next_run_at", params, fields};
  // With an idempotency or unique key, submit may return a job that already existed
  // (200) instead of creating one (201).  _inserted_here reads after the
  // submit, so a job committed by a concurrent first submit of the same key,
  // which this one waited for, counts as existing too.
  std::string sql = keyed
                        ? "SELECT s.id, NOT bgexec._inserted_here(s.id) AS existed FROM (SELECT " +
                              call + " AS id OFFSET 0) s"
                        : "SELECT " + call + " AS id, false AS existed";
  return {sql, params, fields};
}

}  // namespace

Gateway::Gateway(asio::any_io_executor ex, GatewayConfig cfg)
    : ex_(ex), cfg_(std::move(cfg)), pool_(ex, cfg_.conninfo, cfg_.pool_size, cfg_.statement_timeout_ms),
      notifier_(ex, cfg_.conninfo) {}

asio::awaitable<void> Gateway::listen(asio::ip::tcp::acceptor& acceptor) {
  for (;;) {
    auto [ec, sock] = co_await acceptor.async_accept(use_tuple);
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      core::log("warn", "accept failed", {{"error", ec.message()}});
      asio::steady_timer t(ex_, 100ms);
      co_await t.async_wait(use_tuple);
      continue;
    }
    // Each connection holds a descriptor: past the limit, idle or slow
    // clients would otherwise starve everyone (accept failing with EMFILE,
    // the pool unable to reconnect) for as long as --request-timeout.
    if (connections_ >= cfg_.max_connections && !shed_waiting()) {
      // The 503s hold descriptors too (up to 5 s each, for a client that
      // does not read): past a few at once, close without an answer, so a
      // flood cannot take the process to EMFILE.
      if (refusing_ >= max_refusing) {
        beast::error_code ignored;
        sock.close(ignored);
      } else {
        asio::co_spawn(ex_, refuse(std::move(sock)), asio::detached);
      }
      continue;
    }
    asio::co_spawn(ex_, session(std::move(sock)), asio::detached);
  }
}

bool Gateway::shed_waiting() {
  if (waiting_.empty()) return false;
  auto it = waiting_.begin();
  it->second->close();  // its pending read ends with operation_aborted
  waiting_.erase(it);
  return true;
}

// Counts a coroutine in n for as long as it runs.
struct Counted {
  std::size_t& n;
  explicit Counted(std::size_t& count) : n(count) { ++n; }
  ~Counted() { --n; }
  Counted(const Counted&) = delete;
  Counted& operator=(const Counted&) = delete;
};

// A response or event batch in memory until it is written (hold()).
struct Held {
  std::size_t* total = nullptr;
  std::size_t* role = nullptr;
  std::size_t bytes = 0;
  Held() = default;
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;
  ~Held() {
    if (total) *total -= bytes, *role -= bytes;
  }
};

// A batch of events rendered once (core::render_event_batch) for every
// stream that fetched it together (Gateway::SharedFetch).
struct SharedBatch {
  core::EventBatch ev;
  // The room its text takes while streams write it (hold()), counted once
  // for them all, as it is in memory once: each stream writing it holds
  // this, and the last to finish gives the room back.
  mutable std::weak_ptr<Held> held;
};

// Events a stream has read and not yet written: its own text (a `rewound`
// note, a keepalive), then the batch it shares with the streams at its
// cursor (sent as is: never copied into the stream's own text).
struct StreamPending {
  std::string own;
  std::shared_ptr<const SharedBatch> batch;  // set only when its text is not empty
  bool empty() const { return own.empty() && !batch; }
  std::size_t size() const { return own.size() + (batch ? batch->ev.text.size() : 0); }
  void clear() {
    own.clear();
    batch.reset();
  }
  // The batch's text moved into `own` (a copy), so text can follow it.
  void flatten() {
    if (batch) own += batch->ev.text;
    batch.reset();
  }
};

// Counts `bytes` about to be written into `held`, or says why not.  A reader
// that does not read keeps its response in the gateway until the write
// deadline (30 s and one more per 16 KiB: over 4 minutes for a 4 MiB page);
// a hundred such readers held 450 MB, and 500 streams not reading a job's
// 16 MB event would have held 8 GB.  So what is waiting to be written is
// bounded: by `limit` (--response-memory) in all, by half of it for one
// role, so one tenant's readers cannot take it all.  Up to 64 KiB is not
// counted (the socket's buffer takes it at once), and a limit refuses only
// when something else already holds part of it, so a response larger than
// the limit is still served when nothing else waits.
std::optional<HttpError> hold(Held& held, std::size_t& total, std::size_t& role, std::size_t limit,
                              std::size_t bytes) {
  if (bytes <= 64 * 1024) return std::nullopt;
  auto mib = [](std::size_t n) { return std::to_string((n + (1 << 20) - 1) >> 20) + " MiB"; };
  if (role > 0 && role + bytes > limit / 2)
    return http_error(bhttp::status::too_many_requests, "53400",
                      "answers to this role's requests hold " + mib(role) +
                          " waiting to be read, and this one would take them past half (" + mib(limit / 2) +
                          ") of the gateway's --response-memory; read them first");
  if (total > 0 && total + bytes > limit)
    return http_error(bhttp::status::service_unavailable, "53200",
                      "answers waiting to be read hold " + mib(total) +
                          " of the gateway's --response-memory; try again");
  total += bytes;
  role += bytes;
  held.total = &total, held.role = &role, held.bytes = bytes;
  return std::nullopt;
}

// The gateway's log of refusals by hold(): one line per 10 s.
void log_held(const HttpError& e, const std::string& what) {
  static core::LogThrottle throttle(std::chrono::seconds(10));
  if (std::size_t skipped = 0; throttle.allow(&skipped))
    core::log("warn", what, {{"error", e.message}, {"skipped", std::to_string(skipped)}});
}

asio::awaitable<void> Gateway::refuse(asio::ip::tcp::socket sock) {
  Counted counted{refusing_};
  beast::tcp_stream stream(std::move(sock));
  auto res = make_error(11, http_error(bhttp::status::service_unavailable, "53300",
                                       "too many connections; try again later"));
  res.set(bhttp::field::retry_after, "5");
  res.keep_alive(false);
  res.prepare_payload();
  stream.expires_after(1s);  // a few hundred bytes: the socket buffer takes them at once
  auto [ec, n] = co_await bhttp::async_write(stream, res, use_tuple);
  beast::error_code ignored;
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  // Reads what the client sent, so the close does not reset the answer; a
  // moment only, as the descriptor is one the limit has no room for.
  stream.expires_after(200ms);
  std::array<char, 4096> sink{};
  for (int i = 0; !ec && i < 16; ++i) std::tie(ec, n) = co_await stream.async_read_some(asio::buffer(sink), use_tuple);
}

const std::string* Gateway::authenticate(const Request& req,
                                         const std::map<std::string, std::string>& qs,
                                         bool allow_query_token) const {
  std::string token;
  auto auth = req[bhttp::field::authorization];
  if (auth.size() > 7 && beast::iequals(auth.substr(0, 7), "Bearer ")) {
    // One or more spaces after the scheme (RFC 9110 11.4: 1*SP).
    auto rest = auth.substr(7);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    token = std::string(rest);
  } else if (allow_query_token)
    if (auto it = qs.find("token"); it != qs.end()) token = it->second;
  while (!token.empty() && token.back() == ' ') token.pop_back();
  if (token.empty()) return nullptr;
  auto it = cfg_.tokens.find(token);
  return it == cfg_.tokens.end() ? nullptr : &it->second;
}

// A request's Transfer-Encoding other than chunked alone (RFC 9112 6.1,
// 6.3): one whose last coding is not chunked has no length this server
// can know, and Beast read it as bodiless, so what followed its headers
// (another request, smuggled past a proxy that framed it otherwise) was
// served as the next request: 400.  A coding before chunked (gzip,
// chunked) is one it does not decode: 501.  Either closes the connection.
std::optional<HttpError> transfer_coding_error(const Request& req, bool chunked) {
  if (req.count(bhttp::field::transfer_encoding) == 0) return std::nullopt;
  if (!chunked)
    return bad_request("Transfer-Encoding must end in chunked (its body's length is unknown otherwise)");
  std::string codings;
  const auto [first, last] = req.equal_range(bhttp::field::transfer_encoding);
  for (auto f = first; f != last; ++f) {
    for (char c : f->value())
      if (c != ' ' && c != '\t') codings += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    codings += ',';
  }
  while (!codings.empty() && codings.back() == ',') codings.pop_back();
  if (codings != "chunked")
    return http_error(bhttp::status::not_implemented, "0A000",
                      "Transfer-Encoding \"" + codings + "\" is not supported: chunked alone is");
  return std::nullopt;
}

// The length of a request target's scheme and "://" when it is in absolute
// form (http://host/v1/jobs, what a request through a proxy carries), else 0.
std::size_t absolute_form(std::string_view target) {
  for (std::string_view scheme : {"http://", "https://"})
    if (target.size() > scheme.size() && beast::iequals(target.substr(0, scheme.size()), scheme))
      return scheme.size();
  return 0;
}

// RFC 9112 3.2: an HTTP/1.1 request has one Host header, and its target is
// a path (origin form) or a URL (absolute form).  Without Host, with two,
// or with "v1/jobs" for a target it was served as if well formed.
std::optional<HttpError> request_form_error(const Request& req) {
  const auto hosts = req.count(bhttp::field::host);
  if (hosts > 1) return bad_request("the Host header is given more than once");
  if (hosts == 0 && req.version() >= 11) return bad_request("an HTTP/1.1 request must have a Host header");
  std::string_view t = req.target();
  if (absolute_form(t) == 0 && (t.empty() || t.front() != '/'))
    return bad_request("request target must be a path (/v1/...) or an absolute URL");
  return std::nullopt;
}

// A request's path, query and path segments.  The absolute form names the
// same resource as its path and query (RFC 9112 §3.2.2), "/" when it has no
// path.
struct Target {
  std::string path;
  std::map<std::string, std::string> qs;
  std::vector<std::string> seg;
};
Target split_target(std::string_view target) {
  std::string origin_form;
  if (auto scheme = absolute_form(target)) {
    auto end = target.find_first_of("/?", scheme);
    origin_form = end == std::string_view::npos ? "/"
                  : target[end] == '?'          ? "/" + std::string(target.substr(end))
                                                : std::string(target.substr(end));
    target = origin_form;
  }
  auto qpos = target.find('?');
  Target out;
  out.path = std::string(target.substr(0, qpos));
  out.qs = parse_query(qpos == std::string_view::npos ? std::string_view{} : target.substr(qpos + 1));
  out.seg = segments(out.path);
  return out;
}

// What a request without a valid token may send as its body.  No route
// outside /v1 takes one (but {}), and a /v1 request without a token is
// answered 401 before its body is read: each such connection held up to
// 1 MiB of body for as long as it stalled, 2 GB for 2000 of them.
constexpr std::uint64_t max_body_without_token = 64 * 1024;

asio::awaitable<void> Gateway::session(asio::ip::tcp::socket sock) {
  beast::tcp_stream stream(std::move(sock));
  // At most 64 KiB unparsed: a chunk's size line (a chunk extension, or
  // zeros, without end) or a trailer section is held in it whole until it
  // ends, and one connection without a token grew the process by 500 MB.
  // Past it the read fails (buffer_overflow): 400, and the connection closed.
  beast::flat_buffer buf(64 * 1024);
  Counted counted{connections_};
  // Listed in waiting_ while it reads a request, unlisted (if shed_waiting
  // has not already) once it has it or the read failed.
  struct Waiting {
    std::map<std::uint64_t, beast::tcp_stream*>& m;
    std::uint64_t key;
    ~Waiting() { m.erase(key); }
  };
  try {
    for (;;) {
      bhttp::request_parser<bhttp::string_body> parser;
      std::optional<HttpError> framing;
      Target target;
      bool body_unread = false;  // a /v1 request without a token: 401, and closed
      // No bound on the body until the token is known (below): past it, the
      // header read failed with body_limit, and a /v1 request without a
      // token was 413 for its length where README promises 401.
      parser.body_limit(boost::none);
      parser.header_limit(64 * 1024);  // the README's bound, as the buffer's
      beast::error_code ec;
      bool timed_out = false, continue_failed = false;
      {
        Waiting waiting{waiting_, next_waiting_++};
        waiting_.emplace(waiting.key, &stream);
        // The request whole: its header, the 100 Continue it may ask for,
        // its body.
        auto read = [&]() -> asio::awaitable<beast::error_code> {
          beast::error_code rec;
          std::size_t n = 0;
          std::tie(rec, n) = co_await bhttp::async_read_header(stream, buf, parser, use_tuple);
          if (!rec) framing = transfer_coding_error(parser.get(), parser.chunked());
          if (!rec && !framing) framing = request_form_error(parser.get());
          if (!rec && !framing) target = split_target(parser.get().target());
          if (!rec && !framing && !parser.is_done()) {
            // The body only for a request that may send one (above).  A
            // Content-Length over the bound is refused here; a chunked body
            // fails its read at the chunk that passes it (body_limit, 413 below).
            const bool token = authenticate(parser.get(), target.qs, events_path(target.seg)) != nullptr;
            const std::uint64_t limit = token ? max_body : max_body_without_token;
            if (!token && !target.seg.empty() && target.seg[0] == "v1")
              body_unread = true;
            else if (parser.content_length().value_or(0) > limit)
              framing = http_error(bhttp::status::payload_too_large, "54000",
                                   token ? "request body is larger than 1 MiB"
                                         : "request body is larger than 64 KiB (without a token)");
            else
              parser.body_limit(limit);  // before any of the body is read
          }
          if (!rec && !framing && !body_unread && !parser.is_done()) {
            // A client that asked to be invited waits for it before sending the
            // body (curl: 1 s).  A Content-Length over the limit never gets here
            // (above).
            if (parser.get().version() >= 11 &&
                beast::iequals(parser.get()[bhttp::field::expect], "100-continue")) {
              bhttp::response<bhttp::empty_body> cont{bhttp::status::continue_, parser.get().version()};
              auto [cec, cn] = co_await bhttp::async_write(stream, cont, use_tuple);
              if (cec) {
                continue_failed = true;
                co_return cec;
              }
            }
            std::tie(rec, n) = co_await bhttp::async_read(stream, buf, parser, use_tuple);
          }
          co_return rec;
        };
        // Timed by a timer of the session's own: the stream's expiry closes
        // the socket when it fires, and a client sending too slowly was cut
        // off without an answer.  The timer firing first cancels the read
        // (terminal: only an answer and the close follow) and leaves the
        // socket open for the 408.  The stream's expiry, later, is a
        // backstop only.
        stream.expires_after(cfg_.request_timeout + 10s);
        asio::steady_timer deadline(ex_, cfg_.request_timeout);
        using namespace asio::experimental::awaitable_operators;
        auto done = co_await (read() || deadline.async_wait(use_tuple));
        if (done.index() == 0)
          ec = std::get<0>(done);
        else
          timed_out = true;
      }
      if (continue_failed) break;
      if (timed_out && stream.socket().is_open()) {
        // A request begun (a byte of it read, or waiting in the buffer) and
        // not answered gets 408.  A connection idle since its last answer
        // is closed without one: a client sending its next request at that
        // moment would read the 408 as that request's answer.
        if (buf.size() == 0 && !parser.got_some()) {
          stream.close();
          break;
        }
        auto res = make_error(11, http_error(bhttp::status::request_timeout, "57014",
                                             "the request did not arrive whole within " +
                                                 seconds_text(cfg_.request_timeout) +
                                                 "; the connection is closed"));
        res.keep_alive(false);
        res.prepare_payload();
        stream.expires_after(5s);
        co_await bhttp::async_write(stream, res, use_tuple);
        break;
      }
      // Shed for a newer connection (closed by shed_waiting), timed out, or gone.
      if (timed_out || !stream.socket().is_open() || ec == bhttp::error::end_of_stream ||
          ec == beast::error::timeout || ec == asio::error::connection_reset || ec == asio::error::eof)
        break;
      if (ec || framing) {
        // Malformed or oversized request: answer once, then close (the rest of
        // the byte stream cannot be trusted).
        const bool with_token = authenticate(parser.get(), target.qs, events_path(target.seg));
        HttpError e = framing ? *framing
                      : ec == bhttp::error::body_limit
                          ? http_error(bhttp::status::payload_too_large, "54000",
                                       with_token ? "request body is larger than 1 MiB"
                                                  : "request body is larger than 64 KiB (without a token)")
                          : bad_request("malformed HTTP request: " + ec.message());
        auto res = make_error(11, e);
        res.keep_alive(false);
        res.prepare_payload();
        stream.expires_after(5s);
        co_await bhttp::async_write(stream, res, use_tuple);
        break;
      }
      const Request& req = parser.get();
      const std::string& path = target.path;
      const auto& qs = target.qs;
      const auto& seg = target.seg;
      // Refused before the token is looked up: these say nothing of the API.
      auto bad_text = check_text(path, qs);
      if (!bad_text) bad_text = ambiguous_token(req, seg, qs);
      if (!bad_text && req.method() == bhttp::verb::get && events_path(seg)) {
        auto id = parse_int(seg[2]);
        if (id && *id > 0) {
          co_await stream_events(stream, req, *id, qs);
          break;  // an event stream owns the connection until it ends
        }
      }
      Response res;
      try {
        if (bad_text) throw *bad_text;
        res = co_await route(req, path, qs);
      } catch (const HttpError& e) {
        res = make_error(req.version(), e);
      } catch (const pg::Error& e) {
        res = make_error(req.version(), from_pg(e));
      } catch (const std::exception& e) {
        core::log("error", "request failed", {{"path", path}, {"error", e.what()}});
        res = make_error(req.version(), http_error(bhttp::status::internal_server_error, "XX000", e.what()));
      }
      Held held;  // until the response is written
      if (req.method() != bhttp::verb::head) {
        const std::string* who = authenticate(req, qs, false);
        if (auto e = hold(held, held_, held_by_role_[who ? *who : std::string()], cfg_.response_memory,
                          res.body().size())) {
          log_held(*e, "answer refused");
          res = make_error(req.version(), *e);
        }
      }
      res.version(req.version());
      res.keep_alive(req.keep_alive() && !body_unread);  // the body still on the socket
      res.prepare_payload();
      if (req.method() == bhttp::verb::head) {
        // The headers a GET would get, Content-Length included (RFC 9110 9.3.2).
        const auto length = res.body().size();
        res.body().clear();
        res.content_length(length);
      }
      core::log("debug", "request", {{"method", std::string(req.method_string())}, {"path", path},
                                     {"status", std::to_string(res.result_int())}});
      stream.expires_after(write_deadline(res.body().size()));
      auto [wec, wn] = co_await bhttp::async_write(stream, res, use_tuple);
      if (wec || !res.keep_alive()) break;
    }
    stream.expires_after(2s);
    beast::error_code ignored;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
    // Drain what the client still sends so the close does not reset the reply.
    std::array<char, 4096> sink{};
    for (int i = 0; i < 256; ++i) {
      auto [ec, n] = co_await stream.async_read_some(asio::buffer(sink), use_tuple);
      if (ec) break;
    }
  } catch (const std::exception& e) {
    core::log("warn", "connection failed", {{"error", e.what()}});
  }
}

asio::awaitable<Response> Gateway::route(const Request& req, const std::string& path,
                                         const std::map<std::string, std::string>& qs) {
  const auto v = req.version();
  const auto method = req.method();
  const bool get = method == bhttp::verb::get || method == bhttp::verb::head;
  auto seg = segments(path);

  // Static dashboard and metrics: no token.
  if (seg.empty() || (seg.size() == 1 && (seg[0] == "index.html" || seg[0] == "app.js" ||
                                          seg[0] == "app.css"))) {
    // The dashboard's files take any query: a link to the page may carry one.
    if (!get) throw method_not_allowed("GET, HEAD");
    std::string name = seg.empty() ? "index.html" : seg[0];
    Response res{bhttp::status::ok, v};
    res.set(bhttp::field::server, "bgexec");
    res.set(bhttp::field::content_type, name == "app.js"    ? "text/javascript; charset=utf-8"
                                        : name == "app.css" ? "text/css; charset=utf-8"
                                                            : "text/html; charset=utf-8");
    res.set(bhttp::field::cache_control, "no-cache");
    dashboard_headers(res);
    res.body() = name == "app.js" ? assets::app_js : name == "app.css" ? assets::app_css : assets::index_html;
    co_return res;
  }
  // The icon every browser asks for with the dashboard: none, said without
  // an error (a 404 each time the page loaded, in the browser's console).
  if (seg.size() == 1 && seg[0] == "favicon.ico") {
    if (!get) throw method_not_allowed("GET, HEAD");
    Response res{bhttp::status::no_content, v};
    res.set(bhttp::field::server, "bgexec");
    res.set(bhttp::field::cache_control, "max-age=86400");
    res.set("X-Content-Type-Options", "nosniff");
    co_return res;
  }
  if (seg.size() == 1 && seg[0] == "metrics") {
    if (!get) throw method_not_allowed("GET, HEAD");
    check_params(qs, no_params);
    check_no_body(req.body());
    co_return co_await metrics(req);
  }
  if (seg.empty() || seg[0] != "v1") throw not_found("no such resource: " + path);

  // The token first: without a valid one, 401 says nothing of the path,
  // the method or the query.
  const std::string* role = authenticate(req, qs, events_path(seg));
  if (!role)
    throw http_error(bhttp::status::unauthorized, "28000",
                    "missing or unknown bearer token (Authorization: Bearer <token>)");

  // POST /v1/queues/{name}/pause|resume: bgexec.configure_queue, which is
  // not granted to clients (403 for a tenant's token; a token mapped to an
  // administrator's role may).  Answers the queue's settings as the call
  // left them.
  if (seg.size() == 4 && seg[1] == "queues" && (seg[3] == "pause" || seg[3] == "resume")) {
    if (method != bhttp::verb::post) throw method_not_allowed("POST");
    check_params(qs, no_params);
    check_no_body(req.body());
    const std::string name = path_name(seg[2], "queue");
    auto r = co_await pool_.query(*role,
                                  "SELECT q.name, q.paused, q.max_queued, q.max_running, q.max_running_per_key,"
                                  " q.retry_base::text AS retry_base, q.retry_cap::text AS retry_cap, q.rate_limit,"
                                  " CASE WHEN q.rate_limit IS NOT NULL THEN q.rate_period::text END AS rate_period"
                                  " FROM bgexec.configure_queue($1, paused => $2::boolean) q",
                                  args(name, seg[3] == "pause" ? "true" : "false"), true);
    co_return make_json(v, bhttp::status::ok, r.to_json(true).at(0));
  }
  // GET /v1/queues
  if (seg.size() == 2 && seg[1] == "queues") {
    if (!get) throw method_not_allowed("GET, HEAD");
    check_params(qs, no_params);
    check_no_body(req.body());
    auto r = co_await pool_.query(
        *role,
        "SELECT *, extract(epoch FROM oldest_queued_age)::float8 AS oldest_queued_seconds "
        "FROM bgexec.queue_stats ORDER BY queue",
        {}, true);
    co_return make_json(v, bhttp::status::ok, kv("queues", r.to_json(true)));
  }
  if (seg.size() == 2 && seg[1] == "workers") {
    // GET /v1/workers[?all=true]: bgexec.worker_stats, the live workers
    // (its alive: a heartbeat within the minute, or the lease when longer,
    // or a live lease) or every row.  pg_catalog's array_to_json
    // (pg/connection.hpp: built-ins a user could shadow).
    if (!get) throw method_not_allowed("GET, HEAD");
    check_params(qs, workers_params);
    check_no_body(req.body());
    bool all = false;
    if (auto it = qs.find("all"); it != qs.end()) {
      if (it->second != "true" && it->second != "false") throw invalid("all must be true or false");
      all = it->second == "true";
    }
    auto r = co_await pool_.query(
        *role,
        std::string("SELECT w.id, w.host, w.pid, pg_catalog.array_to_json(w.queues) AS queues, w.concurrency,"
                    " w.in_flight, w.alive, ") + pg::utc_iso("w.started_at", pg::Time::json) + " AS started_at, " +
            pg::utc_iso("w.heartbeat_at", pg::Time::json) + " AS heartbeat_at, " +
            pg::utc_iso("w.stopped_at", pg::Time::json) + " AS stopped_at FROM bgexec.worker_stats w" +
            (all ? "" : " WHERE w.alive") + " ORDER BY w.heartbeat_at DESC, w.id",
        {}, true);
    co_return make_json(v, bhttp::status::ok, kv("workers", r.to_json(true)));
  }
  if (seg.size() >= 2 && seg[1] == "schedules") co_return co_await schedules(req, *role, seg, qs);
  if (seg.size() < 2 || seg[1] != "jobs") throw not_found("no such resource: " + path);

  if (seg.size() == 2) {
    if (method == bhttp::verb::post) {
      // POST /v1/jobs: the body mirrors bgexec.submit's named arguments.
      check_params(qs, no_params);
      auto submit = build_submit(req.body());
      pg::Result r;
      try {
        r = co_await pool_.query(*role, submit.sql, submit.params);
      } catch (const pg::Error& e) {
        throw from_pg(e, submit.fields);
      }
      auto id = r.get(0, "id").value_or("0");
      bool existed = r.get(0, "existed") == std::optional<std::string>("t");
      auto res = make_json(v, existed ? bhttp::status::ok : bhttp::status::created,
                           existed ? kv("id", std::stoll(id), "deduplicated", true)
                                   : kv("id", std::stoll(id)));
      res.set(bhttp::field::location, "/v1/jobs/" + id);
      co_return res;
    }
    if (!get) throw method_not_allowed("GET, HEAD, POST");
    // GET /v1/jobs?queue=&kind=&status=&limit=&before=
    std::int64_t limit = 50;
    pg::Params params(5);
    check_params(qs, list_params);
    check_no_body(req.body());
    for (const auto& [k, val] : qs) {
      if (k == "queue") {
        if (!val.empty()) params[0] = val;
      } else if (k == "kind") {
        if (!val.empty()) params[4] = val;
      } else if (k == "status") {
        // One status or several, comma-separated, as the CLI's --status.
        if (!val.empty()) {
          auto l = core::status_list(val);
          if (!l.error.empty()) throw invalid("status: " + l.error);
          params[1] = l.array();
        }
      } else if (k == "before") {
        auto b = parse_int(val);
        if (!b || *b < 1) throw invalid("before must be a positive job id");
        params[2] = std::to_string(*b);
      } else if (k == "limit") {
        // Not an integer 22023, out of the range 22003: as the batch routes' limit.
        auto l = parse_int(val);
        if (!l) throw invalid("limit must be an integer from 1 to 500");
        if (*l < 1 || *l > 500)
          throw http_error(bhttp::status::unprocessable_entity, "22003", "limit must be an integer from 1 to 500");
        limit = *l;
      }
    }
    params[3] = std::to_string(limit + 1);
    params.push_back(std::to_string(list_page_bytes));
    // Through bgexec._list_jobs, as `bgexec jobs`: a tenant sees its own
    // jobs, and its status and queue tests read their indexes.
    // A page ends early once its jobs' payloads, results and errors pass
    // list_page_bytes (its first job whatever its size): 500 jobs of 900 kB
    // made a 90 MB answer, built on the event loop and held for a reader
    // that does not read (ten such: 1.3 GB).  Their sizes as stored,
    // uncompressed (_raw_bytes reads a header), summed as doubles in one
    // streaming window; sized as text, with a numeric sum and a count of
    // the whole page, the query took 2.2 times as long at 500 jobs, now
    // 1.3-1.5.  more: a job read after this one, so a page cut early has a
    // next_before too.  pg_catalog's lead and = of enums (pg/connection.hpp:
    // built-ins a user could shadow).
    pg::Result r;
    try {
      r = co_await pool_.query(
          *role,
          "SELECT " + job_columns("p") + ", p.more FROM ("
          "  SELECT l.*, sum(l.bytes) OVER w - l.bytes AS before_bytes,"
          "         pg_catalog.lead(l.id) OVER w IS NOT NULL AS more"
          "    FROM (SELECT j.*, (coalesce(bgexec._raw_bytes(j.payload), 0) + coalesce(bgexec._raw_bytes(j.result), 0)"
          "                       + coalesce(bgexec._raw_bytes(j.error), 0))::float8 AS bytes"
          "            FROM bgexec._list_jobs($1::text, $2::bgexec.job_status[], $3::bigint, $4::int, $5::text) j"
          "           ORDER BY j.id DESC) l"
          "  WINDOW w AS (ORDER BY l.id DESC)) p"
          " WHERE p.before_bytes < $6::float8 ORDER BY p.id DESC",
          params, true);
    } catch (const pg::Error& e) {
      throw from_pg(e, list_fields);
    }
    auto jobs = r.to_json(true);
    json next = nullptr;
    if (static_cast<std::int64_t>(jobs.size()) > limit) {
      jobs.erase(jobs.end() - 1);
      next = jobs.back()["id"];
    } else if (!jobs.empty() && jobs.back()["more"] == true) {
      next = jobs.back()["id"];
    }
    for (auto& j : jobs)
      j.erase("more");
    // And by their text, with the same rule: a job starts the page or
    // comes after less than list_page_bytes of it.  Stored bytes can be a
    // sixth of the text (a control character is one byte stored, \u0001
    // written): a page of 600 kB stored was 24 MB, 2.6 GB for a hundred
    // readers that do not read.
    std::size_t text = 0;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (i > 0 && text >= static_cast<std::size_t>(list_page_bytes)) {
        jobs.erase(jobs.begin() + static_cast<std::ptrdiff_t>(i), jobs.end());
        next = jobs.back()["id"];
        break;
      }
      text += core::dump(jobs[i]).size();
    }
    co_return make_json(v, bhttp::status::ok, kv("jobs", jobs, "next_before", next));
  }

  // POST /v1/jobs/stop, POST /v1/jobs/retry: one batch of the caller's
  // matching jobs (core/many.hpp), oldest first; next_after continues it.
  if (seg.size() == 3 && (seg[2] == "stop" || seg[2] == "retry")) {
    if (method != bhttp::verb::post) throw method_not_allowed("POST");
    check_params(qs, no_params);
    const bool retry = seg[2] == "retry";
    auto m = parse_many(req.body(), retry);
    pg::Result r;
    try {
      r = co_await pool_.query(*role, core::many_sql(retry), m.params);
    } catch (const pg::Error& e) {
      throw from_pg(e, many_fields);
    }
    co_return make_json(v, bhttp::status::ok, many_answer(r, retry, m.limit));
  }

  auto id = parse_int(seg[2]);
  if (!id || *id < 1) throw not_found("no such job: " + seg[2]);
  const std::string id_s = std::to_string(*id);

  if (seg.size() == 3) {
    if (!get) throw method_not_allowed("GET, HEAD");
    check_params(qs, no_params);
    check_no_body(req.body());
    auto r = co_await pool_.query(*role, "SELECT " + job_columns("j") + " FROM bgexec.job j WHERE j.id = $1::bigint",
                                  args(id_s), true);
    if (r.rows() == 0) throw not_found("job " + id_s + " does not exist");
    co_return make_json(v, bhttp::status::ok, r.to_json(true)[0]);
  }
  if (seg.size() == 4 && (seg[3] == "stop" || seg[3] == "resume" || seg[3] == "retry")) {
    if (method != bhttp::verb::post) throw method_not_allowed("POST");
    check_params(qs, no_params);
    if (seg[3] != "resume") check_no_body(req.body());
    if (seg[3] == "stop") {
      auto r = co_await pool_.query(*role, "SELECT bgexec.stop($1::bigint)::text AS status", args(id_s));
      co_return make_json(v, bhttp::status::ok, kv("id", *id, "status", r.get(0, 0).value_or("")));
    }
    bool ok = false;
    if (seg[3] == "resume") {
      std::optional<std::string> input;
      auto b = std::string_view(req.body());
      if (b.find_first_not_of(" \t\r\n") != std::string_view::npos) {
        auto in = core::parse_json_input(b, core::max_json_depth, core::DuplicateKeys::refuse, core::Numbers::exact);
        if (in.error == core::JsonInput::Error::duplicate_key) throw duplicate_key(in, "the resume input");
        if (in.error == core::JsonInput::Error::too_deep) throw too_deep("resume input");
        if (in.error == core::JsonInput::Error::number_out_of_range)
          throw http_error(bhttp::status::unprocessable_entity, "22003",
                           "resume input" + (in.path.empty() ? "" : " at " + in.path) + " holds " +
                               core::double_refuses(in.number));
        if (!in) throw bad_request("request body is not valid JSON: " + in.message);
        if (core::contains_nul(in.value)) throw nul_in("resume input");
        if (auto n = core::unstorable_number(in.value); !n.empty()) throw unstorable_in("resume input", n);
        input = std::string(b);  // as sent: numbers exact (see build_submit)
      }
      pg::Result r;
      try {
        r = co_await pool_.query(*role, "SELECT bgexec.resume($1::bigint, $2::jsonb) AS ok", args(id_s, input));
      } catch (const pg::Error& e) {
        throw from_pg(e, resume_fields);
      }
      ok = r.get(0, 0) == "t";
      if (!ok) throw http_error(bhttp::status::conflict, "55000", "job " + id_s + " is not suspended");
    } else {
      auto r = co_await pool_.query(*role, "SELECT bgexec.retry($1::bigint) AS ok", args(id_s));
      ok = r.get(0, 0) == "t";
      if (!ok)
        throw http_error(bhttp::status::conflict, "55000",
                        "job " + id_s + " is not failed, cancelled or timed out");
    }
    co_return make_json(v, bhttp::status::ok, kv("id", *id, seg[3] == "resume" ? "resumed" : "retried", true));
  }
  // POST /v1/jobs/{id}/reschedule: bgexec.reschedule, a queued job of the
  // token's to another run_after or priority (55000 for a job not queued:
  // 409; another's or none: 404).
  if (seg.size() == 4 && seg[3] == "reschedule") {
    if (method != bhttp::verb::post) throw method_not_allowed("POST");
    check_params(qs, no_params);
    const auto rs = build_reschedule(req.body(), id_s);
    pg::Result r;
    try {
      r = co_await pool_.query(*role, rs.sql, rs.params);
    } catch (const pg::Error& e) {
      throw from_pg(e, reschedule_fields);
    }
    co_return make_json(v, bhttp::status::ok, kv("id", *id, "run_after", r.get(0, 0).value_or("")));
  }
  // A GET of a job's events is answered by stream_events (session()).
  if (seg.size() == 4 && seg[3] == "events") throw method_not_allowed("GET");
  throw not_found("no such resource: " + path);
}

// GET /v1/schedules, PUT and DELETE /v1/schedules/{name}, POST
// /v1/schedules/{name}/pause|resume|run: the caller's recurring jobs
// (bgexec.schedule under row-level security).
// The token's own schedules, as every schedule route acts on them
// (schedule, pause_schedule, run_schedule... take the caller's): row-level
// security alone shows a superuser's token everyone's, so GET of a name
// two roles use answered an arbitrary one of them, and the dashboard
// listed other roles' schedules whose edit saved a copy owned by the
// superuser (its sql steps then ran as the superuser) and whose other
// buttons acted on the token's own schedule of that name, or answered 404.
const std::string own_schedule = "owner = current_user";

asio::awaitable<Response> Gateway::schedules(const Request& req, const std::string& role,
                                             const std::vector<std::string>& seg,
                                             const std::map<std::string, std::string>& qs) {
  const auto v = req.version();
  const auto method = req.method();
  // The documented order: 404 for the path, 405 for the method, then 400
  // for the query (it came first: POST /v1/schedules?x=1 was a 400).
  if (seg.size() == 2) {
    if (method != bhttp::verb::get && method != bhttp::verb::head) throw method_not_allowed("GET, HEAD");
    check_params(qs, no_params);
    check_no_body(req.body());
    auto r = co_await pool_.query(role, "SELECT " + schedule_columns + " FROM bgexec.schedule s WHERE " + own_schedule +
                                      " ORDER BY s.name",
                                  {}, true);
    co_return make_json(v, bhttp::status::ok, kv("schedules", r.to_json(true)));
  }
  const bool action = seg.size() == 4 && (seg[3] == "pause" || seg[3] == "resume" || seg[3] == "run");
  if (seg.size() != 3 && !action) throw not_found("no such resource: /" + seg[0] + "/" + seg[1] + "/...");
  const bool known_method = action ? method == bhttp::verb::post
                                    : method == bhttp::verb::put || method == bhttp::verb::delete_ ||
                                          method == bhttp::verb::get || method == bhttp::verb::head;
  if (!known_method) throw method_not_allowed(action ? "POST" : "GET, HEAD, PUT, DELETE");
  const std::string name = path_name(seg[2], "schedule");
  check_params(qs, no_params);
  if (action) {
    check_no_body(req.body());
    if (seg[3] == "run") {
      auto r = co_await pool_.query(role, "SELECT bgexec.run_schedule($1)", args(name));
      auto id = r.get(0, 0);
      if (!id) throw not_found("schedule " + name + " does not exist");
      auto res = make_json(v, bhttp::status::created, kv("name", name, "id", std::stoll(*id)));
      res.set(bhttp::field::location, "/v1/jobs/" + *id);
      co_return res;
    }
    if (seg[3] == "pause") {
      auto r = co_await pool_.query(role, "SELECT bgexec.pause_schedule($1)", args(name));
      if (r.get(0, 0) != "t") throw not_found("schedule " + name + " does not exist");
      co_return make_json(v, bhttp::status::ok, kv("name", name, "paused", true));
    }
    auto r = co_await pool_.query(role, "SELECT " + pg::utc_iso("bgexec.resume_schedule($1)", pg::Time::json), args(name));
    if (!r.get(0, 0)) throw not_found("schedule " + name + " does not exist");
    json body = kv("name", name, "paused", false);
    body["next_run_at"] = *r.get(0, 0);
    co_return make_json(v, bhttp::status::ok, std::move(body));
  }
  if (method == bhttp::verb::put) {
    auto call = build_submit(req.body(), name);
    pg::Result r;
    try {
      r = co_await pool_.query(role, call.sql, call.params);
    } catch (const pg::Error& e) {
      throw from_pg(e, call.fields);
    }
    co_return make_json(v, bhttp::status::ok, kv("name", name, "next_run_at", r.get(0, 0).value_or("")));
  }
  if (method == bhttp::verb::delete_) {
    check_no_body(req.body());
    auto r = co_await pool_.query(role, "SELECT bgexec.unschedule($1) AS deleted", args(name));
    if (r.get(0, 0) != "t") throw not_found("schedule " + name + " does not exist");
    co_return make_json(v, bhttp::status::ok, kv("name", name, "deleted", true));
  }
  check_no_body(req.body());  // GET, HEAD
  auto r = co_await pool_.query(role, "SELECT " + schedule_columns + " FROM bgexec.schedule s WHERE " + own_schedule +
                                      " AND s.name = $1",
                                args(name), true);
  if (r.rows() == 0) throw not_found("schedule " + name + " does not exist");
  co_return make_json(v, bhttp::status::ok, r.to_json(true)[0]);
}

asio::awaitable<std::shared_ptr<const pg::Result>> Gateway::shared_read(const std::string& role,
                                                                        const std::string& sql, pg::Params params,
                                                                        const std::function<bool()>& left) {
  auto f = co_await shared_fetch(role, sql, std::move(params), std::nullopt, left);
  co_return f->result;
}

asio::awaitable<std::shared_ptr<const SharedBatch>> Gateway::shared_events(const std::string& role,
                                                                           pg::Params params, std::int64_t cursor,
                                                                           const std::function<bool()>& left) {
  auto f = co_await shared_fetch(role, events_sql, std::move(params), cursor, left);
  co_return f->batch;
}

asio::awaitable<std::shared_ptr<Gateway::SharedFetch>> Gateway::shared_fetch(
    const std::string& role, const std::string& sql, pg::Params params, std::optional<std::int64_t> render_after,
    const std::function<bool()>& left) {
  const FetchKey key{role, &sql, params};
  for (;;) {
    if (auto it = fetches_.find(key); it != fetches_.end()) {
      auto f = it->second;  // held: the leader erases its entry when over
      if (!f->done) co_await f->over.async_wait(use_tuple);
      if (!f->leader_gone) {
        if (f->error) std::rethrow_exception(f->error);
        co_return f;
      }
      if (left()) throw ClientGone();
      continue;  // its reader left before it was sent: this stream sends it
    }
    auto f = std::make_shared<SharedFetch>(co_await asio::this_coro::executor);
    fetches_.emplace(key, f);
    try {
      // Uncapped (Pool::query): a stream has one read at a time, and a
      // role's streams are bounded (stream_events).
      f->result = std::make_shared<const pg::Result>(co_await pool_.query(role, sql, params, true, left, true));
      // Rendered here, once, before the waiters wake: the key holds the
      // cursor (the statement's $2), so every waiter renders the same.
      if (render_after) {
        auto b = std::make_shared<SharedBatch>();
        b->ev = core::render_event_batch(f->result->to_json(true), *render_after);
        if (!b->ev.text.empty()) ++batches_rendered_;  // a poll finding nothing new renders nothing
        f->batch = std::move(b);
        f->result.reset();  // the rows are no longer needed: the text is what is sent
      }
    } catch (const ClientGone&) {
      f->leader_gone = true;
    } catch (...) {
      f->error = std::current_exception();
    }
    f->done = true;
    fetches_.erase(key);
    f->over.cancel();
    if (f->leader_gone) throw ClientGone();
    if (f->error) std::rethrow_exception(f->error);
    co_return f;
  }
}

asio::awaitable<void> Gateway::sweep_streams() {
  asio::steady_timer t(ex_);
  for (;;) {
    t.expires_after(poll_every);
    co_await t.async_wait(use_tuple);
    std::vector<std::string> roles;
    for (const auto& [role, w] : watches_)
      if (!w.empty()) roles.push_back(role);
    // One role at a time: the sweep takes one pool connection at most.
    for (const auto& role : roles) co_await sweep_role(role);
  }
}

// One sweep of a role's streams (sweep_sql): the streams at one (job,
// position, event read there) share a row; those whose job has something
// for them (events past the position, a rewound log, the job gone or ended
// with the stream still open) are woken, and run their own check and read.
asio::awaitable<void> Gateway::sweep_role(const std::string& role) {
  using Key = std::tuple<std::int64_t, std::int64_t, std::optional<std::string>>;
  std::map<Key, std::vector<std::uint64_t>> groups;
  for (const auto& [id, w] : watches_[role])
    if (!w->due) groups[Key{w->job, *w->cursor, *w->created}].push_back(id);
  if (groups.empty()) co_return;
  json rows = json::array();
  std::vector<const Key*> keys;
  for (const auto& [k, ids] : groups) {
    json r{{"i", keys.size()}, {"job", std::get<0>(k)}, {"cur", std::get<1>(k)}};
    r["created"] = std::get<2>(k) ? json(*std::get<2>(k)) : json(nullptr);
    rows.push_back(std::move(r));
    keys.push_back(&k);
  }
  // No row: the job is gone or hidden.  A failed sweep wakes them all.
  std::vector<char> due(keys.size(), 1);
  try {
    auto r = co_await pool_.query(role, sweep_sql, args(dump(rows)), true, {}, true);
    ++sweeps_;
    for (int row = 0; row < r.rows(); ++row) {
      auto i = parse_int(r.get(row, 0).value_or("")).value_or(-1);
      if (i < 0 || static_cast<std::size_t>(i) >= keys.size()) continue;
      const auto cur = std::get<1>(*keys[i]);
      const auto status = r.get(row, 1).value_or("");
      const auto last = parse_int(r.get(row, 2).value_or("0")).value_or(0);
      const bool rewound = r.get(row, 3).value_or("f") == "t";
      due[i] = rewound || last != cur || is_stream_end(status);
    }
  } catch (const std::exception&) {
    // Every stream of the role reads on its own, as at a poll: it ends on
    // a 404 or 403 (a purge, a revoke), and logs (throttled) otherwise.
    // Whatever the failure (not only the database's): an exception out of
    // here would end the sweep for good, detached, and with it every idle
    // stream's only way to hear of what sends no NOTIFY.
  }
  auto& now = watches_[role];
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (!due[i]) continue;
    for (auto id : groups[*keys[i]]) {
      auto it = now.find(id);
      // Gone, or read since (its cursor moved): nothing to wake.
      if (it == now.end() || *it->second->cursor != std::get<1>(*keys[i])) continue;
      it->second->due = true;
      it->second->sub->poke();
      ++sweep_wakes_;
    }
  }
}

asio::awaitable<void> Gateway::stream_events(beast::tcp_stream& stream, const Request& req,
                                             std::int64_t job_id,
                                             const std::map<std::string, std::string>& qs) {
  auto reply_error = [&](const HttpError& e) -> asio::awaitable<void> {
    auto res = make_error(req.version(), e);
    res.keep_alive(false);
    res.prepare_payload();
    stream.expires_after(10s);
    co_await bhttp::async_write(stream, res, use_tuple);
  };
  // Browsers' EventSource cannot send headers: ?token= is accepted here.
  const std::string* role = authenticate(req, qs, true);
  if (!role) {
    co_await reply_error(http_error(bhttp::status::unauthorized, "28000",
                                    "missing or unknown bearer token (Authorization: Bearer <token>, or ?token=)"));
    co_return;
  }
  if (auto e = unknown_param(qs, event_params)) {
    co_await reply_error(*e);
    co_return;
  }
  const std::size_t most_streams = std::max<std::size_t>(1, cfg_.max_connections / 2);
  if (streams_[*role] >= most_streams) {
    co_await reply_error(http_error(bhttp::status::too_many_requests, "53400",
                                    std::to_string(most_streams) +
                                        " event streams of this role are open, half the gateway's connection limit"));
    co_return;
  }
  // The map holds an entry per token's role, a fixed few: none is erased.
  Counted open{streams_[*role]};
  // A body is refused as on every route that takes none: a client's
  // {"after": 5} would otherwise be ignored and the stream start at 0.
  std::optional<HttpError> body_error;
  try {
    check_no_body(req.body());
  } catch (const HttpError& e) {
    body_error = e;
  }
  if (body_error) {
    co_await reply_error(*body_error);
    co_return;
  }
  // Resume point: Last-Event-ID (set by EventSource on reconnect) wins over ?after=.
  std::int64_t cursor = 0;
  // Twice: one would win unnoticed (as with a query parameter given twice).
  if (req.count("Last-Event-ID") > 1) {
    co_await reply_error(bad_request("the Last-Event-ID header is given more than once"));
    co_return;
  }
  // An empty header is no header (EventSource sends none without an id);
  // an empty ?after= is refused, as an empty limit= or before= is, header
  // or not (a bad one was passed over when the header came with it).
  auto seq_of = [](const std::string& text) -> std::optional<std::int64_t> {
    auto c = parse_int(text);
    if (!c || *c < 0 || *c > std::numeric_limits<std::int32_t>::max()) return std::nullopt;
    return c;
  };
  std::optional<std::int64_t> from_header, from_query;
  if (auto it = qs.find("after"); it != qs.end() && !(from_query = seq_of(it->second))) {
    co_await reply_error(bad_request("after must be an integer from 0 to 2147483647"));
    co_return;
  }
  if (std::string h(req["Last-Event-ID"]); !h.empty() && !(from_header = seq_of(h))) {
    co_await reply_error(bad_request("Last-Event-ID must be an integer from 0 to 2147483647"));
    co_return;
  }
  if (from_header) cursor = *from_header;
  else if (from_query) cursor = *from_query;
  const std::string id_s = std::to_string(job_id);

  // Subscribe first and make sure LISTEN is in effect, then replay: an event
  // committed after the replay's snapshot is then always announced, and one
  // both replayed and announced is skipped because its seq <= cursor.
  Subscription sub(notifier_, job_id);
  co_await notifier_.wait_listening(5s);

  bool ended = false;
  bool more = false;  // the last fetch filled a batch: more events may follow at once
  StreamPending pending;  // events read, not yet written
  std::string last_kind;  // kind of the event at the cursor, once this stream has sent one
  std::optional<std::string> last_created;  // created_at of the event at the cursor, once sent
  // Reads the next batch of events after the cursor into `pending`; `more`
  // says whether it was full.  Each batch is written before the next is read,
  // so a long log, or a reader that does not read, costs one batch of memory,
  // not the whole replay.  Sets `ended` when the job's newest event is
  // terminal or suspended.  Only the newest: an old terminal event followed
  // by a manual retry (or a resume after suspended) does not end the stream.
  // The newest is known once a batch comes back short, possibly empty after a
  // full one, so the end is found whatever the batch boundaries.
  // A fetch waits for a pool connection; a reader that left meanwhile (a
  // browser tab closed, a client timed out) costs no replay: ClientGone.
  const std::function<bool()> left = [&stream] { return reader_left(stream); };
  // Events to ask for: replay_batch, and after a batch cut by size about
  // twice what it kept, so a log of big events is not sized a thousand at a
  // time for the few each batch sends.
  std::int64_t ask = replay_batch;
  auto fetch = [&]() -> asio::awaitable<void> {
    pg::Params params = args(std::to_string(job_id), std::to_string(cursor));
    params.push_back(std::to_string(ask));
    // Rendered once for the streams at this cursor (shared_events).
    auto batch = co_await shared_events(*role, std::move(params), cursor, left);
    const core::EventBatch& b = batch->ev;
    if (!b.text.empty()) {
      // After its own text (a `rewound` note); a batch not yet written
      // first becomes its own text (there is none: each batch is written
      // before the next fetch).
      pending.flatten();
      pending.batch = batch;
      cursor = b.last_seq;
      last_kind = b.last_kind;
      last_created = b.last_created;
    }
    const std::int64_t fetched = b.fetched, kept = b.kept;
    more = fetched >= ask || fetched > kept;
    ask = fetched > kept ? std::max<std::int64_t>(kept, 1) * 2 : std::min<std::int64_t>(ask * 2, replay_batch);
    if (!more) ended = is_stream_end(last_kind);
  };
  // Reads the job row (core::rewind_check_sql), at a poll and after the
  // listener reconnected.  A rewound log (an asynchronous failover lost the
  // newest events, and the job's next ones took their seqs) is said with a
  // `rewound` event
  // whose id moves the reader's Last-Event-ID back, and the stream goes on
  // from the first new event, so it sends the new events and ends with the
  // job.  It waited for seqs past the cursor that the job might never
  // reach, and skipped the new events below it.  The job ended (or
  // suspended) with every event up to last_seq sent ends the stream, as at
  // its start.
  // Says the log was rewound (`event: rewound`, whose id moves the reader's
  // Last-Event-ID back) and moves the cursor back to `from`.
  auto rewound = [&](std::int64_t last, std::int64_t from) {
    pending.flatten();  // the note follows what was read before it
    pending.own += "id: " + std::to_string(from) + "\nevent: rewound\ndata: {\"after\":" + std::to_string(cursor) +
               ",\"last_seq\":" + std::to_string(last) + ",\"resume\":" + std::to_string(from) + "}\n\n";
    core::log("warn", "event log rewound",
              {{"job_id", id_s}, {"after", std::to_string(cursor)}, {"last_seq", std::to_string(last)},
               {"resume", std::to_string(from)}});
    cursor = from;
    last_kind.clear();
    last_created.reset();
  };
  auto check_job = [&]() -> asio::awaitable<void> {
    pg::Params p = {id_s, std::to_string(cursor), last_created};
    auto shared = co_await shared_read(*role, core::rewind_check_sql(), std::move(p), left);
    const pg::Result& r = *shared;
    if (r.rows() == 0) throw pg::Error("P0002", "job " + id_s + " does not exist");
    auto status = r.get(0, 0).value_or("");
    auto last = parse_int(r.get(0, 1).value_or("0")).value_or(0);
    if (auto resume = r.get(0, 2)) {
      rewound(last, parse_int(*resume).value_or(0));
      more = true;  // fetch after it at once
    } else if (last <= cursor && is_stream_end(status)) {
      ended = true;
    }
  };

  std::optional<HttpError> failure;
  try {
    co_await fetch();
    if (pending.empty() && !ended) {
      // Nothing after the cursor: a job already at its end has nothing more to
      // say; 204 tells EventSource not to reconnect.
      // Shared: a burst of opens of one job (every browser reconnecting
      // after a gateway restart) reads its row once.
      auto shared = co_await shared_read(*role, job_end_sql, args(id_s), left);
      const pg::Result& r = *shared;
      if (r.rows() == 0) throw pg::Error("P0002", "job " + id_s + " does not exist");
      auto status = r.get(0, 0).value_or("");
      auto last = parse_int(r.get(0, 1).value_or("0")).value_or(0);
      // A cursor past the job's last event names an event the job no longer
      // has: its log was rewound while the reader was away (an asynchronous
      // failover lost the newest events) or reset (a restore).  No event
      // would pass it until the job wrote that many more, and those it would
      // skip.  Where the reader's events and the job's diverge is not
      // known (the cursor is all a reconnect carries), so the stream says
      // `rewound` to 0 and sends the whole log.  It answered 400, which
      // EventSource gives up on, and the dashboard's own reconnects
      // (?after= its last event) met it every time, for ever.
      if (cursor > last) {
        rewound(last, 0);
        co_await fetch();
      } else if (last <= cursor && is_stream_end(status)) {
        // No Content-Length: a 204 must not carry one (RFC 9110 §8.6), and
        // prepare_payload() wrote "Content-Length: 0".
        Response res{bhttp::status::no_content, req.version()};
        res.set(bhttp::field::server, "bgexec");
        res.set(bhttp::field::cache_control, "no-store");
        res.set("X-Content-Type-Options", "nosniff");  // as every answer (README)
        res.keep_alive(false);
        stream.expires_after(10s);
        co_await bhttp::async_write(stream, res, use_tuple);
        co_return;
      }
    }
  } catch (const pg::Error& e) {
    failure = from_pg(e);
  } catch (const HttpError& e) {
    failure = e;
  } catch (const ClientGone&) {
    co_return;
  }
  if (failure) {
    co_await reply_error(*failure);
    co_return;
  }

  // Writes `head`, then `data`'s own text and its batch, in one gathered
  // write (the shared batch is sent from where it is, never copied).
  const std::string no_head;
  auto send = [&](const std::string& head, const StreamPending& data) -> asio::awaitable<bool> {
    std::array<asio::const_buffer, 3> bufs;
    bufs[0] = asio::buffer(head);
    bufs[1] = asio::buffer(data.own);
    if (data.batch) bufs[2] = asio::buffer(data.batch->ev.text);
    stream.expires_after(write_deadline(head.size() + data.size()));
    auto [ec, n] = co_await asio::async_write(stream, bufs, use_tuple);
    stream.expires_never();
    co_return !ec;
  };
  // Takes room for `data` (hold()): its own text for this stream, its
  // batch once for all the streams writing it, as it is in memory once
  // (200 streams of one job each counted their copy of a 2.5 MB event, 500
  // MB against an 8 MiB limit, and waited for room the event did not take).
  // The batch's room is held by `shared` as long as any stream writes it.
  auto take_room = [&](const StreamPending& data, Held& own,
                       std::shared_ptr<Held>& shared) -> std::optional<HttpError> {
    if (data.batch) {
      shared = data.batch->held.lock();
      if (!shared) {
        auto h = std::make_shared<Held>();
        if (auto e = hold(*h, held_, held_by_role_[*role], cfg_.response_memory, data.batch->ev.text.size()))
          return e;
        data.batch->held = h;
        shared = std::move(h);
      }
    }
    if (auto e = hold(own, held_, held_by_role_[*role], cfg_.response_memory, data.own.size())) {
      shared.reset();
      return e;
    }
    return std::nullopt;
  };
  // A batch the gateway has no room for (hold()) is not written: `no_room`,
  // and the stream waits for room, then reads it again (below).
  enum class Wrote { ok, gone, no_room };
  std::unique_ptr<Held> reserved;  // room taken for a batch read again (below)
  auto write = [&](StreamPending data) -> asio::awaitable<Wrote> {
    reserved.reset();
    Held own;
    std::shared_ptr<Held> shared;
    if (auto e = take_room(data, own, shared)) {
      log_held(*e, "event stream waits for room");
      co_return Wrote::no_room;
    }
    if (data.batch) ++batches_sent_;
    const bool ok = co_await send(no_head, data);
    co_return ok ? Wrote::ok : Wrote::gone;
  };
  std::string head =
      "HTTP/1.1 200 OK\r\nServer: bgexec\r\nContent-Type: text/event-stream\r\n"
      "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nX-Accel-Buffering: no\r\n"
      "Connection: close\r\n\r\n"
      "retry: 2000\n\n";
  // The first batch is counted before the head is sent, so a stream the
  // gateway has no room for gets 429 or 503, not an empty 200.
  {
    Held first;
    std::shared_ptr<Held> first_shared;
    if (auto e = take_room(pending, first, first_shared)) {
      log_held(*e, "event stream refused");
      pending = StreamPending();
      co_await reply_error(*e);
      co_return;
    }
    // One gathered write, not head + pending: that copied a first batch of
    // up to one event's size (any size) while the batch was still held.
    if (pending.batch) ++batches_sent_;
    if (!co_await send(head, pending)) co_return;
  }
  pending.clear();
  core::log("debug", "event stream", {{"job_id", id_s}, {"after", std::to_string(cursor)},
                                      {"streams", std::to_string(notifier_.subscribers())}});
  auto last_write = std::chrono::steady_clock::now();
  auto last_fetch = last_write;
  std::size_t junk = 0;  // bytes the reader sent after its request
  bool check = false;    // read the job row (check_job) before the next fetch
  // The sweep (sweep_streams) reads the job for this stream, with the
  // role's others, and sets watch.due when it has something for it.  A
  // stream whose last read failed polls on its own (`own_poll`), every
  // poll_every, until one succeeds.
  StreamWatch watch{job_id, &cursor, &last_created, &sub};
  struct Watched {
    std::map<std::uint64_t, StreamWatch*>& m;
    std::uint64_t id;
    ~Watched() { m.erase(id); }
  } watched{watches_[*role], next_watch_++};
  watched.m.emplace(watched.id, &watch);
  bool own_poll = false;
  // A batch the gateway had no room for: its size, and when the stream
  // looks for room again.  It ended the stream, a clean end to a reader
  // without the job's last event: 200 readers of one job, reading at full
  // speed, each held its own copy of a 2.5 MB event while the one thread
  // wrote them, and 153 of them were ended (an EventSource's reconnect then
  // met 429, and gave up).  The batch is dropped, so a waiting stream holds
  // nothing; it reads the batch again once hold() takes its size, checked
  // every 100 to 400 ms (no query meanwhile), and sends keepalives.  The
  // size is held (`reserved`) from then until the batch is written: the
  // waiting streams all found the same room free, all read and serialized
  // their batch again, and most were refused again (the 200 streams took
  // 97 s to end).
  std::size_t room_for = 0;
  auto room_check_at = std::chrono::steady_clock::time_point{};
  static thread_local std::minstd_rand room_jitter{std::random_device{}()};
  while (!ended) {
    auto now = std::chrono::steady_clock::now();
    if (room_for && now >= room_check_at) {
      auto room = std::make_unique<Held>();
      // hold() refusing counts nothing: its error is dropped, the stream waits on.
      if (!hold(*room, held_, held_by_role_[*role], cfg_.response_memory, room_for)) {
        reserved = std::move(room);
        room_for = 0;
        more = true;  // read it again at once
      } else {
        room_check_at = now + std::chrono::milliseconds(100 + room_jitter() % 300);
      }
    }
    if (!room_for && (more || sub.seen() > cursor || watch.due || (own_poll && now - last_fetch >= poll_every))) {
      // Where the stream is, for reading a batch it has no room for again.
      const auto at_cursor = cursor;
      const auto at_kind = last_kind;
      const auto at_created = last_created;
      const bool at_check = check;
      // At a poll, or after the listener reconnected (a failover, say):
      // the job row read before the fetch, which would send the new events
      // past the cursor of a log rewound and written past it again.  Kept
      // until it is read (a failed read is tried again at the next poll).
      if (!more && sub.seen() <= cursor) check = true;
      if (sub.seen() == std::numeric_limits<std::int64_t>::max()) check = true;
      // Cleared before the fetch: an announcement arriving during it is kept.
      sub.clear();
      watch.due = false;
      last_fetch = now;
      try {
        if (check) co_await check_job();
        check = false;
        if (!ended) co_await fetch();
        own_poll = false;
      } catch (const pg::Error& e) {
        more = false;  // retried at the next poll
        own_poll = true;
        // The role's queue for a connection was full (53400, Pool::
        // max_waiting): tried again within a second, at a moment of its
        // own, not at the next poll.  The announcement it was for is
        // cleared, and the streams woken with it, refused alike, all lost
        // it for a poll, then polled in step and were refused again: with
        // a thousand streams on one job, some waited a minute for an event.
        if (e.sqlstate() == "53400") {
          static thread_local std::minstd_rand jitter{std::random_device{}()};
          last_fetch = std::chrono::steady_clock::now() - poll_every +
                       std::chrono::milliseconds(100 + jitter() % 900);
          reserved.reset();
          continue;
        }
        // Purged meanwhile, or the token's role may no longer read it (its
        // bgexec_client or its membership in the gateway's login revoked):
        // every later poll would fail the same way, a warning every 3 s for
        // as long as the reader stayed, and the reader never heard.  The
        // stream ends; EventSource's reconnect then gets the 404 or 403.
        if (e.sqlstate() == "P0002" || e.sqlstate() == "42501") break;
        // Every stream polls: while the database is away, one line per
        // 10 s for them all, not one per stream per poll.
        static core::LogThrottle throttle(std::chrono::seconds(10));
        if (std::size_t skipped = 0; throttle.allow(&skipped))
          core::log("warn", "event fetch failed",
                    {{"job_id", id_s}, {"error", e.what()}, {"skipped", std::to_string(skipped)}});
      } catch (const ClientGone&) {
        co_return;
      }
      if (!pending.empty()) {
        const auto size = pending.size();
        auto wrote = co_await write(std::move(pending));
        pending.clear();
        if (wrote == Wrote::gone) co_return;
        if (wrote == Wrote::no_room) {
          cursor = at_cursor;
          last_kind = at_kind;
          last_created = at_created;
          check = at_check;
          ended = more = false;
          room_for = size;
          room_check_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(100 + room_jitter() % 300);
          continue;
        }
        last_write = std::chrono::steady_clock::now();
      }
      reserved.reset();  // nothing to write after all (a failed read, no new event)
      continue;
    }
    if (now - last_write >= keepalive_every) {
      StreamPending keepalive;
      keepalive.own = ": keepalive\n\n";
      if (co_await write(std::move(keepalive)) != Wrote::ok) co_return;
      last_write = now = std::chrono::steady_clock::now();
      if (sub.seen() > cursor) continue;
    }
    const auto next_poll = own_poll ? last_fetch + poll_every : std::chrono::steady_clock::time_point::max();
    auto until = std::min(room_for ? room_check_at : next_poll, last_write + keepalive_every);
    if (until > now) {
      // A reader sends nothing after its request, so the socket turning
      // readable means it left (EOF, reset): the stream ends now, instead of
      // polling for nobody until a keepalive write fails 15 to 30 s later.
      using namespace asio::experimental::awaitable_operators;
      auto woke = co_await (sub.wait(until - now) ||
                            stream.socket().async_wait(asio::socket_base::wait_read, use_tuple));
      // What it sends instead is read and dropped, up to 16 KiB: a client
      // sending without end kept the loop reading 512 bytes a turn.
      if (woke.index() == 1 && (reader_left(stream, &junk) || junk > 16 * 1024)) co_return;
    }
  }
  co_return;
}

}  // namespace bgexec::http
