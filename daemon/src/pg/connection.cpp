// Asynchronous libpq connection (see connection.hpp).
#include "pg/connection.hpp"

#include "core/json_input.hpp"
#include "core/logfmt.hpp"

#include <libpq-fe.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <system_error>
#include <thread>
#include <utility>

namespace bgexec::pg {

namespace {

constexpr unsigned oid_bool = 16, oid_int8 = 20, oid_int2 = 21, oid_int4 = 23, oid_oid = 26,
                   oid_json = 114, oid_float4 = 700, oid_float8 = 701, oid_numeric = 1700,
                   oid_jsonb = 3802;

}  // namespace

std::string one_line(const char* msg) {
  std::string s = msg ? msg : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  std::string out;
  for (char ch : s) {
    if (ch == '\n' || ch == '\t') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += ch;
    }
  }
  return out;
}

// Server notices (e.g. "terminating connection due to ...") go to the log as
// logfmt lines instead of libpq's raw stderr default, or to the sink.
void Connection::on_notice(void* arg, const char* message) {
  auto* self = static_cast<Connection*>(arg);
  if (self->notice_sink_) self->notice_sink_(one_line(message));
  else core::log("warn", "server notice", {{"conn", self->name_}, {"notice", one_line(message)}});
}

Error::Error(std::string sqlstate, const std::string& message, Fields fields)
    : std::runtime_error(message), sqlstate_(std::move(sqlstate)), fields_(std::move(fields)) {}

Error Error::lost(std::string sqlstate, const std::string& message, Fields fields) {
  Error e(std::move(sqlstate), message, std::move(fields));
  e.lost_ = true;
  return e;
}

core::ErrorClass Error::classify() const { return core::classify(sqlstate_, lost_); }

// The server converts text parameters to their types while binding and
// names the one that failed on the last line of CONTEXT ("unnamed portal
// parameter $2 = '...'"; translated with lc_messages, but always with
// "$N").  An error raised while the statement runs ends its CONTEXT with the
// function it came from, or has none.
std::size_t Error::failed_param() const {
  if (sqlstate_.rfind("22", 0) != 0) return 0;
  std::string_view ctx = fields_.context;
  while (!ctx.empty() && ctx.back() == '\n') ctx.remove_suffix(1);
  if (auto nl = ctx.rfind('\n'); nl != std::string_view::npos) ctx.remove_prefix(nl + 1);
  auto dollar = ctx.find('$');
  if (dollar == std::string_view::npos) return 0;
  std::size_t n = 0;
  auto [p, ec] = std::from_chars(ctx.data() + dollar + 1, ctx.data() + ctx.size(), n);
  return ec == std::errc{} ? n : 0;
}

// A database without the extension: schema "bgexec" does not exist
// (3F000), relation "bgexec.job" does not exist (42P01) or, after DROP
// EXTENSION left the schema behind, function bgexec.submit(...) does not
// exist (42883), whose server hint ("You might need to add explicit type
// casts") sent the user the wrong way.  A function missing from an
// installed extension is also what an extension older than this binary
// gives (built from an earlier checkout: one version, 0.1.0, no upgrade
// scripts), so that hint names both.
std::string Error::hint() const {
  const std::string& said = fields_.primary.empty() ? std::string(what()) : fields_.primary;
  // The server's own hint wins, but the cast hint of a function gone.
  if ((sqlstate_ == "3F000" || sqlstate_ == "42P01") && fields_.hint.empty() &&
      said.find("\"bgexec") != std::string::npos)
    return "is the bgexec extension installed in this database? (CREATE EXTENSION bgexec, as a superuser)";
  if (sqlstate_ == "42883" && said.rfind("function bgexec.", 0) == 0)
    return "is the bgexec extension installed in this database, from the same source as this binary? "
           "(CREATE EXTENSION bgexec, as a superuser; an older one lacks functions this binary calls: "
           "README, Troubleshooting)";
  return fields_.hint;
}

// Frees the PGresult.
void Result::Deleter::operator()(pg_result* r) const { PQclear(r); }

Result::Result(pg_result* r) : res_(r) {}

int Result::rows() const { return res_ ? PQntuples(res_.get()) : 0; }
int Result::columns() const { return res_ ? PQnfields(res_.get()) : 0; }
std::string Result::column_name(int c) const { return PQfname(res_.get(), c); }

std::size_t Result::memory() const { return res_ ? PQresultMemorySize(res_.get()) : 0; }

int Result::column(std::string_view name) const {
  for (int c = 0; c < columns(); ++c)
    if (name == PQfname(res_.get(), c)) return c;
  return -1;
}

bool Result::is_null(int r, int c) const { return PQgetisnull(res_.get(), r, c) != 0; }

std::string_view Result::value(int r, int c) const {
  return {PQgetvalue(res_.get(), r, c), static_cast<std::size_t>(PQgetlength(res_.get(), r, c))};
}

std::optional<std::string> Result::get(int r, int c) const {
  if (c < 0 || r >= rows() || is_null(r, c)) return std::nullopt;
  return std::string(value(r, c));
}

std::optional<std::string> Result::get(int r, std::string_view name) const {
  return get(r, column(name));
}

nlohmann::json Result::to_json(bool exact_numbers, std::size_t max_depth, std::string* too_deep) const {
  auto out = nlohmann::json::array();
  for (int r = 0; r < rows(); ++r) {
    auto row = nlohmann::json::object();
    for (int c = 0; c < columns(); ++c) {
      auto& cell = row[column_name(c)];
      if (is_null(r, c)) continue;  // stays null
      std::string v(value(r, c));
      switch (PQftype(res_.get(), c)) {
        case oid_bool: cell = (v == "t"); break;
        case oid_int2: case oid_int4: case oid_int8: case oid_oid: {
          // Exact in an int64 (an oid too): no parser needed.
          std::int64_t n = 0;
          auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
          if (ec == std::errc{} && end == v.data() + v.size()) cell = n;
          else cell = v;
          break;
        }
        case oid_float4: case oid_float8: case oid_numeric:
        case oid_json: case oid_jsonb: {
          // As nlohmann::json::parse, the last of two keys; past max_depth
          // (or not JSON to this parser) the text.
          auto in = core::parse_json_input(v, max_depth, core::DuplicateKeys::last_wins,
                                           exact_numbers ? core::Numbers::exact : core::Numbers::doubles);
          if (in.error == core::JsonInput::Error::too_deep && too_deep && too_deep->empty())
            *too_deep = column_name(c);
          cell = in ? std::move(in.value) : nlohmann::json(v);
          break;
        }
        default: cell = v;
      }
    }
    out.push_back(std::move(row));
  }
  return out;
}

