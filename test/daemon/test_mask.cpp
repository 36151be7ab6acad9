#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_input.hpp"
#include "core/mask.hpp"

namespace bgexec::core {
namespace {

using nlohmann::json;

TEST(Masker, EmptyIsIdentity) {
  Masker m;
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.mask("nothing secret here"), "nothing secret here");
  m.add("");
  EXPECT_TRUE(m.empty());  // empty secrets are ignored
}

TEST(Masker, MasksEveryOccurrence) {
  Masker m;
  m.add("hunter2");
  EXPECT_FALSE(m.empty());
  EXPECT_EQ(m.mask("pw=hunter2 again hunter2!"), "pw=*** again ***!");
  EXPECT_EQ(m.mask("hunter"), "hunter");
}

TEST(Masker, LongestFirst) {
  Masker m;
  m.add("abc");
  m.add("abcdef");
  // If "abc" were applied first, "def" would leak.
  EXPECT_EQ(m.mask("x abcdef y abc"), "x *** y ***");
}

TEST(Masker, OverlappingSecrets) {
  Masker m;
  m.add("token-123");
  m.add("123-xyz");
  EXPECT_EQ(m.mask("token-123-xyz"), "***-xyz");
  EXPECT_EQ(m.mask("a123-xyz"), "a***");
}

TEST(Masker, DuplicatesAndSingleChar) {
  Masker m;
  m.add("k");
  m.add("k");
  EXPECT_EQ(m.mask("kick"), "***ic***");
}

TEST(Masker, MaskJsonRecursesIncludingKeys) {
  Masker m;
  m.add("s3cret");
  const json in = {
      {"password", "s3cret"},
      {"s3cret", 1},
      {"list", {"a s3cret b", 2, nullptr, true}},
      {"nested", {{"deep", "xs3cretx"}}},
  };
  const json out = m.mask_json(in);
  EXPECT_EQ(out["password"], "***");
  EXPECT_TRUE(out.contains("***"));
  EXPECT_FALSE(out.contains("s3cret"));
  EXPECT_EQ(out["list"], json({"a *** b", 2, nullptr, true}));
  EXPECT_EQ(out["nested"]["deep"], "x***x");
  EXPECT_EQ(out.dump().find("s3cret"), std::string::npos);
}

// In place, as mask_json (which is a copy masked in place): keys holding a
// secret move to the masked key, nested ones too, and a value masks as a
// copy would.
TEST(Masker, MaskJsonInPlace) {
  Masker m;
  m.add("s3cret");
  m.add("4242");
  json v = {
      {"s3cret", {{"k-s3cret", "s3cret"}, {"n", 4242}}},
      {"list", {"a s3cret b", 2, nullptr, {{"s3cret", true}}}},
      {"keep", "plain"},
  };
  const json copy = m.mask_json(v);
  m.mask_json_in_place(v);
  EXPECT_EQ(v, copy);
  EXPECT_EQ(v, json::parse(R"({"***": {"k-***": "***", "n": "***"},
                               "list": ["a *** b", 2, null, {"***": true}], "keep": "plain"})"));
  // Without secrets, nothing changes.
  Masker none;
  json w = {{"s3cret", 1}};
  none.mask_json_in_place(w);
  EXPECT_EQ(w, json({{"s3cret", 1}}));
}

TEST(Masker, MaskJsonNumericSecret) {
  Masker m;
  m.add("4242");
  const json out = m.mask_json({{"pin", 4242}, {"other", 17}});
  EXPECT_EQ(out["pin"], "***");
  EXPECT_EQ(out["other"], 17);  // untouched numbers keep their type
}

TEST(LineSplitter, SplitsAcrossChunks) {
  LineSplitter s;
  EXPECT_TRUE(s.feed("hel").empty());
  EXPECT_EQ(s.feed("lo\nwor"), std::vector<std::string>{"hello"});
  EXPECT_EQ(s.feed("ld\n\nlast"), (std::vector<std::string>{"world", ""}));
  EXPECT_EQ(s.flush(), "last");
  EXPECT_EQ(s.flush(), "");
}

TEST(LineSplitter, StripsCarriageReturn) {
  LineSplitter s;
  EXPECT_EQ(s.feed("a\r\nb\r"), std::vector<std::string>{"a"});
  EXPECT_EQ(s.feed("\n"), std::vector<std::string>{"b"});
}

TEST(LineSplitter, SecretSplitAcrossReadsIsMasked) {
  Masker m;
  m.add("topsecret");
  LineSplitter s;
  std::vector<std::string> lines;
  for (const char* chunk : {"value=tops", "ecret done\n"}) {
    for (auto& l : s.feed(chunk)) lines.push_back(m.mask(l));
  }
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "value=*** done");
}

