#include "http_url.hpp"

#include <algorithm>

namespace bgexec::core {

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// A path segment with %2e (any case) read as '.': whether it is "." or "..".
bool dot_segment(std::string_view seg) {
  std::string plain;
  for (std::size_t i = 0; i < seg.size(); ++i) {
    if (seg[i] == '%' && i + 2 < seg.size() && seg[i + 1] == '2' && lower(seg[i + 2]) == 'e') {
      plain += '.';
      i += 2;
    } else {
      plain += seg[i];
    }
  }
  // A path parameter after it (";x", Tomcat's and Jetty's): "..;" is ".."
  // to them, past a prefix's path.
  plain = plain.substr(0, plain.find(';'));
  return plain == "." || plain == "..";
}

}  // namespace

std::uint16_t HttpUrl::default_port() const { return scheme == "https" ? 443 : 80; }

std::string HttpUrl::origin() const {
  std::string o = scheme + "://" + host;
  if (port != default_port()) o += ":" + std::to_string(port);
  return o;
}

std::string HttpUrl::path() const { return target.substr(0, target.find('?')); }

std::optional<HttpUrl> parse_http_url(std::string_view text, std::string& error) {
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) {
      error = "has a space, a control or a non-ASCII character (percent-encode it)";
      return std::nullopt;
    }
    if (c == '\\') {
      error = "has a backslash";
      return std::nullopt;
    }
  }
  const std::size_t sep = text.find("://");
  if (sep == std::string_view::npos) {
    error = "is not an absolute URL (expected http[s]://host[:port]/path)";
    return std::nullopt;
  }
  std::string scheme;
  for (char c : text.substr(0, sep)) scheme += lower(c);
  if (scheme != "http" && scheme != "https") {
    error = "has the scheme \"" + scheme + "\" (expected http or https)";
    return std::nullopt;
  }
  HttpUrl url;
  url.scheme = scheme;
  url.port = url.default_port();
  std::string_view rest = text.substr(sep + 3);
  const std::size_t auth_end = std::min(rest.find_first_of("/?#"), rest.size());
  std::string_view authority = rest.substr(0, auth_end);
  rest.remove_prefix(auth_end);
  if (authority.find('@') != std::string_view::npos) {
    error = "has userinfo (\"user@host\"), which is not allowed";
    return std::nullopt;
  }
  std::string_view port_text;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos || close == 1) {
      error = "has a malformed IPv6 host";
      return std::nullopt;
    }
    for (char c : authority.substr(1, close - 1))
      if (!is_hex(c) && c != ':' && c != '.') {
        error = "has a malformed IPv6 host";
        return std::nullopt;
      }
    for (char c : authority.substr(0, close + 1)) url.host += lower(c);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        error = "has a malformed host";
        return std::nullopt;
      }
      has_port = true;
      port_text = after.substr(1);
    }
  } else {
    const std::size_t colon = authority.find(':');
    std::string_view host = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      has_port = true;
      port_text = authority.substr(colon + 1);
    }
    if (host.empty()) {
      error = "has no host";
      return std::nullopt;
    }
    for (char c : host) {
      if (!is_alnum(c) && c != '-' && c != '.' && c != '_') {
        error = "has a malformed host";
        return std::nullopt;
      }
      url.host += lower(c);
    }
  }
  if (has_port) {
    if (port_text.empty() || port_text.size() > 5 ||
        !std::all_of(port_text.begin(), port_text.end(), [](char c) { return is_digit(c); })) {
      error = "has a malformed port";
      return std::nullopt;
    }
    const unsigned long p = std::stoul(std::string(port_text));
    if (p == 0 || p > 65535) {
      error = "has a port out of range";
      return std::nullopt;
    }
    url.port = static_cast<std::uint16_t>(p);
  }
  rest = rest.substr(0, std::min(rest.find('#'), rest.size()));  // the fragment is never sent
  const std::size_t q = std::min(rest.find('?'), rest.size());
  std::string_view path = rest.substr(0, q);
  // Segments a server resolves, or a slash it may decode, move the request
  // out from under a prefix: refused, not normalised.
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t slash = std::min(path.find('/', start), path.size());
    if (dot_segment(path.substr(start, slash - start))) {
      error = "has a \".\" or \"..\" path segment";
      return std::nullopt;
    }
    start = slash + 1;
  }
  // Percent-encodings in the path: well-formed ("%" and two hex digits),
  // and none a server may decode into a way out from under a prefix: an
  // encoded slash or backslash, NUL, an encoded "%" before a dot, slash or
  // backslash (decoded twice, "%252e" is "."), or an overlong UTF-8 lead
  // byte ("%c0%ae" is "." to a lenient decoder).  A plain "%25" stays.
  auto byte_at = [&](std::size_t i) {
    return static_cast<int>(std::stoi(std::string(path.substr(i + 1, 2)), nullptr, 16));
  };
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '%') continue;
    if (i + 2 >= path.size() || !is_hex(path[i + 1]) || !is_hex(path[i + 2])) {
      error = "has a malformed percent-encoding in its path (\"%\" and two hex digits)";
      return std::nullopt;
    }
    const int b = byte_at(i);
    // The byte an encoding right after this one stands for, else -1.
    const int next = i + 5 < path.size() && path[i + 3] == '%' && is_hex(path[i + 4]) && is_hex(path[i + 5])
                         ? byte_at(i + 3)
                         : -1;
    // What an encoded "%" would be decoded with, the second time.
    std::string twice;
    if (b == '%' && i + 4 < path.size()) twice = {lower(path[i + 3]), lower(path[i + 4])};
    if (b == '/' || b == '\\') {
      error = "has an encoded slash or backslash in its path";
      return std::nullopt;
    }
    if (b == 0 || twice == "2e" || twice == "2f" || twice == "5c" || b == 0xc0 || b == 0xc1 || b >= 0xf5 ||
        (b == 0xe0 && next >= 0x80 && next <= 0x9f) || (b == 0xf0 && next >= 0x80 && next <= 0x8f)) {
      error = "has a percent-encoding in its path that a server may decode into another path (NUL, \"%25\" "
              "before a dot or slash, an overlong UTF-8 byte)";
      return std::nullopt;
    }
  }
  url.target = path.empty() ? "/" : std::string(path);
  url.target += rest.substr(q);
  return url;
}

bool http_url_allowed(const HttpUrl& url, const HttpUrl& prefix) {
  if (url.scheme != prefix.scheme || url.host != prefix.host || url.port != prefix.port) return false;
  const std::string pp = prefix.path();
  const std::string up = url.path();
  if (pp == "/") return true;
  if (pp.back() == '/') return up.rfind(pp, 0) == 0;
  return up == pp || up.rfind(pp + "/", 0) == 0;
}

bool http_status_retryable(int status) { return status == 408 || status == 429 || (status >= 500 && status <= 599); }

std::optional<double> parse_retry_after(std::string_view value) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (value.empty() || !std::all_of(value.begin(), value.end(), [](char c) { return is_digit(c); }))
    return std::nullopt;
  // (Leading zeros say nothing: "00000000000000000002" is 2 s, not 12
  // digits' worth.)
  while (value.size() > 1 && value.front() == '0') value.remove_prefix(1);
  constexpr double most = 100 * 365.25 * 86400;
  if (value.size() > 12) return most;
  return std::min(static_cast<double>(std::stoull(std::string(value))), most);
}

}  // namespace bgexec::core