namespace {

std::string program_name = "bgexec";

std::string application_name(std::string_view connection) {
  std::string name = program_name;
  if (!connection.empty()) name.append(" ").append(connection);
  if (name.size() > 63) name.resize(63);  // NAMEDATALEN - 1: the server would cut it anyway
  return name;
}

}  // namespace

void set_program(std::string program) { program_name = std::move(program); }

ConnectParams::ConnectParams(const std::string& conninfo, std::string_view connection) {
  // client_encoding after dbname, so it wins over the conninfo's: the
  // daemon sends and reads UTF-8.  Left to the database's encoding, in
  // a LATIN1 database "café" was stored as "cafÃ©" (its bytes read as
  // LATIN1), and a payload with "é" submitted right failed its job as
  // ill-formed UTF-8.  The server converts, and refuses (22P05) a
  // character the database cannot hold.
  add("keepalives_idle", TcpDefaults::keepalives_idle);
  add("keepalives_interval", TcpDefaults::keepalives_interval);
  add("keepalives_count", TcpDefaults::keepalives_count);
  add("tcp_user_timeout", TcpDefaults::tcp_user_timeout);
  add("dbname", conninfo);
  add("fallback_application_name", application_name(connection));
  add("client_encoding", "UTF8");
  keywords.push_back(nullptr);
  values.push_back(nullptr);
}

ConnectParams::ConnectParams(const ConnectPlan& plan, const HostAttempt& host, std::string_view connection)
    : expand_dbname(0) {
  add("keepalives_idle", TcpDefaults::keepalives_idle);
  add("keepalives_interval", TcpDefaults::keepalives_interval);
  add("keepalives_count", TcpDefaults::keepalives_count);
  add("tcp_user_timeout", TcpDefaults::tcp_user_timeout);
  for (const auto& [k, v] : plan.options) add(k.c_str(), v);
  if (!host.host.empty()) add("host", host.host);
  if (!host.hostaddr.empty()) add("hostaddr", host.hostaddr);
  if (!host.port.empty()) add("port", host.port);
  add("fallback_application_name", application_name(connection));
  add("client_encoding", "UTF8");
  keywords.push_back(nullptr);
  values.push_back(nullptr);
}

void ConnectParams::add(const char* keyword, std::string value) {
  strings_.push_back(keyword);
  keywords.push_back(strings_.back().c_str());
  strings_.push_back(std::move(value));
  values.push_back(strings_.back().c_str());
}

namespace {

// libpq's lists: comma-separated, no quoting, empty entries kept.
std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::size_t from = 0;
  for (;;) {
    auto comma = s.find(',', from);
    out.push_back(s.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    if (comma == std::string::npos) return out;
    from = comma + 1;
  }
}

// A URI, as libpq's uri_prefix_length() tells one.
bool is_uri(std::string_view s) { return s.starts_with("postgresql://") || s.starts_with("postgres://"); }

// libpq's recognized_connection_string(): a string libpq expands (a URI or
// key=value pairs) rather than takes whole as a database name.
bool recognized(std::string_view s) { return is_uri(s) || s.find('=') != std::string_view::npos; }

// The options libpq reads from a recognized string; nullopt when it cannot
// parse it, its reason in *error (libpq's words: they may quote a password).
std::optional<std::map<std::string, std::string>> parse_conninfo(const std::string& conninfo,
                                                                 std::string* error = nullptr) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), &err);
  if (!opts) {
    if (error) {
      *error = err ? err : "out of memory";
      while (!error->empty() && (error->back() == '\n' || error->back() == ' ')) error->pop_back();
    }
    if (err) PQfreemem(err);
    return std::nullopt;
  }
  std::map<std::string, std::string> given;
  for (PQconninfoOption* o = opts; o->keyword; ++o)
    if (o->val) given[o->keyword] = o->val;
  PQconninfoFree(opts);
  return given;
}

bool blank(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }  // libpq's isspace

// The passwords of a URI, as written (%-escapes not decoded), found as
// libpq finds them: the userinfo is what comes before the first '@' that
// comes before any '/', its password after its first ':'; a query
// parameter's value is one when its key is password or sslpassword (or is
// %-escaped: it may decode to one).
std::vector<std::string> uri_passwords(std::string_view uri) {
  std::vector<std::string> out;
  const std::size_t from = uri.find("://") + 3;
  if (const std::size_t at = uri.find_first_of("@/", from); at != std::string_view::npos && uri[at] == '@')
    if (const std::size_t colon = uri.substr(0, at).find(':', from); colon != std::string_view::npos)
      out.emplace_back(uri.substr(colon + 1, at - colon - 1));
  for (std::size_t q = uri.find('?'); q != std::string_view::npos; q = uri.find('&', q + 1)) {
    const std::string_view param = uri.substr(q + 1, uri.find('&', q + 1) - q - 1);
    const std::size_t eq = param.find('=');
    const std::string_view key = param.substr(0, eq);
    if (eq != std::string_view::npos && (key.ends_with("password") || key.find('%') != std::string_view::npos))
      out.emplace_back(param.substr(eq + 1));
  }
  return out;
}

// What libpq may quote of a password in a key=value string it could not
// split: every token that starts after the first password's '=' (a
// keyword's place: after a blank or a closing quote, up to a blank or
// '='), for where the value ends is unknown (`password=abc def`).
std::vector<std::string> tokens_after_password(std::string_view s) {
  std::vector<std::string> out;
  std::size_t value = std::string_view::npos;
  for (std::size_t p = s.find("password"); p != std::string_view::npos && value == std::string_view::npos;
       p = s.find("password", p + 1)) {
    std::size_t q = p + 8;
    while (q < s.size() && blank(s[q])) ++q;
    if (q < s.size() && s[q] == '=') value = q + 1;
  }
  if (value == std::string_view::npos) return out;
  const std::string_view tail = s.substr(value);
  for (std::size_t i = 0; i < tail.size(); ++i) {
    if (blank(tail[i]) || (i > 0 && !blank(tail[i - 1]) && tail[i - 1] != '\'')) continue;
    std::size_t e = i;
    while (e < tail.size() && !blank(tail[e]) && tail[e] != '=') ++e;
    if (e > i) out.emplace_back(tail.substr(i, e - i));
  }
  return out;
}