TEST(LineSplitter, TruncatesLongLines) {
  LineSplitter s(8);
  EXPECT_EQ(s.feed("12345678\n"), std::vector<std::string>{"12345678"});  // exactly at cap
  std::vector<std::string> got = s.feed("123456789abc");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], "12345678\u2026[truncated]");
  // The rest of the long line is dropped up to its newline.
  EXPECT_TRUE(s.feed("more junk").empty());
  EXPECT_EQ(s.feed("tail\nnext\n"), std::vector<std::string>{"next"});
  EXPECT_EQ(s.flush(), "");
}

TEST(LineSplitter, TruncatesWithinOneChunk) {
  LineSplitter s(4);
  EXPECT_EQ(s.feed("abcdefgh\nok\n"),
            (std::vector<std::string>{std::string("abcd") + "\u2026[truncated]", "ok"}));
}

TEST(LineSplitter, TruncationAccumulatedAcrossChunks) {
  LineSplitter s(5);
  EXPECT_TRUE(s.feed("abc").empty());
  EXPECT_EQ(s.feed("def\n"), std::vector<std::string>{std::string("abcde") + "\u2026[truncated]"});
}

TEST(LineSplitter, TruncationKeepsUtf8Whole) {
  LineSplitter s(4);
  // "ab" + "é" (2 bytes) + "é": the cap falls inside the second "é".
  const auto out = s.feed("ab\xc3\xa9\xc3\xa9\n");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], std::string("ab\xc3\xa9") + "\u2026[truncated]");
  LineSplitter t(3);
  const auto cut = t.feed("ab\xc3\xa9z\n");
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_EQ(cut[0], std::string("ab") + "\u2026[truncated]");
}

TEST(LineSplitter, DefaultCapIs64KiB) {
  LineSplitter s;
  const std::string big(64 * 1024, 'x');
  EXPECT_EQ(s.feed(big + "\n"), std::vector<std::string>{big});
  const auto out = s.feed(big + "y\n");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], big + "\u2026[truncated]");
}

// A step printing JSON writes a secret JSON-escaped; that text is stored
// as its captured stdout and log lines, so the escaped forms are masked too.
TEST(Masker, JsonEscapedForms) {
  Masker m;
  m.add("pa\"ss\\word");
  m.add("p\xc3\xa4ssw\xc3\xb6rd-\xf0\x9f\x94\x91");  // "pässwörd-🔑"
  m.add("line1\nline2\tend");
  m.add("ctl\x01x");
  EXPECT_EQ(m.mask(R"({"q": "pa\"ss\\word"})"), R"({"q": "***"})");
  EXPECT_EQ(m.mask(json({{"u", "p\xc3\xa4ssw\xc3\xb6rd-\xf0\x9f\x94\x91"}}).dump()), R"({"u":"***"})");
  // Python's json.dumps (ensure_ascii), and encoders writing upper-case hex
  EXPECT_EQ(m.mask(R"({"u": "p\u00e4ssw\u00f6rd-\ud83d\udd11"})"), R"({"u": "***"})");
  EXPECT_EQ(m.mask(R"({"u": "p\u00E4ssw\u00F6rd-\uD83D\uDD11"})"), R"({"u": "***"})");
  EXPECT_EQ(m.mask(R"(["line1\nline2\tend", "ctl\u0001x", "ctl\u0001X"])"), R"(["***", "***", "ctl\u0001X"])");
  // The raw forms still, and nothing else
  EXPECT_EQ(m.mask("pa\"ss\\word line1\nline2\tend"), "*** ***");
  EXPECT_EQ(m.mask(R"(pa\"ss\\wor)"), R"(pa\"ss\\wor)");
}

