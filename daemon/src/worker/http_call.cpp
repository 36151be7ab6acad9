// One request of an "http" step (see http_call.hpp).
#include "worker/http_call.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <openssl/ssl.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <tuple>

namespace bgexec::worker {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// The worker's TLS client context for a CA file ("" = the system's store
// alone): built once, on the event loop's thread, and kept (loading the
// system's store costs milliseconds).  nullptr, with why in `error`, when
// the store or the file cannot be loaded.
std::shared_ptr<ssl::context> tls_context(const std::string& ca_file, std::string& error) {
  static std::map<std::string, std::shared_ptr<ssl::context>> built;
  if (auto it = built.find(ca_file); it != built.end()) return it->second;
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  boost::system::error_code ec;
  ctx->set_default_verify_paths(ec);
  if (ec) {
    error = "the system's CA certificates cannot be loaded: " + ec.message();
    return nullptr;
  }
  if (!ca_file.empty()) {
    ctx->load_verify_file(ca_file, ec);
    if (ec) {
      error = "--http-ca-file " + ca_file + " cannot be loaded: " + ec.message();
      return nullptr;
    }
  }
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  ctx->set_verify_mode(ssl::verify_peer);
  built.emplace(ca_file, ctx);
  return ctx;
}

}  // namespace

std::string tls_problem(const std::string& ca_file) {
  std::string why;
  tls_context(ca_file, why);
  return why;
}

struct HttpCall::Impl {
  explicit Impl(asio::any_io_executor ex) : ex(ex), resolver(ex), socket(ex), timer(ex) {}
  asio::any_io_executor ex;
  tcp::resolver resolver;
  tcp::socket socket;                           // http
  std::optional<ssl::stream<tcp::socket>> tls;  // https (its own socket)
  std::shared_ptr<ssl::context> tls_ctx;        // kept while tls lives
  asio::steady_timer timer;
  bool cancelled = false;
  bool timed_out = false;
  tcp::socket& lowest() { return tls ? tls->next_layer() : socket; }
  // Closes the connection: the pending operation completes with
  // operation_aborted (or a closed socket's error) at once.
  void stop() {
    boost::system::error_code ignored;
    resolver.cancel();
    lowest().shutdown(tcp::socket::shutdown_both, ignored);
    lowest().close(ignored);
  }
};

namespace {

struct Exchanged {
  boost::system::error_code write, read;
};

using Parser = http::response_parser<http::string_body>;

// Sends the request and reads the final response into parser (made anew by
// `fresh`), on a plain socket or a TLS stream alike.  An interim response
// (1xx: 100 Continue, 103 Early Hints) is read past, as RFC 9110 15.2 asks
// of a client: it failed the step, not retried, as a status not 2xx.
template <class Stream, class Fresh>
asio::awaitable<Exchanged> exchange(Stream& s, http::request<http::string_body>& req, beast::flat_buffer& buffer,
                                    std::optional<Parser>& parser, Fresh fresh) {
  Exchanged out;
  auto [wec, written] = co_await http::async_write(s, req, asio::as_tuple(asio::use_awaitable));
  (void)written;
  out.write = wec;
  if (wec) co_return out;
  for (int interim = 0;; ++interim) {
    fresh(parser);
    auto [rec, read] = co_await http::async_read(s, buffer, *parser, asio::as_tuple(asio::use_awaitable));
    (void)read;
    out.read = rec;
    const unsigned status = rec ? 0 : parser->get().result_int();
    // (101 switches protocols: the final answer here.  At most 16 interim
    // answers, so a server cannot hold the step in them past its timeout
    // at no cost.)
    if (rec || status < 100 || status > 199 || status == 101 || interim == 16) co_return out;
  }
}

}  // namespace

HttpCall::HttpCall(asio::any_io_executor ex) : impl_(std::make_shared<Impl>(ex)) {}

HttpCall::~HttpCall() {
  impl_->timer.cancel();
  impl_->stop();
}

void HttpCall::cancel() {
  if (impl_->cancelled) return;
  impl_->cancelled = true;
  impl_->timer.cancel();
  impl_->stop();
}