// What a URI's writer meant as its password, in pieces, when libpq reads
// it otherwise: libpq ends the user info at the first '@' before any '/',
// so a '/' or '@' written raw in a password puts the rest of it in the
// host, port or database (`postgresql://u:se/cret@h/db` is host u, port
// "se", database "cret@h/db"), where a connect's message may quote it.
// The meant password runs from the first ':' after "://" to the last '@'
// before any '?'; its pieces are split where libpq splits.  None when
// libpq reads the same user info.
std::vector<std::string> misread_password(std::string_view uri) {
  std::vector<std::string> out;
  const std::size_t from = uri.find("://") + 3;
  const std::string_view head = uri.substr(from, uri.find('?', from) - from);
  const std::size_t last_at = head.rfind('@'), colon = head.find(':');
  if (last_at == std::string_view::npos || head.find_first_of("@/") == last_at || colon > last_at) return out;
  const std::string_view meant = head.substr(colon + 1, last_at - colon - 1);
  for (std::size_t i = 0; i <= meant.size();) {
    const std::size_t e = std::min(meant.find_first_of("/:@", i), meant.size());
    if (e > i) out.emplace_back(meant.substr(i, e - i));
    i = e + 1;
  }
  return out;
}

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '%'; }

}  // namespace

ConnectPlan connect_plan(const std::string& conninfo, const std::function<const char*(const char*)>& env) {
  ConnectPlan plan;
  std::map<std::string, std::string> given;
  if (recognized(conninfo)) {
    auto parsed = parse_conninfo(conninfo);
    if (!parsed) return plan;  // libpq says why when it tries the string
    given = std::move(*parsed);
  } else if (!conninfo.empty()) {
    given["dbname"] = conninfo;  // a bare database name, as libpq takes it
  }
  auto setting = [&](const char* keyword, const char* var) -> std::string {
    if (auto it = given.find(keyword); it != given.end()) return it->second;
    const char* v = env(var);
    return v ? v : "";
  };
  // connect_timeout as libpq reads it: whole seconds; 1 is 2; 0, a
  // negative or a bad value is no bound of libpq's (which reports a bad
  // value at the attempt), so the daemon's own.
  bool timeout_given = false;
  {
    const std::string t = setting("connect_timeout", "PGCONNECT_TIMEOUT");
    int v = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec == std::errc() && end == t.data() + t.size() && v > 0) {
      plan.timeout_s = std::max(v, 2);
      timeout_given = true;
    }
  }
  const std::string hosts = setting("host", "PGHOST"), addrs = setting("hostaddr", "PGHOSTADDR"),
                    ports = setting("port", "PGPORT");
  const auto host_list = split_list(hosts), addr_list = split_list(addrs), port_list = split_list(ports);
  const bool named = !hosts.empty(), addressed = !addrs.empty();
  const std::size_t n = addressed ? addr_list.size() : host_list.size();
  if (n < 2) return plan;
  if (named && addressed && host_list.size() != n) return plan;
  if (port_list.size() != 1 && port_list.size() != n) return plan;
  if (setting("target_session_attrs", "PGTARGETSESSIONATTRS") == "prefer-standby") return plan;
  for (std::size_t i = 0; i < n; ++i) {
    HostAttempt h;
    if (named) h.host = host_list[i];
    if (addressed) h.hostaddr = addr_list[i];
    h.port = port_list.size() == 1 ? port_list[0] : port_list[i];
    if ((named && h.host.empty()) || (addressed && h.hostaddr.empty())) {
      plan.hosts.clear();
      return plan;
    }
    plan.hosts.push_back(std::move(h));
  }
  for (auto& [k, v] : given)
    if (k != "host" && k != "hostaddr" && k != "port") plan.options.emplace_back(k, v);
  // Without connect_timeout the servers share the one attempt's 10 s (2 s
  // at least each): a worker's call bound, a third of its lease (10 s by
  // default), holds its connect, and a hung first server must leave time
  // for the next.
  if (!timeout_given) plan.timeout_s = std::max(2, 10 / static_cast<int>(n));
  return plan;
}

std::string redact_passwords(std::string msg, std::string_view conninfo) {
  const bool uri = is_uri(conninfo);
  const auto secrets = uri ? uri_passwords(conninfo) : tokens_after_password(conninfo);
  // A secret reads *** where the message has it between two of the marks
  // libpq puts around what it quotes: "…", and in a URI quoted whole
  // user:…@, password=…& and password=…" (a word of libpq's own text that
  // holds a short secret stays as it is).
  bool hidden = false;
  for (const auto& secret : secrets) {
    if (secret.empty()) continue;
    for (std::size_t p = msg.find(secret); p != std::string::npos; p = msg.find(secret, p + 1)) {
      const std::size_t end = p + secret.size();
      if ((p > 0 && std::string_view(":=\"").find(msg[p - 1]) == std::string_view::npos) ||
          (end < msg.size() && std::string_view("@&\"").find(msg[end]) == std::string_view::npos))
        continue;
      msg.replace(p, secret.size(), "***");
      hidden = true;
    }
  }
  if (hidden && !uri) msg += " (*** is a token after password=; a value with a space is quoted: password='a b')";
  // A misread password's pieces read *** wherever they stand as a word:
  // libpq quotes a port or a host, the server names a database.
  if (const auto pieces = uri ? misread_password(conninfo) : std::vector<std::string>{}; !pieces.empty()) {
    for (const auto& piece : pieces)
      for (std::size_t p = msg.find(piece); p != std::string::npos; p = msg.find(piece, p + 1)) {
        const std::size_t end = p + piece.size();
        if ((p > 0 && word_char(msg[p - 1])) || (end < msg.size() && word_char(msg[end]))) continue;
        msg.replace(p, piece.size(), "***");
      }
    msg += " (the URI's user info ends at its first '@' before a '/': a '/' or '@' in a password is written %2F or %40)";
  }
  return msg;
}