TEST(Masker, SlashEscapedForms) {
  // PHP's json_encode writes every '/' as "\/" (tokens often hold one):
  // the text then held the secret one unescape away from its value.
  Masker m;
  m.add("sk/live-42/\xc3\xa4");  // "sk/live-42/ä"
  EXPECT_EQ(m.mask(R"({"t": "sk\/live-42\/\u00e4"})"), R"({"t": "***"})");
  EXPECT_EQ(m.mask(R"({"t": "sk\/live-42\/\u00E4"})"), R"({"t": "***"})");
  EXPECT_EQ(m.mask("{\"t\": \"sk\\/live-42\\/\xc3\xa4\"}"), R"({"t": "***"})");
  EXPECT_EQ(m.mask(R"({"t": "sk/live-42/\u00e4"})"), R"({"t": "***"})");
  // and what is not the secret stays
  EXPECT_EQ(m.mask(R"(sk\/live-43)"), R"(sk\/live-43)");
}

// Go's encoding/json writes & < > (and U+2028, U+2029) as \u00XX by
// default, Gson & < > = ' too: the secret was stored one unescape away.
TEST(Masker, HtmlSafeEscapedForms) {
  Masker m;
  m.add("pa&ss<wd>");
  m.add("k=v'&/\xc3\xa4");             // "k=v'&/ä"
  m.add("sep\xe2\x80\xa8" "x\xe2\x80\xa9" "\xc3\xa4");  // "sep" U+2028 "x" U+2029 "ä"
  // Go (json.Marshal), and upper-case hex (.NET)
  EXPECT_EQ(m.mask(R"({"k":"pa\u0026ss\u003cwd\u003e"})"), R"({"k":"***"})");
  EXPECT_EQ(m.mask(R"({"k":"pa\u0026ss\u003Cwd\u003E"})"), R"({"k":"***"})");
  EXPECT_EQ(m.mask("{\"k\":\"k=v'\\u0026/\xc3\xa4\"}"), R"({"k":"***"})");
  EXPECT_EQ(m.mask("{\"k\":\"sep\\u2028x\\u2029\xc3\xa4\"}"), R"({"k":"***"})");
  // Gson, with '/' as \/ and non-ASCII escaped as well
  EXPECT_EQ(m.mask("{\"k\":\"k\\u003dv\\u0027\\u0026/\xc3\xa4\"}"), R"({"k":"***"})");
  EXPECT_EQ(m.mask(R"({"k":"k\u003dv\u0027\u0026\/\u00e4"})"), R"({"k":"***"})");
  EXPECT_EQ(m.mask(R"({"k":"k\u003Dv\u0027\u0026\/\u00E4"})"), R"({"k":"***"})");
  EXPECT_EQ(m.mask(R"({"k":"k=v'\u0026\/\u00e4"})"), R"({"k":"***"})");
  // One form per encoder: a mix of escaped and bare characters no encoder
  // writes is not registered, nor is what is not the secret.
  EXPECT_EQ(m.mask(R"(pa\u0026ss<wd>)"), R"(pa\u0026ss<wd>)");
  EXPECT_EQ(m.mask(R"(pa\u0026ss\u003cwd)"), R"(pa\u0026ss\u003cwd)");
}

// .NET's System.Text.Json writes " + ` & ' < > as \u00XX by default, in
// upper-case hex as its non-ASCII escapes: a secret holding one was stored
// one unescape away (\u0022 for the \" every other encoder writes).
TEST(Masker, DotnetEscapedForms) {
  Masker m;
  m.add("pa\"ss+w<rd>");
  m.add("k`\xc3\xa4'&/\n=");  // "k`ä'&/" newline "="
  m.add("q\"\\x");
  m.add("plain-\xc3\xa4");  // nothing .NET writes otherwise than ensure_ascii in upper hex
  EXPECT_EQ(m.mask(R"({"p":"pa\u0022ss\u002Bw\u003Crd\u003E"})"), R"({"p":"***"})");
  EXPECT_EQ(m.mask(R"({"k":"k\u0060\u00E4\u0027\u0026/\n="})"), R"({"k":"***"})");
  EXPECT_EQ(m.mask(R"({"q":"q\u0022\\x"})"), R"({"q":"***"})");
  EXPECT_EQ(m.mask(R"({"v":"plain-\u00E4"})"), R"({"v":"***"})");
  // .NET writes upper-case hex only, and never a mix of styles
  EXPECT_EQ(m.mask(R"(pa\u0022ss\u002bw\u003crd\u003e)"), R"(pa\u0022ss\u002bw\u003crd\u003e)");
  EXPECT_EQ(m.mask(R"(pa\u0022ss+w<rd>)"), R"(pa\u0022ss+w<rd>)");
  // One form more, and only for a secret that needs it
  Masker one, other;
  one.add("pass+word");
  other.add("pass-word");
  EXPECT_EQ(one.forms(), (std::vector<std::string>{"pass\\u002Bword", "pass+word"}));
  EXPECT_EQ(other.forms(), std::vector<std::string>{"pass-word"});
  Masker plain;
  plain.add("plain-\xc3\xa4");
  EXPECT_EQ(plain.forms().size(), 3u);  // the secret, \u00e4, \u00E4
  // Every character at once: at most 25 forms besides the secret
  Masker all;
  all.add("a\"+`&<>'=/\xc3\xa4\xe2\x80\xa8\n\x7f");
  EXPECT_LE(all.forms().size(), 26u);
  EXPECT_EQ(all.mask(R"(a\u0022\u002B\u0060\u0026\u003C\u003E\u0027=/\u00E4\u2028\n\u007F)"), "***");
}

TEST(Masker, JsonEscapedFormsOfInvalidUtf8) {
  Masker m;
  m.add("bad\xff\"x");  // no encoder writes it; the raw form is masked
  EXPECT_EQ(m.mask("a bad\xff\"x b"), "a *** b");
}

// Every way of cutting text into three chunks masks as mask() of the whole.
void expect_stream_equals_whole(const Masker& m, const std::string& text) {
  const std::string whole = m.mask(text);
  for (std::size_t a = 0; a <= text.size(); ++a) {
    for (std::size_t b = a; b <= text.size(); ++b) {
      StreamMasker sm(m);
      std::string got = sm.feed(std::string_view(text).substr(0, a));
      got += sm.feed(std::string_view(text).substr(a, b - a));
      got += sm.feed(std::string_view(text).substr(b));
      got += sm.flush();
      ASSERT_EQ(got, whole) << "cut at " << a << ", " << b;
    }
  }
}

TEST(StreamMasker, SameAsWholeWhateverTheCuts) {
  Masker m;
  m.add("line1\nline2");
  m.add("token-123");
  m.add("123-xyz");
  m.add("k");
  expect_stream_equals_whole(m, "a line1\nline2 b token-123-xyz line1\nlinE2 kk 123-xy");
  expect_stream_equals_whole(m, "line1\nline");  // a secret's prefix at the end is flushed as is
}

TEST(StreamMasker, HoldsBackOnlyAPossibleSecret) {
  Masker m;
  m.add("abc\ndef");
  StreamMasker sm(m);
  EXPECT_EQ(sm.feed("x abc\nd"), "x ");  // may still be the secret
  EXPECT_EQ(sm.feed("ex y\n"), "abc\ndex y\n");  // it was not
  EXPECT_EQ(sm.feed("abc\nde"), "");
  EXPECT_EQ(sm.feed("f!"), "***!");
  EXPECT_EQ(sm.flush(), "");
  Masker none;
  StreamMasker pass(none);
  EXPECT_EQ(pass.feed("abc\nd"), "abc\nd");
}

TEST(StreamMasker, SecretAddedBetweenFeeds) {
  Masker m;
  StreamMasker sm(m);
  EXPECT_EQ(sm.feed("before s3c"), "before s3c");
  m.add("s3cret");
  EXPECT_EQ(sm.feed("ret s3c"), "ret ");
  EXPECT_EQ(sm.feed("ret"), "***");
}

// A multi-line secret (a PEM key) printed to stderr: masked before the
// stream is cut into log lines, so no line of it is stored.
TEST(StreamMasker, MultiLineSecretNeverReachesALine) {
  Masker m;
  const std::string pem = "-----BEGIN KEY-----\nAAAAsecretline1\nBBBBsecretline2\n-----END KEY-----";
  m.add(pem);
  const std::string out = "key: " + pem + "\ndone\n";
  for (std::size_t cut = 0; cut <= out.size(); ++cut) {
    StreamMasker sm(m);
    LineSplitter ls;
    std::vector<std::string> lines = ls.feed(sm.feed(out.substr(0, cut)));
    for (auto& l : ls.feed(sm.feed(out.substr(cut)))) lines.push_back(l);
    for (auto& l : ls.feed(sm.flush())) lines.push_back(l);
    EXPECT_EQ(lines, (std::vector<std::string>{"key: ***", "done"})) << "cut at " << cut;
  }
}

// A number kept as stored (a raw number: 19.90) is masked by its text too.
TEST(Masker, MaskJsonRawNumber) {
  Masker m;
  m.add("19.90");
  const json out = m.mask_json({{"pin", raw_number("19.90")}, {"other", raw_number("2.50")}});
  EXPECT_EQ(out["pin"], "***");
  EXPECT_EQ(raw_number_text(out["other"]), "2.50");
}

// The reference: at each offset the longest secret that matches there.
std::string mask_by_hand(const std::string& text, std::vector<std::string> secrets) {
  std::sort(secrets.begin(), secrets.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const std::string* hit = nullptr;
    for (const auto& s : secrets)
      if (text.compare(i, s.size(), s) == 0) {
        hit = &s;
        break;
      }
    if (hit) out += "***", i += hit->size();
    else out += text[i++];
  }
  return out;
}

// Many secrets sharing first bytes, one-byte ones, and text made of their
// pieces: the same as the reference, whole and streamed in pieces.
TEST(Masker, ManySecretsAsTheReference) {
  std::mt19937 rng(7);
  auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); };
  const std::string abc = "abcd";
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> secrets;
    Masker m;
    for (std::size_t k = 0, n = 1 + pick(12); k < n; ++k) {
      std::string s;
      for (std::size_t j = 0, len = 1 + pick(round % 3 == 0 ? 2 : 6); j < len; ++j) s += abc[pick(abc.size())];
      if (std::find(secrets.begin(), secrets.end(), s) == secrets.end()) secrets.push_back(s);
      m.add(s);
    }
    std::string text;
    for (std::size_t j = 0, len = pick(200); j < len; ++j) text += (pick(8) == 0 ? 'x' : abc[pick(abc.size())]);
    const std::string expected = mask_by_hand(text, secrets);
    EXPECT_EQ(m.mask(text), expected) << text;
    StreamMasker stream(m);
    std::string streamed;
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t n = std::min(text.size() - at, 1 + pick(7));
      streamed += stream.feed(std::string_view(text).substr(at, n));
      at += n;
    }
    streamed += stream.flush();
    EXPECT_EQ(streamed, expected) << text;
  }
}

