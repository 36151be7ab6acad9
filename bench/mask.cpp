// Times the worker's masking (core::Masker, core::StreamMasker) on 8 MiB of
// text: the pathological case of many secrets sharing their first bytes and
// their escaped forms, and the common ones (one secret, none).  Forty-sixth
// round (bench/README.md).  Build against the daemon's core library:
//
//   scripts/build-daemon.sh
//   g++ -std=c++20 -O2 -Idaemon/src -o /tmp/mask-bench bench/mask.cpp daemon/build/libbgexec_core.a
//   /tmp/mask-bench [runs]          # default 3 runs of each case
//
// To compare with another version of the masker, compile that version's
// mask.cpp (and this file, against its mask.hpp) and put its object before
// the library on the command line.  Each line: case, run, seconds for
// add() of every secret one by one and a first mask() of one byte, for
// mask() of the whole text, and for a StreamMasker fed 64 KiB chunks; the
// masked text's length.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/mask.hpp"

namespace {

using bgexec::core::Masker;
using bgexec::core::StreamMasker;

constexpr std::size_t text_size = 8 << 20;

struct Case {
  const char* name;
  std::vector<std::string> secrets;
  std::string text;
};

std::string random_of(std::mt19937& rng, std::string_view alphabet, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
  return s;
}

// A hundred secrets "&</='>ä" + 24 random letters and digits; the text is
// pieces of their escaped forms as a JSON encoder writes them (Go's, Gson's,
// ensure_ascii, \/), each cut at a random length (one in eight whole), so
// that nearly every offset starts a form and most run many bytes into one.
Case pathological() {
  std::mt19937 rng(46);
  Case c{"100 secrets & < / = ' > a-umlaut", {}, {}};
  const std::string alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  for (int k = 0; k < 100; ++k) c.secrets.push_back("&</='>\xc3\xa4" + random_of(rng, alnum, 24));
  // Six of each secret's 24 forms (Gson's, Go's, ensure_ascii, \/, upper
  // hex), and the secret.
  const std::vector<std::string> heads = {
      "\\u0026\\u003c\\/\\u003d\\u0027\\u003e\\u00e4", "\\u0026\\u003C/\\u003D\\u0027\\u003E\\u00E4",
      "\\u0026\\u003c/='\\u003e\xc3\xa4",            "\\u0026\\u003c\\/='\\u003e\\u00e4",
      "&</='>\\u00e4",                             "&<\\/='>\xc3\xa4",
      "&</='>\xc3\xa4"};
  std::vector<std::string> forms;
  for (const std::string& s : c.secrets)
    for (const std::string& head : heads) forms.push_back(head + s.substr(8));
  while (c.text.size() < text_size) {
    const std::string& f = forms[rng() % forms.size()];
    c.text += rng() % 8 == 0 ? f : f.substr(0, 1 + rng() % f.size());
  }
  c.text.resize(text_size);
  return c;
}

// Log lines of words and numbers, the secret in one line of a thousand.
Case plain(std::size_t secrets) {
  std::mt19937 rng(7);
  Case c{secrets ? "1 secret, plain text" : "0 secrets, plain text", {}, {}};
  if (secrets) c.secrets.push_back("sk_live_51HqLyjWDarjtT1zdp7dcXv");
  const std::vector<std::string> words = {"GET", "/api/v1/items", "200", "took", "ms", "user=", "request", "id",
                                          "done", "processing", "batch", "of", "rows", "ok", "level=info", "msg="};
  for (int line = 0; c.text.size() < text_size; ++line) {
    c.text += "2026-12-06T09:10:26Z ";
    for (int w = 0; w < 10; ++w) c.text += words[rng() % words.size()] + ' ';
    c.text += std::to_string(rng() % 100000);
    if (secrets && line % 1000 == 0) c.text += " token=" + c.secrets[0];
    c.text += '\n';
  }
  c.text.resize(text_size);
  return c;
}

// The earlier round's case: a hundred 40-digit hex secrets over hex.
Case hex() {
  std::mt19937 rng(11);
  const std::string digits = "0123456789abcdef";
  Case c{"100 hex secrets over hex", {}, {}};
  for (int k = 0; k < 100; ++k) c.secrets.push_back(random_of(rng, digits, 40));
  c.text = random_of(rng, digits, text_size);
  c.text.replace(1000, 40, c.secrets[42]);
  return c;
}

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 3;
  for (const Case& c : {pathological(), hex(), plain(1), plain(0)}) {
    for (int run = 1; run <= runs; ++run) {
      auto start = std::chrono::steady_clock::now();
      Masker m;
      for (const std::string& s : c.secrets) m.add(s);
      m.mask("x");  // a masker that builds its automaton lazily does it here
      const double add = since(start);
      start = std::chrono::steady_clock::now();
      const std::string whole = m.mask(c.text);
      const double mask = since(start);
      start = std::chrono::steady_clock::now();
      StreamMasker stream(m);
      std::string streamed;
      for (std::size_t at = 0; at < c.text.size(); at += 65536)
        streamed += stream.feed(std::string_view(c.text).substr(at, 65536));
      streamed += stream.flush();
      const double feed = since(start);
      std::printf("%-34s run %d  add %.4f s  mask %.3f s  stream %.3f s  out %zu%s\n", c.name, run, add, mask, feed,
                  whole.size(), streamed == whole ? "" : "  STREAM DIFFERS");
    }
  }
}