std::optional<std::string> conninfo_error(const std::string& conninfo) {
  if (!recognized(conninfo)) return std::nullopt;
  std::string why;
  if (parse_conninfo(conninfo, &why)) return std::nullopt;
  // Redacted before its blanks are folded: a password may hold a tab.
  return one_line(redact_passwords(std::move(why), conninfo).c_str());
}

Connection::Connection(asio::any_io_executor ex, std::string conninfo, std::string name)
    : ex_(ex), conninfo_(std::move(conninfo)), name_(std::move(name)), order_(std::move(ex)) {}

Connection::~Connection() { close(); }

bool Connection::connected() const { return conn_ && PQstatus(conn_) == CONNECTION_OK; }

void Connection::close() {
  prepared_.clear();  // they lived in the server session
  if (sd_) {
    sd_->release();  // libpq owns the socket: never let Asio close it
    sd_.reset();
  }
  fd_ = -1;
  if (conn_) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
}

// Rebinds the stream descriptor when libpq's socket changed (connect, reconnect).
void Connection::attach_socket() {
  int fd = conn_ ? PQsocket(conn_) : -1;
  if (fd == fd_ && sd_) return;
  if (sd_) {
    sd_->release();
    sd_.reset();
  }
  fd_ = fd;
  if (fd >= 0) sd_ = std::make_unique<asio::posix::stream_descriptor>(ex_, fd);
}

// Closes the connection and throws a lost-connection error with libpq's
// message: libpq failed a connect, a send or a read, or was never given a
// connection.
void Connection::fail(const std::string& what) {
  std::string msg = what + ": " + (conn_ ? one_line(PQerrorMessage(conn_)) : std::string("not connected"));
  close();
  throw Error::lost("08006", msg);
}

// Waits until the socket is readable (or writable).  A socket closed
// before or during the wait (close(): a Deadline, the notifier's recheck;
// a connect timing out) is a lost connection.
asio::awaitable<void> Connection::wait(bool write) {
  if (!sd_) throw Error::lost("08003", name_ + ": connection closed");
  auto [ec] = co_await sd_->async_wait(
      write ? asio::posix::descriptor_base::wait_write : asio::posix::descriptor_base::wait_read,
      asio::as_tuple(asio::use_awaitable));
  if (ec) throw Error::lost("08003", name_ + ": connection closed (" + ec.message() + ")");
}


namespace {

// A verbose connect error's text as the default one reads, its SQLSTATE
// (the last one named) in `sqlstate`: "FATAL:  53300: msg" is "FATAL:  msg",
// and its "LOCATION:" lines go.
std::string server_refusal(const char* text, std::string& sqlstate) {
  std::string in = text ? text : "", out;
  std::size_t at = 0;
  while (at < in.size()) {
    std::size_t nl = in.find('\n', at);
    std::string line = in.substr(at, nl == std::string::npos ? std::string::npos : nl + 1 - at);
    at = nl == std::string::npos ? in.size() : nl + 1;
    if (line.rfind("LOCATION:  ", 0) == 0) continue;
    // "<severity>:  XXXXX: " anywhere in the line (after "connection to server ... failed: ").
    for (std::size_t p = line.find(":  "); p != std::string::npos; p = line.find(":  ", p + 1)) {
      const std::size_t c = p + 3;
      if (c + 7 > line.size() || line.compare(c + 5, 2, ": ") != 0) continue;
      bool code = true;
      for (std::size_t i = c; i < c + 5; ++i)
        code = code && ((line[i] >= '0' && line[i] <= '9') || (line[i] >= 'A' && line[i] <= 'Z'));
      if (!code) continue;
      sqlstate = line.substr(c, 5);
      line.erase(c, 7);
      break;
    }
    out += line;
  }
  return out;
}

}  // namespace

asio::awaitable<void> Connection::connect() {
  co_await connect_any();
  if (own_timeouts_ || jit_off_) co_await set_own_settings_now();
}

namespace {

// The startup `options` libpq sent (the conninfo's, or PGOPTIONS), "" if none.
std::string startup_options(pg_conn* conn) {
  std::string options;
  if (PQconninfoOption* opts = PQconninfo(conn)) {
    for (PQconninfoOption* o = opts; o->keyword; ++o)
      if (std::strcmp(o->keyword, "options") == 0 && o->val) options = o->val;
    PQconninfoFree(opts);
  }
  return options;
}

// Whether `options`, lowercased with '-' read as '_', names setting `name`
// ("_c lock_timeout=", "__lock_timeout=", "_clock_timeout="), not as
// the end of another setting's name (deadlock_timeout) nor the start of
// one (jit_above_cost).
bool names_setting(const std::string& options, std::string_view name) {
  for (auto at = options.find(name); at != std::string::npos; at = options.find(name, at + 1)) {
    const bool word = at == 0 || !std::isalnum(static_cast<unsigned char>(options[at - 1])) ||
                      (options[at - 1] == 'c' && at >= 2 && options[at - 2] == '_');
    const auto end = at + name.size();
    const bool whole = end == options.size() || options[end] == '=' || options[end] == ' ';
    if (word && whole) return true;
  }
  return false;
}

// The session's own settings (set_own_timeouts: each timeout to 0;
// set_jit_off: jit off), but those `options` names ("-c
// statement_timeout=5s", "--lock-timeout=1s": the server reads '-' as '_'),
// which are the client's own; "" when there is none to set.  Not read from
// pg_settings' source ('client'): that view builds every setting's row,
// 3-10 ms a connect here, where set_config takes what SELECT 1 does.
// `interval_style`: IntervalStyle = postgres whatever `options` say, as
// the intervals such a session reads out are the API's ("00:01:30", not
// "@ 1 min 30 secs" or "PT1M30S" by the login's settings).
std::string own_settings_statement(std::string options, bool timeouts, bool jit_off, bool interval_style) {
  for (char& ch : options) ch = ch == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  std::vector<std::pair<const char*, const char*>> own;
  if (timeouts)
    for (const char* name : {"statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout"})
      own.emplace_back(name, "0");
  if (jit_off) own.emplace_back("jit", "off");
  std::string sql;
  for (const auto& [name, value] : own) {
    if (names_setting(options, name)) continue;
    sql += sql.empty() ? "SELECT " : ", ";
    sql += "pg_catalog.set_config('" + std::string(name) + "', '" + value + "', false)";
  }
  if (interval_style)
    sql += std::string(sql.empty() ? "SELECT " : ", ") + "pg_catalog.set_config('intervalstyle', 'postgres', false)";
  return sql;
}

}  // namespace

