// `bgexec serve`: flags, signals and the event loop of the HTTP gateway.
#include "http/serve.hpp"

#include "core/duration.hpp"
#include "core/logfmt.hpp"
#include "core/number.hpp"
#include "http/gateway.hpp"
#include "pg/connection.hpp"
#include "util/hangup.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

namespace bgexec::http {

namespace {

constexpr const char* usage = R"(usage: bgexec serve [--db CONNINFO] [--listen HOST:PORT] --tokens FILE [--pool N]
                    [--statement-timeout SECONDS]

HTTP gateway: REST API, Server-Sent Events, Prometheus metrics, dashboard.
  --db CONNINFO      libpq connection string (else BGEXEC_DB, else PG* variables).
                     Its login role must be a member of every tenant role.
  --listen HOST:PORT address to listen on. Defaults to 127.0.0.1:8080.
  --tokens FILE      JSON object {"<bearer token>": "<database role>", ...}. Required.
  --pool N           query connections, 1..100, shared by all requests. Defaults to 4.
                     (One more connection LISTENs for every event stream.)
  --statement-timeout SECONDS
                     bound on each database statement of a request (lock
                     waits included); past it the request gets 504.
                     Seconds, or with a unit (500ms, 30s, 5m), 0..86400.
                     Defaults to 30; 0 = no bound.
)";

}  // namespace

int run_serve(const std::vector<std::string>& args) {
  GatewayConfig cfg;
  std::string conninfo_source = "BGEXEC_DB";
  if (const char* db = std::getenv("BGEXEC_DB")) cfg.conninfo = db;
  std::string listen = "127.0.0.1:8080", tokens_file;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << usage;
      return 0;
    }
    auto value = [&]() -> std::string {
      auto eq = a.find('=');
      if (eq != std::string::npos) return a.substr(eq + 1);
      if (i + 1 >= args.size()) throw std::runtime_error(a + " needs a value");
      return args[++i];
    };
    try {
      auto flag = a.substr(0, a.find('='));
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
    if (cfg.host.size() > 2 && cfg.host.front() == '[') cfg.host = cfg.host.substr(1, cfg.host.size() - 2);
    auto port = core::parse_integer(std::string_view(listen).substr(colon + 1), 0, 65535);
    if (!port)
      throw std::runtime_error("--listen must be HOST:PORT with a port from 0 to 65535");
    cfg.port = static_cast<unsigned short>(*port);
    if (tokens_file.empty()) throw std::runtime_error("--tokens FILE is required");
    std::ifstream in(tokens_file);
    if (!in) throw std::runtime_error("cannot read " + tokens_file);
    std::stringstream ss;
    ss << in.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object())
      throw std::runtime_error(tokens_file + ": must be a JSON object {token: role}");
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!it.value().is_string() || it.key().empty() || it.value().get<std::string>().empty())
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
  constexpr rlim_t reserve = 32, floor = 16;
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    if (nofile.rlim_cur < nofile.rlim_max) {
      rlimit raised = nofile;
      raised.rlim_cur = std::min<rlim_t>(nofile.rlim_max, 1 << 20);
      if (setrlimit(RLIMIT_NOFILE, &raised) == 0) nofile = raised;
    }
    const rlim_t own = reserve + cfg.pool_size;
    cfg.max_connections = nofile.rlim_cur > own + floor ? static_cast<std::size_t>(nofile.rlim_cur - own) : floor;
  }

  asio::io_context io(1);
  asio::ip::tcp::acceptor acceptor(io);
  try {
    asio::ip::tcp::endpoint ep(asio::ip::make_address(cfg.host), cfg.port);
    acceptor.open(ep.protocol());
    acceptor.set_option(asio::socket_base::reuse_address(true));
    acceptor.bind(ep);
    acceptor.listen(asio::socket_base::max_listen_connections);
  } catch (const std::exception& e) {
    std::cerr << "bgexec serve: cannot listen on " << listen << ": " << e.what() << "\n";
    return 1;
  }
  Gateway gw(io.get_executor(), cfg);
  asio::co_spawn(io, gw.notifier().run(), asio::detached);
  asio::co_spawn(io, gw.listen(acceptor), asio::detached);
  asio::signal_set signals(io, SIGINT, SIGTERM);
  add_hangup(signals);
  signals.async_wait([&](const boost::system::error_code&, int sig) {
    core::log("info", "stopping", {{"signal", std::to_string(sig)}});
    io.stop();
  });
  core::log("info", "serving", {{"listen", listen}, {"tokens", std::to_string(cfg.tokens.size())},
                                 {"max_connections", std::to_string(cfg.max_connections)}});
  io.run();
  std::fflush(stdout);
  std::fflush(stderr);
  // Coroutine frames parked in the loop (streams, LISTEN) are not unwound.
  std::_Exit(0);
}

}  // namespace bgexec::http