// The reference of mask_decided(): the reference pass, stopping at the first
// offset where a form longer than the rest of text starts with that rest.
std::size_t decided_by_hand(const std::string& text, const std::vector<std::string>& forms, std::string& out) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t rest = text.size() - i;
    const std::string* hit = nullptr;
    for (const auto& f : forms) {
      if (f.size() > rest && f.compare(0, rest, text, i, rest) == 0) return i;
      if (text.compare(i, f.size(), f) == 0 && (!hit || f.size() > hit->size())) hit = &f;
    }
    if (hit) out += "***", i += hit->size();
    else out += text[i++];
  }
  return text.size();
}

// Random secrets (prefixes, extensions and overlaps of one another, shared
// first bytes, multibyte UTF-8, invalid UTF-8, every character a JSON
// encoder escapes) and texts made of pieces of their escaped forms: mask(),
// a StreamMasker fed in random chunks, and mask_decided() on each prefix
// fed, all as the references over the masker's forms.
TEST(Masker, RandomSecretsAsTheReference) {
  std::mt19937 rng(46);
  auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); };
  const std::vector<std::string> atoms = {"a", "b", "ab", "&", "<", ">", "/", "=", "'", "\"", "\\", "\n", "\t", "+", "`",
                                          "\xc3\xa4", "\xc3\xa9", "\xe2\x80\xa8", "\xf0\x9f\x94\x91", "u", "0", "\xc3"};
  auto random_atoms = [&](std::size_t most) {
    std::string s;
    for (std::size_t k = 0, len = 1 + pick(most); k < len; ++k) s += atoms[pick(atoms.size() - (pick(10) == 0 ? 0 : 1))];
    return s;
  };
  for (int round = 0; round < 6000; ++round) {
    Masker m;
    std::vector<std::string> secrets;
    for (std::size_t k = 0, count = 1 + pick(round % 4 == 0 ? 2 : 6); k < count; ++k) {
      std::string s;
      if (secrets.empty() || pick(3) == 0) {
        s = random_atoms(round % 5 == 0 ? 2 : 6);
      } else {
        const std::string& other = secrets[pick(secrets.size())];
        switch (pick(4)) {
          case 0: s = other.substr(0, 1 + pick(other.size())); break;           // a prefix of another
          case 1: s = other + random_atoms(3); break;                          // extends another
          case 2: s = other.substr(pick(other.size())) + random_atoms(3); break;  // overlaps another's end
          default: s = other.substr(0, pick(other.size())) + random_atoms(2); break;  // shares its first bytes
        }
      }
      secrets.push_back(s);
      m.add(s);
    }
    const std::vector<std::string>& forms = m.forms();
    std::string text;
    for (std::size_t k = 0, pieces = pick(24); k < pieces; ++k) {
      if (pick(3) == 0) {
        text += random_atoms(3);
        continue;
      }
      const std::string& f = forms[pick(forms.size())];
      const std::size_t from = pick(3) == 0 ? pick(f.size()) : 0;
      text += f.substr(from, pick(2) == 0 ? std::string::npos : 1 + pick(f.size()));
    }
    const std::string expected = mask_by_hand(text, forms);
    ASSERT_EQ(m.mask(text), expected) << "round " << round << ": " << text;
    StreamMasker stream(m);
    std::string streamed;
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t n = std::min(text.size() - at, 1 + pick(round % 2 == 0 ? 4 : 40));
      streamed += stream.feed(std::string_view(text).substr(at, n));
      at += n;
      ASSERT_EQ(expected.compare(0, streamed.size(), streamed), 0) << "round " << round << ": " << text;
      if (pick(4) != 0) continue;  // the reference is quadratic in the fed text
      const std::string fed = text.substr(0, at);
      std::string want;
      const std::size_t want_n = decided_by_hand(fed, forms, want);
      std::string got;
      ASSERT_EQ(m.mask_decided(fed, got), want_n) << "round " << round << ": " << fed;
      ASSERT_EQ(got, want) << "round " << round << ": " << fed;
    }
    streamed += stream.flush();
    ASSERT_EQ(streamed, expected) << "round " << round << ": " << text;
  }
}

