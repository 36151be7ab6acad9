#pragma once
// The rules of an "http" workflow step that need no socket: its URL as the
// worker reads it, the --allow-http prefixes that gate it, and how a
// response's status and Retry-After steer the step's failure.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bgexec::core {

// An absolute http(s) URL, split as the request is made from it.
struct HttpUrl {
  std::string scheme;  // "http" or "https"
  std::string host;    // lowercased; an IPv6 literal keeps its brackets
  std::uint16_t port = 80;  // the scheme's (80, 443) when the URL gives none
  std::string target;  // path and query as sent ("/" at least); no fragment
  std::uint16_t default_port() const;
  // scheme://host[:port], the port shown only when not the scheme's own.
  std::string origin() const;
  // The path alone (target up to '?').
  std::string path() const;
};

// Parses `text` as an absolute http or https URL; nullopt, with why in
// `error`, otherwise.  Refused: another scheme,
// userinfo ("user@host": "http://allowed.example@evil/" names host
// evil), an empty or malformed host or port, spaces and control
// characters, and a path with a "." or ".." segment (also percent-encoded:
// the server would resolve "/api/../admin" to "/admin", past a prefix
// "/api/").  A fragment is dropped (never sent).
std::optional<HttpUrl> parse_http_url(std::string_view text, std::string& error);

// Whether `url` is under the allowlist entry `prefix` (itself parsed by
// parse_http_url): same scheme (http://svc allows no https://svc), host and port, and the prefix's path is
// "/" (the whole origin), or ends in '/' and starts the URL's path, or is
// the URL's path up to a '/' boundary ("/api" allows "/api" and "/api/x",
// not "/apix").  Compared parsed, never as text, so neither
// "http://allowed.example@evil/" nor "http://allowed.example.evil/" passes
// "http://allowed.example".
bool http_url_allowed(const HttpUrl& url, const HttpUrl& prefix);

// Whether a failure with this HTTP status is worth a retry: 408, 429 and
// 5xx; not any other 4xx, nor a 3xx (redirects are not followed) nor an
// unknown class.
bool http_status_retryable(int status);

// A Retry-After header's delay in seconds, its seconds form only (digits,
// surrounding spaces allowed); nullopt for an HTTP-date or anything else.
// Capped at 100 years.
std::optional<double> parse_retry_after(std::string_view value);

}  // namespace bgexec::core
