// One request of an "http" step (see http_call.hpp).
#include "worker/http_call.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <chrono>

namespace bgexec::worker {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HttpCall::Impl {
  explicit Impl(asio::any_io_executor ex) : resolver(ex), socket(ex), timer(ex) {}
  tcp::resolver resolver;
  tcp::socket socket;
  asio::steady_timer timer;
  bool cancelled = false;
  bool timed_out = false;
  // Both ends: the pending operation completes with operation_aborted (or
  // a closed socket's error) at once.
  void stop() {
    boost::system::error_code ignored;
    resolver.cancel();
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
  }
};

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
  std::string host = req.url.host;
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  auto [rec, endpoints] = co_await impl->resolver.async_resolve(host, std::to_string(req.url.port),
                                                                 asio::as_tuple(asio::use_awaitable));
  if (rec || impl->cancelled || impl->timed_out) co_return failed("resolve", rec);
  auto [cec, ep] = co_await asio::async_connect(impl->socket, endpoints, asio::as_tuple(asio::use_awaitable));
  (void)ep;
  if (cec || impl->cancelled || impl->timed_out) co_return failed("connect", cec);

  http::request<http::string_body> request;
  request.method_string(req.method);
  request.target(req.url.target);
  request.version(11);
  std::string host_header = req.url.host;
  if (req.url.port != 80) host_header += ":" + std::to_string(req.url.port);
  request.set(http::field::host, host_header);
  request.set(http::field::user_agent, "bgexec/" BGEXEC_VERSION);
  request.set(http::field::connection, "close");
  if (req.body) {
    request.body() = std::move(*req.body);
  }
  for (auto& [name, value] : req.headers) request.set(name, value);
  if (req.body || req.method == "POST" || req.method == "PUT" || req.method == "PATCH") request.prepare_payload();
  auto [wec, written] = co_await http::async_write(impl->socket, request, asio::as_tuple(asio::use_awaitable));
  (void)written;
  if (wec || impl->cancelled || impl->timed_out) co_return failed("write", wec);

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.header_limit(64 * 1024);
  parser.body_limit(req.body_cap);
  if (req.method == "HEAD") parser.skip(true);
  auto [rdec, read] = co_await http::async_read(impl->socket, buffer, parser, asio::as_tuple(asio::use_awaitable));
  (void)read;
  if (rdec == http::error::body_limit && !impl->cancelled && !impl->timed_out) {
    impl->timer.cancel();
    out.too_large = true;
    co_return out;
  }
  if (rdec || impl->cancelled || impl->timed_out) co_return failed("read", rdec);
  impl->timer.cancel();
  boost::system::error_code ignored;
  impl->socket.shutdown(tcp::socket::shutdown_both, ignored);
  impl->socket.close(ignored);
  auto& res = parser.get();
  out.status = static_cast<int>(res.result_int());
  if (auto it = res.find(http::field::location); it != res.end()) out.location = std::string(it->value());
  if (auto it = res.find(http::field::retry_after); it != res.end()) out.retry_after = std::string(it->value());
  out.body = std::move(res.body());
  co_return out;
}

}  // namespace bgexec::worker