// Sets the session's own settings on the session just opened
// (set_own_timeouts, set_jit_off); a failure fails the connect, the
// session closed.
asio::awaitable<void> Connection::set_own_settings_now() {
  const std::string sql = own_settings_statement(startup_options(conn_), own_timeouts_, jit_off_, interval_style_);
  if (sql.empty()) co_return;
  if (!PQsendQuery(conn_, sql.c_str())) fail(name_ + ": send");
  co_await flush_out();
  std::optional<Error> err;
  co_await read_results(err);
  if (err) {
    close();
    throw Error::lost(err->sqlstate(), name_ + ": " + err->what(), err->fields());
  }
}

pg_conn* Connection::release_blocking() {
  prepared_.clear();
  if (sd_) {
    sd_->release();
    sd_.reset();
  }
  fd_ = -1;
  if (conn_) {
    PQsetNoticeProcessor(
        conn_, [](void*, const char* m) { core::log("warn", "server notice", {{"notice", one_line(m)}}); },
        nullptr);
    PQsetnonblocking(conn_, 0);
  }
  return std::exchange(conn_, nullptr);
}

asio::awaitable<void> Connection::connect_any() {
  close();
  const ConnectPlan plan = connect_plan(conninfo_);
  const std::string who = name_.empty() ? "" : name_ + ": ";
  if (plan.hosts.empty()) {
    ConnectParams params(conninfo_, name_);
    if (auto failed = co_await attempt(params, plan.timeout_s))
      throw Error::lost(failed->timed_out ? "08001" : !failed->sqlstate.empty() ? failed->sqlstate : "08006",
                        who + redact_passwords(failed->message, conninfo_));
    co_return;
  }
  // Each server in turn, as libpq's blocking connect tries them; why each
  // failed, in order, when none would do.
  std::string why, refused_state;  // the last server's SQLSTATE, if it refused the session
  bool all_timed_out = true;
  for (const HostAttempt& host : plan.hosts) {
    ConnectParams params(plan, host, name_);
    auto failed = co_await attempt(params, plan.timeout_s);
    if (!failed) co_return;
    all_timed_out = all_timed_out && failed->timed_out;
    if (!failed->sqlstate.empty()) refused_state = failed->sqlstate;
    if (!why.empty()) why += "; ";
    why += "host " + (host.host.empty() ? host.hostaddr : host.host) +
           (host.port.empty() ? "" : " port " + host.port) + ": " + failed->message;
  }
  throw Error::lost(all_timed_out ? "08001" : !refused_state.empty() ? refused_state : "08006",
                    who + redact_passwords(why, conninfo_));
}

asio::awaitable<std::optional<Connection::AttemptFailed>> Connection::attempt(const ConnectParams& params,
                                                                              int timeout_s) {
  close();
  conn_ = PQconnectStartParams(params.keywords.data(), params.values.data(), params.expand_dbname);
  if (!conn_) throw Error::lost("08001", name_ + ": out of memory");
  // Verbose while connecting, so a server's refusal names its SQLSTATE
  // (libpq keeps no result of it): "FATAL:  53300: too many connections
  // ...".  The code is taken out of the message, which reads as before,
  // and the session's errors are the default kind again once connected.
  PQsetErrorVerbosity(conn_, PQERRORS_VERBOSE);
  auto failed = [this](std::string what, bool timed_out) {
    AttemptFailed f{std::move(what), timed_out, {}};
    if (!timed_out && conn_) f.message += ": " + one_line(server_refusal(PQerrorMessage(conn_), f.sqlstate).c_str());
    close();
    return f;
  };
  if (PQstatus(conn_) == CONNECTION_BAD) co_return failed("connect", false);
  // libpq's connect_timeout applies to blocking connects only: bound ours here.
  asio::steady_timer timeout(ex_, std::chrono::seconds(timeout_s));
  auto state = std::make_shared<int>(0);  // 0 connecting, 1 timed out, 2 done
  timeout.async_wait([this, state](const boost::system::error_code& ec) {
    if (ec || *state != 0) return;  // finished first
    *state = 1;
    if (sd_) sd_->cancel();
  });
  PostgresPollingStatusType st = PGRES_POLLING_WRITING;
  for (;;) {
    attach_socket();
    if (st == PGRES_POLLING_OK) break;
    if (st == PGRES_POLLING_FAILED) {
      *state = 2;
      co_return failed("connect", false);
    }
    bool interrupted = false;
    if (*state != 1) {
      try {
        co_await wait(st == PGRES_POLLING_WRITING);
      } catch (const Error&) {
        interrupted = *state != 1;
      }
    }
    if (*state == 1) {
      *state = 2;
      co_return failed("connect timed out", true);
    }
    if (interrupted) {
      *state = 2;
      close();
      throw Error::lost("08001", name_ + ": connect interrupted");
    }
    st = PQconnectPoll(conn_);
  }
  *state = 2;
  if (PQsetnonblocking(conn_, 1) != 0) fail(name_ + ": setnonblocking");
  PQsetErrorVerbosity(conn_, PQERRORS_DEFAULT);
  PQsetNoticeProcessor(conn_, on_notice, this);
  ever_connected_ = true;
  co_return std::nullopt;
}

// A name for the server-side prepared statement of `sql`: FNV-1a of the
// text, so the same text always gets the same name (even across processes,
// which matters behind a pooler that shares server connections).
std::string Connection::statement_name(const std::string& sql) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : sql) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "bgexec_%016llx", static_cast<unsigned long long>(h));
  return buf;
}

asio::awaitable<void> Connection::flush_out() {
  for (;;) {
    int f = PQflush(conn_);
    if (f == 0) break;
    if (f < 0) fail(name_ + ": flush");
    co_await wait(true);
  }
}