// A hundred secrets against 8 MiB of hex, the text every one of them may
// start at: compared with each offset's few candidates, not all hundred
// (the worker held its event loop 28 s for 15 MiB).  Milliseconds here;
// seconds before, past the generous bound.
TEST(Masker, ManySecretsOverLongText) {
  std::mt19937 rng(11);
  const std::string hex = "0123456789abcdef";
  auto random_hex = [&](std::size_t n) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s += hex[rng() % 16];
    return s;
  };
  Masker m;
  std::vector<std::string> secrets;
  for (int k = 0; k < 100; ++k) m.add(secrets.emplace_back(random_hex(40)));
  std::string text = random_hex(8 << 20);
  text.replace(1000, 40, secrets[42]);
  const auto start = std::chrono::steady_clock::now();
  const std::string out = m.mask(text);
  StreamMasker stream(m);
  std::string streamed;
  for (std::size_t at = 0; at < text.size(); at += 65536) streamed += stream.feed(std::string_view(text).substr(at, 65536));
  streamed += stream.flush();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(3));
  EXPECT_EQ(out.substr(1000, 3), "***");
  EXPECT_EQ(out.size(), text.size() - 37);
  EXPECT_EQ(streamed, out);
}

// From a mutation test of mask.cpp: cases no test above told apart.

