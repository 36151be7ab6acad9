#pragma once
// One request of an "http" workflow step (Job::step_http): Boost.Beast on
// the worker's io_context, every stage asynchronous (resolve, connect, a
// TLS handshake for https, write, read), no thread of its own.  https
// verifies the server's chain against the system's CA store (and
// --http-ca-file), its name (SNI sent), TLS 1.2 at least.  Ended by cancel() (a stop, the
// step's deadline, the lease, a sibling's failure: the step's killer) or
// by its own timeout; either closes the socket, so the call returns at once.

#include "core/http_url.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bgexec::worker {

struct HttpRequest {
  core::HttpUrl url;
  std::string method;
  std::vector<std::pair<std::string, std::string>> headers;  // set after the defaults (Host, User-Agent)
  std::optional<std::string> body;
  double timeout_s = 30;  // the whole call, from the resolve to the last byte
  std::size_t body_cap = 0;  // most bytes of response body read
  std::string ca_file;       // https: CA certificates besides the system's ("" = none)
};

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string location;     // a redirect's Location
  std::string retry_after;  // the Retry-After header as sent
  bool too_large = false;   // the body passed body_cap (not read further)
  bool timed_out = false;   // timeout_s passed
  bool cancelled = false;   // cancel() ended it
  std::string error;        // a transport failure (resolve, connect, I/O, a malformed response)
  bool failed() const { return too_large || timed_out || cancelled || !error.empty(); }
};

// Why an https step of this worker would fail before it connects (the
// system's CA store or --http-ca-file `ca_file` cannot be loaded), empty
// when it would not.  A context that loads is built and kept for the steps.
std::string tls_problem(const std::string& ca_file);

class HttpCall {
 public:
  explicit HttpCall(boost::asio::any_io_executor ex);
  ~HttpCall();
  HttpCall(const HttpCall&) = delete;
  HttpCall& operator=(const HttpCall&) = delete;
  // Makes the request; never throws for what the network or the server
  // did (HttpResponse says).  One call per object.
  boost::asio::awaitable<HttpResponse> run(HttpRequest req);
  // Ends the call in flight (or the next one at once).
  void cancel();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace bgexec::worker
