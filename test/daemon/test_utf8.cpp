#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "core/utf8.hpp"

namespace bgexec::core {
namespace {

using nlohmann::json;

const std::string fffd = "\xEF\xBF\xBD";

TEST(Utf8, ValidTextIsUnchanged) {
  const std::string valid[] = {"", "plain ascii\n\t", "caf\xC3\xA9", "\xE2\x82\xAC 5", "\xF0\x9F\x98\x80",
                               "\xF4\x8F\xBF\xBF" /* U+10FFFF */, "\xEF\xBF\xBD", "\xED\x9F\xBF" /* U+D7FF */,
                               std::string("nul\0inside", 10)};
  for (const auto& s : valid) {
    EXPECT_TRUE(valid_utf8(s)) << s;
    EXPECT_EQ(to_valid_utf8(s), s);
  }
}

// Each maximal ill-formed subpart becomes one U+FFFD (Unicode's recommended practice).
TEST(Utf8, InvalidSequencesBecomeReplacementCharacters) {
  const std::pair<std::string, std::string> cases[] = {
      {"\xFF\xFE" "abc", fffd + fffd + "abc"},               // printf '\377\376abc'
      {"a\x80z", "a" + fffd + "z"},                           // lone continuation byte
      {"\xC0\xAF", fffd + fffd},                              // overlong '/'
      {"\xE0\x80\xAF", fffd + fffd + fffd},                   // overlong, 3 bytes
      {"\xED\xA0\x80", fffd + fffd + fffd},                   // surrogate U+D800
      {"\xF4\x90\x80\x80", fffd + fffd + fffd + fffd},        // above U+10FFFF
      {"\xF5\x80", fffd + fffd},                              // never a lead byte
      {"\xE2\x82", fffd},                                     // cut short at the end
      {"\xE2\x82" "A", fffd + "A"},                           // cut short before ASCII
      {"\xF0\x9F\x98", fffd},                                 // 4-byte sequence cut short
      {"\xF0\x9F\x98\x80\xFF", "\xF0\x9F\x98\x80" + fffd},    // valid, then invalid
      {"caf\xE9", "caf" + fffd},                              // Latin-1 text
  };
  for (const auto& [in, want] : cases) {
    EXPECT_FALSE(valid_utf8(in)) << in;
    EXPECT_EQ(to_valid_utf8(in), want) << in;
    EXPECT_TRUE(valid_utf8(to_valid_utf8(in)));
  }
}

// nlohmann_json's strict dump throws on these; the repaired value dumps.
TEST(Utf8, SanitizeJsonStringsAndKeys) {
  json j = {{"out", "\xFF\xFE" "abc"},
            {"rows", json::array({json{{"k\xE9y", "v\xE9"}, {"ok", 1}}, "fine", 3})},
            {"nested", {{"deep", json::array({"\xC3"})}}}};
  EXPECT_THROW((void)j.dump(), json::type_error);
  EXPECT_TRUE(sanitize_utf8(j));
  EXPECT_NO_THROW((void)j.dump());
  EXPECT_EQ(j["out"], fffd + fffd + "abc");
  EXPECT_EQ(j["rows"][0]["k" + fffd + "y"], "v" + fffd);
  EXPECT_EQ(j["rows"][0]["ok"], 1);
  EXPECT_EQ(j["rows"][1], "fine");
  EXPECT_EQ(j["nested"]["deep"][0], fffd);
  EXPECT_FALSE(sanitize_utf8(j));  // already valid: nothing to do

  json clean = {{"a", "caf\xC3\xA9"}, {"b", json::array({1, true, nullptr})}};
  const json before = clean;
  EXPECT_FALSE(sanitize_utf8(clean));
  EXPECT_EQ(clean, before);
}

// PostgreSQL stores U+0000 in neither text nor jsonb: it becomes U+FFFD too.
TEST(Utf8, NulIsNotStorable) {
  using namespace std::string_literals;
  EXPECT_TRUE(storable("abc"));
  EXPECT_FALSE(storable("a\0b"s));
  EXPECT_FALSE(storable("\xFF"));
  EXPECT_EQ(to_storable("a\0b\0\0"s), "a" + fffd + "b" + fffd + fffd);
  EXPECT_EQ(to_storable("\0\xFF"s), fffd + fffd);
  EXPECT_EQ(to_storable("caf\xC3\xA9"), "caf\xC3\xA9");
  json j = {{"k\0"s, "v\0"s}, {"a", json::array({"\0"s})}};
  EXPECT_TRUE(sanitize_utf8(j));
  EXPECT_EQ(j["k" + fffd], "v" + fffd);
  EXPECT_EQ(j["a"][0], fffd);
}

// Binary output (a step printing a gzip file, NUL bytes) is repaired in one
// pass.  It was a replace per NUL, each moving the rest of the text: 2 MB
// of NULs held the worker for hours.  Here 4 MiB of NUL, FF and text: the
// one pass takes milliseconds, the old code many minutes.
TEST(Utf8, BinaryIsRepairedInOnePass) {
  using namespace std::string_literals;
  std::string bin;
  for (int i = 0; i < (1 << 20); ++i) bin += "\0\xFF"s + "ab";
  const auto start = std::chrono::steady_clock::now();
  const std::string out = to_storable(bin);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(5));
  ASSERT_EQ(out.size(), std::size_t{1 << 20} * (2 * fffd.size() + 2));
  EXPECT_EQ(out.substr(0, 8), fffd + fffd + "ab");
  EXPECT_TRUE(storable(out));
}

TEST(Utf8, DumpNeverThrows) {
  const json j = {{"line", "\xFF\xFE" "abc"}, {"n", 1}};
  EXPECT_EQ(dump(j), R"({"line":")" + fffd + fffd + R"(abc","n":1})");
  EXPECT_EQ(dump(json{{"a", "b"}}), R"({"a":"b"})");
}

// A cut for display never leaves half a character (the CLI's status and
// event lines printed invalid UTF-8 past their length limit).
TEST(Utf8, PrefixEndsBeforeACharacter) {
  const std::string e = "x\xC3\xA9\xC3\xA9";  // x é é
  EXPECT_EQ(utf8_prefix(e, 10), 5u);
  EXPECT_EQ(utf8_prefix(e, 5), 5u);
  EXPECT_EQ(utf8_prefix(e, 4), 3u);
  EXPECT_EQ(utf8_prefix(e, 2), 1u);
  EXPECT_EQ(utf8_prefix(e, 1), 1u);
  EXPECT_EQ(utf8_prefix(e, 0), 0u);
  const std::string emoji = "\xF0\x9F\x98\x80!";  // U+1F600 !
  for (std::size_t n = 0; n < 4; ++n) EXPECT_EQ(utf8_prefix(emoji, n), 0u) << n;
  EXPECT_EQ(utf8_prefix(emoji, 4), 4u);
  EXPECT_TRUE(valid_utf8(e.substr(0, utf8_prefix(e, 4))));
  // stray continuation bytes: cut where max falls, not at 0
  EXPECT_EQ(utf8_prefix("\x80\x80\x80\x80\x80\x80", 5), 5u);
  EXPECT_EQ(utf8_cut("x\xC3\xA9\xC3\xA9", 4, "..."), "x\xC3\xA9...");
  EXPECT_EQ(utf8_cut("short", 10, "..."), "short");
}

// Text a job made, printed by the CLI (tail, --follow, --wait, status):
// no control character reaches the terminal as itself (an ESC [2J cleared
// the screen, a CR overwrote the line, OSC retitled the window).
TEST(Utf8, VisibleEscapesControlCharacters) {
  EXPECT_EQ(visible("plain text, \xC3\xA9 and tabs\tand\nnewlines"), "plain text, \xC3\xA9 and tabs\tand\nnewlines");
  EXPECT_EQ(visible("\x1b[2J\x1b[Hcleared"), "\\x1b[2J\\x1b[Hcleared");
  EXPECT_EQ(visible("secret\rok"), "secret\\rok");
  EXPECT_EQ(visible(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(visible("\x1b]0;title\x07"), "\\x1b]0;title\\x07");
  EXPECT_EQ(visible("del\x7f"), "del\\x7f");
  // C1: U+009B is CSI on terminals that take 8-bit controls; U+0080 and
  // U+009F are the range's ends, U+00A0 (no-break space) is past it
  EXPECT_EQ(visible("\xC2\x9B" "31m"), "\\u009b31m");
  EXPECT_EQ(visible("\xC2\x80\xC2\x9F\xC2\xA0"), "\\u0080\\u009f\xC2\xA0");
  // invalid UTF-8 is not this function's business: unchanged
  EXPECT_EQ(visible("\xC2"), "\xC2");
  EXPECT_EQ(visible("\xFF\xFE"), "\xFF\xFE");
}

// From a mutation test of utf8.cpp: cases no test above told apart.

// A 4-byte form of a code point below U+10000 (F0 80..8F) is overlong:
// F0 is a maximal subpart of its own, and so is each byte after it.
TEST(Utf8, OverlongFourByteFormsAreInvalid) {
  EXPECT_FALSE(valid_utf8("\xF0\x80\x80\x80"));
  EXPECT_FALSE(valid_utf8("\xF0\x8F\xBF\xBF"));  // U+FFFF in four bytes
  EXPECT_EQ(to_valid_utf8("\xF0\x8F\xBF\xBF"), fffd + fffd + fffd + fffd);
  EXPECT_TRUE(valid_utf8("\xF0\x90\x80\x80"));  // U+10000, the first one
}

// A sequence cut by the end of the view is ill-formed, whatever bytes
// follow the view in memory; and a view no longer than max is whole.
TEST(Utf8, TheViewsEndIsTheTextsEnd) {
  const std::string backing = "ab\xC3\xA9\xA9";
  EXPECT_FALSE(valid_utf8(std::string_view(backing).substr(2, 1)));  // C3, its A9 past the view
  EXPECT_EQ(to_valid_utf8(std::string_view(backing).substr(2, 1)), fffd);
  EXPECT_EQ(utf8_prefix(std::string_view(backing).substr(0, 4), 4), 4u);  // an A9 follows in memory
}

}  // namespace
}  // namespace bgexec::core