// Reads every result of the statement sent; the last non-error result is
// returned, the first error (if any) is stored in `err`.  In single-row mode
// each row's result goes to `on_row` instead (until an error), which may
// throw to end the statement.
asio::awaitable<Result> Connection::read_results(std::optional<Error>& err,
                                                 const std::function<void(Result)>& on_row) {
  Result last;
  for (;;) {
    while (PQisBusy(conn_)) {
      co_await wait(false);
      if (!conn_ || !PQconsumeInput(conn_)) fail(name_ + ": read");
    }
    PGresult* r = PQgetResult(conn_);
    if (!r) break;
    Result res(r);
    auto st = PQresultStatus(r);
    if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH) {
      // libpq hands the COPY result back on every call until the copy is
      // done, so this loop would spin for ever without yielding (a tenant's
      // sql step "COPY ... TO STDOUT" froze its worker).  Nothing here
      // speaks the copy protocol: the connection ends, and the server rolls
      // its transaction back.
      close();
      throw Error("0A000", name_ + ": COPY to or from the client is not supported");
    }
    if (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE || st == PGRES_NONFATAL_ERROR) {
      if (!err) {
        const char* code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        std::string state = code ? code : (PQstatus(conn_) == CONNECTION_BAD ? "08006" : "XX000");
        auto field = [r](int code) {
          const char* v = PQresultErrorField(r, code);
          return std::string(v ? v : "");
        };
        err.emplace(state, one_line(PQresultErrorMessage(r)),
                    Error::Fields{field(PG_DIAG_MESSAGE_PRIMARY), field(PG_DIAG_MESSAGE_DETAIL),
                                  field(PG_DIAG_MESSAGE_HINT), field(PG_DIAG_CONTEXT)});
      }
    } else if (st == PGRES_SINGLE_TUPLE && on_row) {
      if (!err) on_row(std::move(res));
    } else {
      last = std::move(res);
    }
  }
  // The error stored above (if any) came on a live session unless libpq
  // says the connection broke: then it is lost whatever the server's
  // SQLSTATE, and reported as the server's own class 08 error when it sent
  // one, else as libpq's.
  if (PQstatus(conn_) == CONNECTION_BAD) {
    if (err && err->sqlstate().rfind("08", 0) == 0) {
      auto lost = Error::lost(err->sqlstate(), err->what(), err->fields());
      close();
      throw lost;
    }
    fail(name_ + ": connection lost");
  }
  co_return last;
}

// libpq's parameter array: pointers into params (NULL for SQL NULL).
std::vector<const char*> Connection::c_values(const Params& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  return values;
}

// Sends sql as text with its parameters (one statement, extended protocol).
void Connection::send_text(const std::string& sql, const std::vector<const char*>& values) {
  if (!PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                         nullptr, nullptr, 0))
    fail(name_ + ": send");
}

Deadline::Deadline(Connection& conn, std::chrono::steady_clock::duration after) : timer_(conn.executor()) {
  if (after.count() <= 0) return;
  timer_.expires_after(after);
  timer_.async_wait([st = state_, &conn](const boost::system::error_code& ec) {
    if (ec || st->done) return;
    st->fired = true;
    conn.cancel();  // the server's side (a commit waiting for a standby, say)
    conn.close();   // ours: the pending wait ends with an Error
  });
}

Deadline::~Deadline() {
  state_->done = true;
  timer_.cancel();
}

Error Connection::unanswered(std::chrono::steady_clock::duration bound) const {
  char s[32];
  std::snprintf(s, sizeof s, "%g", std::chrono::duration<double>(bound).count());
  return Error::lost("08006", name_ + ": the database did not answer within " + s + " s; connection dropped");
}

namespace {
// The bytes a call sends: its statement's text and its parameters.
std::size_t sent_bytes(const std::string& sql, const Params& params) {
  std::size_t n = sql.size();
  for (const auto& p : params) n += p ? p->size() : 0;
  return n;
}
}  // namespace

// The call bound counts from the call's turn on the wire.
template <class T>
asio::awaitable<T> Connection::in_turn(asio::awaitable<T> call, std::size_t sent) {
  co_await order_.lock();
  FifoLock::Guard guard{order_};
  auto after = call_timeout_;
  if (after.count() > 0 && sent > send_allowance_from)
    after += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        send_allowance_per_mib * (static_cast<double>(sent) / (1 << 20)));
  Deadline bound(*this, after);
  try {
    co_return co_await std::move(call);
  } catch (const Error& e) {
    if (bound.fired()) {
      Error u = unanswered(after);
      if (e.unsent()) u.mark_unsent();  // (a connect the bound cut)
      throw u;
    }
    throw;
  }
}

asio::awaitable<void> Connection::open() { return in_turn(open_locked()); }

asio::awaitable<void> Connection::open_locked() {
  if (!connected()) co_await connect();
}

asio::awaitable<Result> Connection::query(const std::string& sql, const Params& params, bool prepare) {
  const std::size_t sent = sent_bytes(sql, params);  // the call's bound, and the recycle check
  return in_turn(query_locked(sql, params, prepare, sent), sent);
}

asio::awaitable<Result> Connection::query_locked(const std::string& sql, const Params& params, bool prepare,
                                                 std::size_t sent) {
  // A session the server ended while it sat idle (idle_session_timeout, a
  // script terminating idle backends) is opened again before the call, not
  // found dead by it: the call failed, the worker logged a warning and shut
  // its claims until the connection came back, once per idle spell.  Only
  // where the session holds no state of the caller's (set_reopen_when_ended_idle).
  if (reopen_idle_ && connected())
    if (auto why = ended_while_idle()) {
      core::log("info", "session ended by the server while idle, connecting again",
                {{"conn", name_}, {"reason", *why}});
      close();
    }
  // Until the statement goes out, a failure leaves it unsent (Error::unsent).
  try {
    if (!connected()) co_await connect();
  } catch (Error& e) {
    e.mark_unsent();
    throw;
  }

  const auto values = c_values(params);
  const int n = static_cast<int>(values.size());
  std::optional<Error> err;
  std::string stmt;
  if (prepare && prepare_ok_) {
    try {
      stmt = co_await prepared_name(sql, n);
    } catch (Error& e) {
      e.mark_unsent();
      throw;
    }
    if (!PQsendQueryPrepared(conn_, stmt.c_str(), n, values.data(), nullptr, nullptr, 0))
      fail(name_ + ": send");
  } else {
    send_text(sql, values);
  }
  co_await flush_out();
  Result last = co_await read_results(err);
  // Running the text again is safe after any error: each call is one
  // autocommit statement, so an error means nothing was committed.
  if (err && !stmt.empty() && err->sqlstate() == "26000") {
    prepared_lost(*err);
    err.reset();
    send_text(sql, values);
    co_await flush_out();
    last = co_await read_results(err);
  } else if (err && !stmt.empty() && plan_changed(*err)) {
    err.reset();
    stmt = co_await prepare_again(sql, n, stmt);
    if (!PQsendQueryPrepared(conn_, stmt.c_str(), n, values.data(), nullptr, nullptr, 0))
      fail(name_ + ": send");
    co_await flush_out();
    last = co_await read_results(err);
  }
  if (err) throw *err;
  if (recycle_large_ && (sent > recycle_after || last.memory() > recycle_after) &&
      PQtransactionStatus(conn_) == PQTRANS_IDLE) {
    core::log("debug", "connection closed after a large call, to give back its buffers", {{"conn", name_}});
    close();  // the next call connects again; the result is the caller's
  }
  co_return last;
}