// A line cut inside a 4-byte character (three bytes of it kept) loses the
// whole character, not only its last kept byte.
TEST(LineSplitter, TruncationDropsAWholeFourByteCharacter) {
  LineSplitter s(4);
  const auto out = s.feed("a\xF0\x9F\x98\x80z\n");  // a U+1F600 z: the cap falls after its third byte
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], std::string("a") + "\u2026[truncated]");
}

// A zero cap is one byte: each non-empty line keeps its first byte.
TEST(LineSplitter, ZeroCapIsOneByte) {
  LineSplitter s(0);
  EXPECT_EQ(s.feed("abc\n\n"), (std::vector<std::string>{std::string("a") + "\u2026[truncated]", ""}));
}

// The partial last line at EOF loses a trailing '\r' as a whole line does.
TEST(LineSplitter, FlushStripsCarriageReturn) {
  LineSplitter s;
  EXPECT_TRUE(s.feed("last\r").empty());
  EXPECT_EQ(s.flush(), "last");
}

// A float holding a secret's digits is masked, as an integer is.
TEST(Masker, MaskJsonFloatSecret) {
  Masker m;
  m.add("14159");
  const json out = m.mask_json({{"pi", 3.14159}, {"e", 2.5}});
  EXPECT_EQ(out["pi"], "3.***");
  EXPECT_EQ(out["e"], 2.5);
}

// A secret holding U+2028 and another non-ASCII character, as Go writes it:
// the U+2028 escaped (HTML-safe), the other character bare.  No plain or
// ensure_ascii form matches that text.
TEST(Masker, LineSeparatorSecretInGoForm) {
  Masker m;
  m.add("\xC3\xA9\xE2\x80\xA8x");  // é U+2028 x
  EXPECT_EQ(m.mask("v=\xC3\xA9\\u2028x;"), "v=***;");
}

// upper_hex leaves the 'u' of an escaped backslash alone: a secret holding
// a backslash and "uabcd" is not also masked as "\\uABCD", which is
// another string.
TEST(Masker, EscapedBackslashBeforeUIsNoUnicodeEscape) {
  Masker m;
  m.add("k\\uabcd");  // k, a backslash, uabcd
  EXPECT_EQ(m.mask("k\\\\uabcd"), "***");         // JSON-escaped, as written
  EXPECT_EQ(m.mask("k\\\\uABCD"), "k\\\\uABCD");  // not that secret
}

}  // namespace
}  // namespace bgexec::core