asio::awaitable<HttpResponse> HttpCall::run(HttpRequest req) {
  auto impl = impl_;  // the timer's handler and this frame share it
  HttpResponse out;
  if (impl->cancelled) {
    out.cancelled = true;
    co_return out;
  }
  const bool https = req.url.scheme == "https";
  std::string host = req.url.host;
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (https) {
    std::string why;
    impl->tls_ctx = tls_context(req.ca_file, why);
    if (!impl->tls_ctx) {
      out.error = "tls: " + why;
      co_return out;
    }
    impl->tls.emplace(impl->ex, *impl->tls_ctx);
    // SNI for a name, not an address (RFC 6066); the chain verified and
    // the name (or address) matched against the certificate.
    boost::system::error_code not_address;
    (void)asio::ip::make_address(host, not_address);
    if (not_address) {
      if (!SSL_set_tlsext_host_name(impl->tls->native_handle(), host.c_str())) {
        out.error = "tls: the server name cannot be set";
        co_return out;
      }
    }
    impl->tls->set_verify_mode(ssl::verify_peer);
    impl->tls->set_verify_callback(ssl::host_name_verification(host));
  }
  const double secs = std::min(req.timeout_s, 10 * 365.25 * 86400);
  impl->timer.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(secs)));
  impl->timer.async_wait([impl](const boost::system::error_code& ec) {
    if (ec || impl->cancelled) return;
    impl->timed_out = true;
    impl->stop();
  });
  // The outcome of a stage that failed: the cancel or the timeout that
  // ended it, else its own error.
  auto failed = [&](const char* stage, const boost::system::error_code& ec) {
    impl->timer.cancel();
    if (impl->cancelled) out.cancelled = true;
    else if (impl->timed_out) out.timed_out = true;
    else out.error = std::string(stage) + ": " + ec.message();
    return out;
  };
  auto [rec, endpoints] = co_await impl->resolver.async_resolve(host, std::to_string(req.url.port),
                                                                 asio::as_tuple(asio::use_awaitable));
  if (rec || impl->cancelled || impl->timed_out) co_return failed("resolve", rec);
  auto [cec, ep] = co_await asio::async_connect(impl->lowest(), endpoints, asio::as_tuple(asio::use_awaitable));
  (void)ep;
  if (cec || impl->cancelled || impl->timed_out) co_return failed("connect", cec);
  if (https) {
    auto [hec] = co_await impl->tls->async_handshake(ssl::stream_base::client, asio::as_tuple(asio::use_awaitable));
    if (hec || impl->cancelled || impl->timed_out) co_return failed("tls handshake", hec);
  }

  http::request<http::string_body> request;
  request.method_string(req.method);
  request.target(req.url.target);
  request.version(11);
  std::string host_header = req.url.host;
  if (req.url.port != req.url.default_port()) host_header += ":" + std::to_string(req.url.port);
  request.set(http::field::host, host_header);
  request.set(http::field::user_agent, "bgexec/" BGEXEC_VERSION);
  request.set(http::field::connection, "close");
  if (req.body) request.body() = std::move(*req.body);
  for (auto& [name, value] : req.headers) request.set(name, value);
  if (req.body || req.method == "POST" || req.method == "PUT" || req.method == "PATCH") request.prepare_payload();

  // The read buffer holds what the parser has not taken yet: a header
  // (64 KiB at most, header_limit), a chunk's size line, a trailer.  Bounded:
  // unbounded, a chunk size line or a trailer that never ended grew it until
  // the step's timeout, to gigabytes in seconds (review rev-http).  The body
  // goes to the parser's string (body_cap), not here.
  beast::flat_buffer buffer(1 << 20);
  const bool head = req.method == "HEAD";
  const std::size_t body_cap = req.body_cap;
  std::optional<Parser> parser;
  auto fresh = [head, body_cap](std::optional<Parser>& p) {
    p.emplace();
    p->header_limit(64 * 1024);
    p->body_limit(body_cap);
    if (head) p->skip(true);
  };
  Exchanged x;
  if (https) x = co_await exchange(*impl->tls, request, buffer, parser, fresh);
  else x = co_await exchange(impl->socket, request, buffer, parser, fresh);
  if (x.write || impl->cancelled || impl->timed_out) co_return failed("write", x.write);
  // A server that closes without TLS's close_notify after a complete
  // response (many do, with Connection: close) read it all.
  if (x.read == ssl::error::stream_truncated && parser->is_done()) x.read = {};
  if (x.read == http::error::body_limit && !impl->cancelled && !impl->timed_out) {
    impl->timer.cancel();
    out.too_large = true;
    co_return out;
  }
  if (x.read || impl->cancelled || impl->timed_out) co_return failed("read", x.read);
  impl->timer.cancel();
  impl->stop();  // Connection: close; no TLS shutdown awaited
  auto& res = parser->get();
  out.status = static_cast<int>(res.result_int());
  if (auto it = res.find(http::field::location); it != res.end()) out.location = std::string(it->value());
  if (auto it = res.find(http::field::retry_after); it != res.end()) out.retry_after = std::string(it->value());
  out.body = std::move(res.body());
  co_return out;
}

}  // namespace bgexec::worker
