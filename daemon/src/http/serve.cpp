// `bgexec serve`: flags, signals and the event loop of the HTTP gateway.
#include "http/serve.hpp"

#include "core/duration.hpp"
#include "core/json_input.hpp"
#include "core/limits.hpp"
#include "core/logfmt.hpp"
#include "core/number.hpp"
#include "core/output.hpp"
#include "http/gateway.hpp"
#include "pg/connection.hpp"
#include "util/hangup.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/signal_set.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <cstring>

namespace bgexec::http {

namespace {

constexpr const char* usage = R"(usage: bgexec serve [--db CONNINFO] [--listen HOST:PORT] --tokens FILE [--pool N]
                    [--statement-timeout SECONDS] [--request-timeout SECONDS]
                    [--response-memory MIB]

HTTP gateway: REST API, Server-Sent Events, Prometheus metrics, dashboard.
  --db CONNINFO      libpq connection string (else BGEXEC_DB, else PG* variables).
                     Its login role must be a member of every tenant role.
  --listen HOST:PORT address to listen on: an IP address, [IPv6], or a host name
                     (every address it resolves to); :PORT is 0.0.0.0:PORT.
                     Defaults to 127.0.0.1:8080.
  --tokens FILE      JSON object {"<bearer token>": "<database role>", ...}. Required.
  --pool N           query connections, 1..100, shared by all requests. Defaults to 4.
                     (One more connection LISTENs for every event stream.)
  --statement-timeout SECONDS
                     bound on each database statement of a request (lock
                     waits included); past it the request gets 504.
                     Seconds, or with a unit (500ms, 30s, 5m), 0..86400.
                     Defaults to 30; 0 = no bound.
  --request-timeout SECONDS
                     a request's header and body must arrive whole within
                     this of the last answer (of the connection, for its
                     first); past it a request begun gets 408, and the
                     connection is closed.  Seconds, or with a unit
                     (500ms, 2m), over 0 and at most 86400.  Defaults to 120.
  --response-memory MIB
                     answers and event batches waiting to be read, in MiB,
                     at most; one role's at most half.  Past it a request
                     gets 429 (its role's half) or 503; an event stream is
                     refused so before it starts, and one running waits for
                     room (keepalives meanwhile).  1..1048576, default 256.
)";

// An error's text as the rest of a one-line message: "address already in use".
std::string reason(const boost::system::error_code& ec) {
  std::string m = ec.message();
  if (!m.empty()) m[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(m[0])));
  return m;
}

// 127.0.0.1:8080, [::1]:8080.
std::string show(const asio::ip::tcp::endpoint& ep) {
  auto a = ep.address().to_string();
  return (ep.address().is_v6() ? "[" + a + "]" : a) + ":" + std::to_string(ep.port());
}

// The addresses --listen names: the IP address itself, or every address a
// host name resolves to (localhost: 127.0.0.1 and ::1), each once.  Throws
// with a one-line message when the name does not resolve.
std::vector<asio::ip::tcp::endpoint> listen_endpoints(asio::io_context& io, const std::string& host,
                                                      unsigned short port) {
  boost::system::error_code ec;
  auto literal = asio::ip::make_address(host, ec);
  if (!ec) return {{literal, port}};
  asio::ip::tcp::resolver resolver(io);
  auto found = resolver.resolve(host, std::to_string(port),
                                asio::ip::resolver_base::passive | asio::ip::resolver_base::numeric_service, ec);
  if (ec) throw std::runtime_error("cannot resolve --listen host " + host + ": " + reason(ec));
  std::vector<asio::ip::tcp::endpoint> out;
  for (const auto& r : found)
    if (std::find(out.begin(), out.end(), r.endpoint()) == out.end()) out.push_back(r.endpoint());
  if (out.empty()) throw std::runtime_error("cannot resolve --listen host " + host + ": no address");
  return out;
}

// Binds and listens on each endpoint, all on one port: port 0 takes the one
// the first bind got.  Of a host name's addresses, one the machine does not
// have (::1 without IPv6) is skipped while another is bound; any other failure
// (the port in use, say) throws with a one-line message.
std::vector<asio::ip::tcp::acceptor> bind_all(asio::io_context& io, std::vector<asio::ip::tcp::endpoint> eps,
                                              const std::string& host) {
  std::vector<asio::ip::tcp::acceptor> out;
  boost::system::error_code skipped;
  std::string skipped_at;
  for (auto ep : eps) {
    if (!out.empty()) ep.port(out.front().local_endpoint().port());
    asio::ip::tcp::acceptor a(io);
    boost::system::error_code ec;
    a.open(ep.protocol(), ec);
    if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
    // Several addresses: [::] must not also take IPv4's port from 0.0.0.0.
    if (!ec && eps.size() > 1 && ep.address().is_v6()) a.set_option(asio::ip::v6_only(true), ec);
    if (!ec) a.bind(ep, ec);
    if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) {
      out.push_back(std::move(a));
      continue;
    }
    const std::string at = show(ep) + (ep.address().to_string() == host ? "" : " (" + host + ")");
    if (eps.size() > 1 && (ec == asio::error::address_family_not_supported ||
                           ec == boost::system::errc::address_not_available)) {
      skipped = ec;
      skipped_at = at;
      continue;
    }
    throw std::runtime_error("cannot listen on " + at + ": " + reason(ec));
  }
  if (out.empty()) throw std::runtime_error("cannot listen on " + skipped_at + ": " + reason(skipped));
  return out;
}

}  // namespace

