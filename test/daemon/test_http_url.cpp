#include <gtest/gtest.h>

#include "core/http_url.hpp"

namespace bgexec::core {
namespace {

HttpUrl url(const char* text) {
  std::string error;
  auto u = parse_http_url(text, error);
  EXPECT_TRUE(u) << text << ": " << error;
  return u.value_or(HttpUrl{});
}

bool refused(const char* text) {
  std::string error;
  return !parse_http_url(text, error) && !error.empty();
}

bool allowed(const char* u, const char* prefix) { return http_url_allowed(url(u), url(prefix)); }

TEST(HttpUrl, Parses) {
  auto u = url("HTTP://Svc.Example:8080/a/b?x=1#frag");
  EXPECT_EQ(u.scheme, "http");
  EXPECT_EQ(u.host, "svc.example");
  EXPECT_EQ(u.port, 8080);
  EXPECT_EQ(u.target, "/a/b?x=1");
  EXPECT_EQ(u.path(), "/a/b");
  EXPECT_EQ(u.origin(), "http://svc.example:8080");
  EXPECT_EQ(url("http://h").target, "/");
  EXPECT_EQ(url("http://h?q").target, "/?q");
  EXPECT_EQ(url("http://h:80/").origin(), "http://h");
  EXPECT_EQ(url("http://[::1]:9/x").host, "[::1]");
  auto t = url("HTTPS://Svc/x");
  EXPECT_EQ(t.scheme, "https");
  EXPECT_EQ(t.port, 443);
  EXPECT_EQ(t.origin(), "https://svc");
  EXPECT_EQ(url("https://svc:80/").origin(), "https://svc:80");
  EXPECT_TRUE(refused("ws://h/"));
}

TEST(HttpUrl, Refuses) {
  EXPECT_TRUE(refused("ftp://h/"));
  EXPECT_TRUE(refused("h/path"));
  EXPECT_TRUE(refused("http:///x"));
  EXPECT_TRUE(refused("http://user@h/"));
  EXPECT_TRUE(refused("http://allowed.example@evil/"));
  EXPECT_TRUE(refused("http://h:/"));
  EXPECT_TRUE(refused("http://h:0/"));
  EXPECT_TRUE(refused("http://h:65536/"));
  EXPECT_TRUE(refused("http://h:8x/"));
  EXPECT_TRUE(refused("http://h /"));
  EXPECT_TRUE(refused("http://h/a b"));
  EXPECT_TRUE(refused("http://h/a\r\nX: y"));
  EXPECT_TRUE(refused("http://h\\evil/"));
  EXPECT_TRUE(refused("http://h/api/../admin"));
  EXPECT_TRUE(refused("http://h/api/%2e%2E/admin"));
  EXPECT_TRUE(refused("http://h/api/."));
  EXPECT_TRUE(refused("http://h/api%2F..%2Fadmin"));
  EXPECT_TRUE(refused("http://h/a%5cb"));
  // a path parameter after a dot segment: ".." to Tomcat and Jetty
  EXPECT_TRUE(refused("http://h/api/..;/admin"));
  EXPECT_TRUE(refused("http://h/api/.;/x"));
  EXPECT_TRUE(refused("http://h/api/%2e%2e;jsessionid=1/admin"));
  EXPECT_FALSE(refused("http://h/api/a;b/..x"));
  // percent-encodings a server may decode into another path
  EXPECT_TRUE(refused("http://h/api/%252e%252e/admin"));
  EXPECT_TRUE(refused("http://h/api/%252E/x"));
  EXPECT_TRUE(refused("http://h/api%252fx"));
  EXPECT_TRUE(refused("http://h/api%255cx"));
  EXPECT_TRUE(refused("http://h/api/%c0%ae%c0%ae/admin"));
  EXPECT_TRUE(refused("http://h/api/%C1%9C"));
  EXPECT_TRUE(refused("http://h/api/%e0%80%ae"));
  EXPECT_TRUE(refused("http://h/api/%f0%80%80%ae"));
  EXPECT_TRUE(refused("http://h/api/%ff"));
  EXPECT_TRUE(refused("http://h/api/..%00/x"));
  EXPECT_TRUE(refused("http://h/api/%u002e%u002e/x"));
  EXPECT_TRUE(refused("http://h/api/%2"));
  EXPECT_TRUE(refused("http://h/api/%zz"));
  // and those that are plain text stay
  EXPECT_FALSE(refused("http://h/api/100%25"));
  EXPECT_FALSE(refused("http://h/api/%2541"));
  EXPECT_FALSE(refused("http://h/api/caf%c3%a9"));
  EXPECT_FALSE(refused("http://h/api/%e2%82%ac"));
  EXPECT_FALSE(refused("http://h/api/%F0%9F%98%80"));
  EXPECT_FALSE(refused("http://h/api?q=%zz%252e"));
  EXPECT_TRUE(refused("http://[zz]/"));
  EXPECT_TRUE(refused("http://h%2eevil/"));
}

TEST(HttpUrl, PrefixBoundaries) {
  EXPECT_TRUE(allowed("http://allowed.example/x", "http://allowed.example"));
  EXPECT_TRUE(allowed("http://allowed.example/", "http://allowed.example/"));
  EXPECT_TRUE(allowed("http://ALLOWED.example/x", "http://allowed.example"));
  EXPECT_FALSE(allowed("http://allowed.example.evil/", "http://allowed.example"));
  EXPECT_FALSE(allowed("http://allowed.exampl/", "http://allowed.example"));
  EXPECT_FALSE(allowed("http://allowed.example:81/", "http://allowed.example"));
  EXPECT_TRUE(allowed("http://allowed.example:80/", "http://allowed.example"));
  EXPECT_TRUE(allowed("http://h/api", "http://h/api"));
  EXPECT_TRUE(allowed("http://h/api?x", "http://h/api"));
  EXPECT_TRUE(allowed("http://h/api/v1", "http://h/api"));
  EXPECT_FALSE(allowed("http://h/apix", "http://h/api"));
  EXPECT_FALSE(allowed("http://h/api", "http://h/api/"));
  EXPECT_TRUE(allowed("http://h/api/v1", "http://h/api/"));
  EXPECT_FALSE(allowed("http://h/other", "http://h/api/"));
  EXPECT_FALSE(allowed("http://h/", "http://h/api"));
  EXPECT_FALSE(allowed("https://h/api", "http://h/api"));
  EXPECT_FALSE(allowed("http://h/api", "https://h/api"));
  EXPECT_FALSE(allowed("https://h:80/api", "http://h/api"));
  EXPECT_TRUE(allowed("https://h:443/api/x", "https://h/api"));
}

TEST(HttpStatus, Retryable) {
  for (int s : {408, 429, 500, 502, 503, 504, 599}) EXPECT_TRUE(http_status_retryable(s)) << s;
  for (int s : {300, 301, 302, 304, 307, 400, 401, 403, 404, 409, 410, 422, 600, 0}) EXPECT_FALSE(http_status_retryable(s)) << s;
}

TEST(HttpStatus, RetryAfter) {
  EXPECT_EQ(parse_retry_after("3"), 3.0);
  EXPECT_EQ(parse_retry_after(" 120 "), 120.0);
  EXPECT_EQ(parse_retry_after("0"), 0.0);
  EXPECT_FALSE(parse_retry_after(""));
  EXPECT_FALSE(parse_retry_after("-1"));
  EXPECT_FALSE(parse_retry_after("1.5"));
  EXPECT_FALSE(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"));
  EXPECT_EQ(parse_retry_after("99999999999999999999"), 100 * 365.25 * 86400);
  // leading zeros: the value, not its length
  EXPECT_EQ(parse_retry_after("00000000000000000002"), 2.0);
  EXPECT_EQ(parse_retry_after("000"), 0.0);
}

}  // namespace
}  // namespace bgexec::core