// The name of the server-side prepared statement of `sql`, prepared first
// when this session has not yet prepared it (a round trip, once).
asio::awaitable<std::string> Connection::prepared_name(const std::string& sql, int params) {
  std::string stmt = statement_name(sql);
  if (!prepared_.count(stmt)) {
    if (!PQsendPrepare(conn_, stmt.c_str(), sql.c_str(), params, nullptr)) fail(name_ + ": send");
    co_await flush_out();
    std::optional<Error> err;
    co_await read_results(err);
    // 42P05: a pooler's server connection already has it (same text, same name).
    if (err && err->sqlstate() != "42P05") throw *err;
    prepared_.insert(stmt);
  }
  co_return stmt;
}

// A prepared statement whose result's row type changed since it was
// prepared fails with 0A000 before it runs, and PostgreSQL never plans it
// again: the extension dropped and created again made bgexec.job_status
// another type, and a worker's finish_many (its status column) then failed
// every job until the worker restarted.
bool Connection::plan_changed(const Error& err) {
  return err.sqlstate() == "0A000" &&
         err.fields().primary.find("cached plan must not change result type") != std::string::npos;
}

// `stmt` deallocated and `sql` prepared again under its name.
asio::awaitable<std::string> Connection::prepare_again(const std::string& sql, int params, const std::string& stmt) {
  core::log("info", "prepared statement's result type changed, preparing it again",
            {{"conn", name_}, {"statement", stmt}});
  prepared_.erase(stmt);
  send_text("DEALLOCATE " + stmt, {});
  co_await flush_out();
  std::optional<Error> err;
  co_await read_results(err);
  if (err && err->sqlstate() != "26000") throw *err;  // 26000: already gone
  co_return co_await prepared_name(sql, params);
}

// The prepared statement is gone although we made it (26000): a
// transaction-mode pooler moved us to another server connection.  Texts run
// instead, from now on on this connection.
void Connection::prepared_lost(const Error& err) {
  core::log("warn", "prepared statements unavailable on this connection, not using them",
            {{"conn", name_}, {"error", err.what()}});
  prepare_ok_ = false;
  prepared_.clear();
}