int run_serve(const std::vector<std::string>& args) {
  GatewayConfig cfg;
  std::string conninfo_source = "BGEXEC_DB";
  if (const char* db = std::getenv("BGEXEC_DB")) cfg.conninfo = db;
  std::string listen = "127.0.0.1:8080", tokens_file;
  // One value each, as the worker and the client commands take theirs: of
  // two, the last won unnoticed (--pool 5 --pool 50 ran with 50).
  std::set<std::string> seen;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--help" || a == "-h") return core::print("bgexec serve", usage);
    auto value = [&]() -> std::string {
      auto eq = a.find('=');
      if (eq != std::string::npos) return a.substr(eq + 1);
      if (i + 1 >= args.size()) throw std::runtime_error(a + " needs a value");
      return args[++i];
    };
    try {
      auto flag = a.substr(0, a.find('='));
      if (!seen.insert(flag).second) throw std::runtime_error(flag + " is given more than once");
      if (flag == "--db") cfg.conninfo = value(), conninfo_source = "--db";
      else if (flag == "--listen") listen = value();
      else if (flag == "--tokens") tokens_file = value();
      else if (flag == "--pool") {
        auto n = core::parse_integer(value(), 1, 100);
        if (!n) throw std::runtime_error("--pool must be a number from 1 to 100");
        cfg.pool_size = static_cast<std::size_t>(*n);
      }
      else if (flag == "--statement-timeout") {
        auto secs = core::parse_seconds(value());
        if (!secs || *secs > 86400) throw std::runtime_error("--statement-timeout must be 0..86400 seconds");
        cfg.statement_timeout_ms = static_cast<long>(*secs * 1000 + 0.5);
        if (*secs > 0 && cfg.statement_timeout_ms == 0) cfg.statement_timeout_ms = 1;
      }
      else if (flag == "--request-timeout") {
        auto secs = core::parse_seconds(value());
        if (!secs || *secs <= 0 || *secs > 86400)
          throw std::runtime_error("--request-timeout must be over 0 and at most 86400 seconds");
        cfg.request_timeout = std::max(std::chrono::milliseconds(1),
                                       std::chrono::milliseconds(static_cast<long>(*secs * 1000 + 0.5)));
      }
      else if (flag == "--response-memory") {
        auto n = core::parse_integer(value(), 1, 1 << 20);
        if (!n) throw std::runtime_error("--response-memory must be a number of MiB from 1 to 1048576");
        cfg.response_memory = static_cast<std::size_t>(*n) << 20;
      }
      else if (a.rfind("--", 0) != 0) throw std::runtime_error("unexpected argument \"" + a + "\"");
      else throw std::runtime_error("unknown flag " + a);
    } catch (const std::exception& e) {
      std::cerr << "bgexec serve: " << e.what() << "\n\n" << usage;
      return 2;
    }
  }
  auto colon = listen.rfind(':');
  try {
    // Every request would fail alike on a string libpq cannot parse.
    if (auto err = pg::conninfo_error(cfg.conninfo))
      throw std::runtime_error(conninfo_source + ": invalid connection string: " + *err);
    if (colon == std::string::npos) throw std::runtime_error("--listen must be HOST:PORT");
    cfg.host = listen.substr(0, colon);
    // An IPv6 host in brackets, closed and IPv6: `[::1:8080` (no `]`) was
    // read as `::`, every interface, where loopback was meant.
    if (!cfg.host.empty() && cfg.host.front() == '[') {
      if (cfg.host.size() < 3 || cfg.host.back() != ']' || cfg.host.find(':') == std::string::npos)
        throw std::runtime_error("--listen must be HOST:PORT, an IPv6 host in brackets ([::1]:8080), got \"" + listen +
                                 "\"");
      cfg.host = cfg.host.substr(1, cfg.host.size() - 2);
    }
    if (cfg.host.empty()) cfg.host = "0.0.0.0";  // :PORT, every IPv4 interface
    auto port = core::parse_integer(std::string_view(listen).substr(colon + 1), 0, 65535);
    if (!port)
      throw std::runtime_error("--listen must be HOST:PORT with a port from 0 to 65535");
    cfg.port = static_cast<unsigned short>(*port);
    if (tokens_file.empty()) throw std::runtime_error("--tokens FILE is required");
    std::ifstream in(tokens_file);
    if (!in) throw std::runtime_error("cannot read " + tokens_file + ": " + std::strerror(errno));
    std::stringstream ss;
    ss << in.rdbuf();
    // A token given twice would map to whichever role came last.
    auto parsed = core::parse_json_input(ss.str(), core::max_json_depth, core::DuplicateKeys::refuse);
    if (parsed.error == core::JsonInput::Error::duplicate_key)
      throw std::runtime_error(tokens_file + ": a token is given more than once");
    if (!parsed) throw std::runtime_error(tokens_file + " is not valid JSON: " + parsed.message);
    const auto& j = parsed.value;
    if (!j.is_object()) throw std::runtime_error(tokens_file + ": must be a JSON object {token: role}");
    // Without a token every /v1 request is 401: a mistake, not a setup.
    if (j.empty()) throw std::runtime_error(tokens_file + " has no tokens: it must map at least one token to a role");
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key().empty()) throw std::runtime_error(tokens_file + ": a token must not be empty");
      // One no request could present: a header's value loses its blanks at
      // either end (the gateway trims them too), and holds no control
      // character.  Taken, it was a token that could never authenticate.
      const std::string& t = it.key();
      if (t.front() == ' ' || t.front() == '\t' || t.back() == ' ' || t.back() == '\t' ||
          std::any_of(t.begin(), t.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
        throw std::runtime_error(tokens_file +
                                 ": a token must not begin or end with a blank, nor hold a control character");
      if (!it.value().is_string() || it.value().get<std::string>().empty())
        throw std::runtime_error(tokens_file + ": every token must map to a role name");
      cfg.tokens[it.key()] = it.value().get<std::string>();
    }
  } catch (const std::exception& e) {
    std::cerr << "bgexec serve: " << e.what() << "\n";
    return 2;
  }

  // Every connection holds a descriptor: the soft limit is raised to the
  // hard one (systemd's soft default is 1024), and connections may use all
  // but the pool's and a reserve for the process's own (listen connection,
  // event loop, logs).
  constexpr std::size_t reserve = 32, floor = 16;
  if (const std::size_t nofile = core::raise_nofile(); nofile > 0) {
    const std::size_t own = reserve + cfg.pool_size;
    cfg.max_connections = nofile > own + floor ? nofile - own : floor;
  }

  asio::io_context io(1);
  std::vector<asio::ip::tcp::acceptor> acceptors;
  std::string bound;  // what is listened on, the port bound for :0
  try {
    acceptors = bind_all(io, listen_endpoints(io, cfg.host, cfg.port), cfg.host);
  } catch (const std::exception& e) {
    std::cerr << "bgexec serve: " << e.what() << "\n";
    return 2;
  }
  for (const auto& a : acceptors) bound += (bound.empty() ? "" : ",") + show(a.local_endpoint());
  // What the gateway's own resources fail with (the signal set's pipe at
  // an open-file limit of 7: EMFILE) is one line and exit 1: uncaught, it
  // aborted (exit 134).
  std::optional<Gateway> gw;
  std::optional<asio::signal_set> signals;
  try {
    gw.emplace(io.get_executor(), cfg);
    signals.emplace(io, SIGINT, SIGTERM);
    add_hangup(*signals);
  } catch (const std::exception& e) {
    std::cerr << "bgexec serve: " << e.what() << "\n";
    return 1;
  }
  asio::co_spawn(io, gw->notifier().run(), asio::detached);
  asio::co_spawn(io, gw->sweep_streams(), asio::detached);
  for (auto& a : acceptors) asio::co_spawn(io, gw->listen(a), asio::detached);
  signals->async_wait([&](const boost::system::error_code&, int sig) {
    core::log("info", "stopping", {{"signal", std::to_string(sig)}});
    io.stop();
  });
  core::log("info", "serving", {{"listen", bound}, {"tokens", std::to_string(cfg.tokens.size())},
                                 {"max_connections", std::to_string(cfg.max_connections)},
                                 {"response_memory_mib", std::to_string(cfg.response_memory >> 20)}});
  try {
    io.run();
  } catch (const std::exception& e) {
    core::log("error", "gateway failed", {{"error", e.what()}});
    std::fflush(stdout);
    std::fflush(stderr);
    core::flush_log();
    std::_Exit(1);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  core::flush_log();
  // Coroutine frames parked in the loop (streams, LISTEN) are not unwound.
  std::_Exit(0);
}

}  // namespace bgexec::http