// Whether the server closed this session while it sat idle, or sent it
// something unasked (a terminated backend's FATAL comes before the close):
// a session with nothing in flight has nothing to read.  Peeks, never reads.
bool Connection::closed_while_idle() const {
  if (fd_ < 0) return true;
  char byte;
  const auto n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// Whether the server ended this session while it sat idle outside a
// transaction, and how: it closed the socket, or sent an ErrorResponse
// unasked (the FATAL of idle_session_timeout, of pg_terminate_backend, of a
// shutdown), which only comes before it closes.  A NOTIFY, a ParameterStatus
// or a notice is no end.  Over TLS the bytes cannot be read: only a closed
// socket counts.  In a transaction (a sql step's, between its statements)
// the session is never replaced: its next statement must fail, not run
// outside the transaction.  Peeks, never reads.
std::optional<std::string> Connection::ended_while_idle() const {
  if (!conn_ || fd_ < 0 || PQtransactionStatus(conn_) != PQTRANS_IDLE) return std::nullopt;
  char buf[1024];
  const auto n = ::recv(fd_, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return std::string("the server closed the connection");
  if (n < 0)
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? std::nullopt
                                                                      : std::optional<std::string>(std::strerror(errno));
  if (PQsslInUse(conn_) || buf[0] != 'E') return std::nullopt;
  // 'E', a 4-byte length, then fields: a type byte and a string each; 'C'
  // is the SQLSTATE, 'M' the message.
  std::string code, message;
  for (ssize_t i = 5; i < n && buf[i] != '\0';) {
    const char type = buf[i++];
    const ssize_t start = i;
    while (i < n && buf[i] != '\0') ++i;
    if (i >= n) break;  // cut off by the peek
    if (type == 'C') code.assign(buf + start, static_cast<std::size_t>(i - start));
    if (type == 'M') message.assign(buf + start, static_cast<std::size_t>(i - start));
    ++i;
  }
  std::string why = one_line(message.empty() ? "an error from the server" : message.c_str());
  if (!code.empty()) why += " (" + code + ")";
  return why;
}

asio::awaitable<Result> Connection::query_after(const std::string& setup, const Params& setup_params,
                                                const std::string& sql, const Params& params) {
  return in_turn(query_after_locked(setup, setup_params, sql, params),
                 sent_bytes(setup, setup_params) + sent_bytes(sql, params));
}

asio::awaitable<Result> Connection::query_after_locked(const std::string& setup, const Params& setup_params,
                                                       const std::string& sql, const Params& params) {
  const auto setup_values = c_values(setup_params);
  const auto values = c_values(params);
  const int setup_n = static_cast<int>(setup_values.size());
  std::string stmt;
  try {
    if (connected() && closed_while_idle()) close();
    if (!connected()) co_await connect();
    if (prepare_ok_) stmt = co_await prepared_name(setup, setup_n);
  } catch (const Error& e) {
    throw SetupError(e);  // nothing sent yet
  }
  for (;;) {
    try {
      if (!PQenterPipelineMode(conn_)) fail(name_ + ": enter pipeline mode");
      const bool sent =
          (stmt.empty() ? PQsendQueryParams(conn_, setup.c_str(), setup_n, nullptr, setup_values.data(), nullptr,
                                            nullptr, 0)
                        : PQsendQueryPrepared(conn_, stmt.c_str(), setup_n, setup_values.data(), nullptr,
                                              nullptr, 0)) &&
          PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                            nullptr, nullptr, 0) &&
          PQpipelineSync(conn_);
      if (!sent) fail(name_ + ": send");
      co_await flush_out();
    } catch (const Error& e) {
      // The sync, sent last, has not all gone out: the server commits nothing.
      close();
      throw SetupError(e);
    }
    std::optional<Error> setup_err, err;
    Result last;
    try {
      co_await read_results(setup_err);
      last = co_await read_results(err);  // PGRES_PIPELINE_ABORTED after a setup error
      for (bool synced = false; !synced;) {
        while (PQisBusy(conn_)) {
          co_await wait(false);
          if (!conn_ || !PQconsumeInput(conn_)) fail(name_ + ": read");
        }
        PGresult* r = PQgetResult(conn_);
        if (!r) fail(name_ + ": no pipeline sync");
        synced = PQresultStatus(r) == PGRES_PIPELINE_SYNC;
        PQclear(r);
      }
    } catch (const Error&) {
      // The connection broke.  The server answers in order and commits at
      // the sync, after `sql`: when its answer to `setup` was an error (a
      // FATAL, say), `sql` never ran; without that answer, it may have.
      close();
      if (setup_err && !setup_err->fields().primary.empty())
        throw SetupError(Error::lost("08006", setup_err->what(), setup_err->fields()));
      throw;
    }
    if (!PQexitPipelineMode(conn_)) fail(name_ + ": exit pipeline mode");
    if (setup_err && !stmt.empty() && setup_err->sqlstate() == "26000") {
      prepared_lost(*setup_err);  // nothing ran: all of it again, as text
      stmt.clear();
      continue;
    }
    if (setup_err && !stmt.empty() && plan_changed(*setup_err)) {
      try {
        stmt = co_await prepare_again(setup, setup_n, stmt);  // nothing ran: all of it again
      } catch (const Error& e) {
        throw SetupError(e);
      }
      continue;
    }
    if (setup_err) throw SetupError(*setup_err);
    if (err) throw *err;
    co_return last;
  }
}

asio::awaitable<nlohmann::json> Connection::query_rows(const std::string& sql, const Params& params,
                                                      std::size_t max_bytes) {
  return in_turn(query_rows_locked(sql, params, max_bytes), sent_bytes(sql, params));
}

asio::awaitable<nlohmann::json> Connection::query_rows_locked(const std::string& sql, const Params& params,
                                                             std::size_t max_bytes) {
  if (!connected()) co_await connect();
  send_text(sql, c_values(params));
  PQsetSingleRowMode(conn_);  // refused only for a pipeline, which this is not
  co_await flush_out();
  auto rows = nlohmann::json::array();
  std::size_t bytes = 0;
  bool named = false;  // the columns' names checked (on the first row)
  std::optional<Error> err;
  co_await read_results(err, [&](Result row) {
    // A row is a JSON object: of two columns of one name (SELECT 1 AS x,
    // 2 AS x; SELECT 1, 2) the second's value was kept alone, silently.
    for (int c = 0; !named && c < row.columns(); ++c)
      for (int d = 0; d < c; ++d)
        if (row.column_name(c) == row.column_name(d)) {
          close();  // the server rolls the statement's transaction back
          throw Error("42701", name_ + ": column \"" + row.column_name(c) +
                                   "\" appears twice in the result, whose rows are JSON objects (one value a name):"
                                   " name each column (AS)");
        }
    named = true;
    // As JSON text: {"name":value,...}, a comma; a null is `null`.  Counted
    // so, a million one-byte rows are 10 MB, not 1 (they held 2.9 GB).
    bytes += 3;
    for (int c = 0; c < row.columns(); ++c)
      bytes += (row.is_null(0, c) ? 4 : row.value(0, c).size()) + row.column_name(c).size() + 4;
    if (bytes > max_bytes) {
      close();  // the server rolls the statement's transaction back
      throw Error("54000", name_ + ": the result is over " + std::to_string(max_bytes) +
                               " bytes as JSON, the limit of a sql step's rows");
    }
    std::string too_deep;
    auto json_rows = row.to_json(true, core::max_json_depth - 2, &too_deep);
    if (!too_deep.empty()) {
      close();
      throw Error("54000", name_ + ": column \"" + too_deep + "\" nests deeper than " +
                               std::to_string(core::max_json_depth - 2) + " levels, past what a step's output holds (" +
                               std::to_string(core::max_json_depth) + " with its rows)");
    }
    for (auto& r : json_rows) rows.push_back(std::move(r));
  });
  if (err) throw *err;
  co_return rows;
}

std::vector<Notification> Connection::drain_notifies() {
  std::vector<Notification> out;
  while (PGnotify* n = PQnotifies(conn_)) {
    out.push_back({n->relname ? n->relname : "", n->extra ? n->extra : ""});
    PQfreemem(n);
  }
  return out;
}

asio::awaitable<std::vector<Notification>> Connection::wait_notifications() {
  co_await order_.lock();
  FifoLock::Guard guard{order_};
  if (!connected()) co_await connect();
  for (;;) {
    auto out = drain_notifies();
    if (!out.empty()) co_return out;
    co_await wait(false);
    if (!conn_ || !PQconsumeInput(conn_)) fail(name_ + ": read");
  }
}

void Connection::cancel() {
  if (!conn_) return;
  // PQcancel opens a new connection to the server and waits for it: on a
  // thread of its own, so a slow or unreachable server never stalls the
  // event loop (and with it every heartbeat).  The PGcancel is independent
  // of conn_, which may be closed meanwhile.
  if (cancelling_->load()) return;
  if (PGcancel* c = PQgetCancel(conn_)) {
    cancelling_->store(true);  // only this thread sets it, the helper clears it
    try {
      std::thread([c, flag = cancelling_] {
        char buf[256];
        PQcancel(c, buf, sizeof buf);
        PQfreeCancel(c);
        flag->store(false);
      }).detach();
    } catch (const std::system_error& e) {  // no thread to be had (EAGAIN)
      cancelling_->store(false);
      PQfreeCancel(c);
      core::log("warn", "cannot cancel the statement", {{"conn", name_}, {"error", e.what()}});
    }
  }
}


}  // namespace bgexec::pg
