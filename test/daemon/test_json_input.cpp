#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/json_input.hpp"
#include "core/numeric.hpp"
#include "core/utf8.hpp"

namespace bgexec::core {
namespace {

std::string nested(std::size_t n, const std::string& inner = "") {
  return std::string(n, '[') + inner + std::string(n, ']');
}

TEST(JsonInput, ParsesDocuments) {
  auto r = parse_json_input(R"({"kind": "noop", "payload": {"n": [1, 2.5, "x", null, true]}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r.value["kind"], "noop");
  EXPECT_EQ(r.value["payload"]["n"][1], 2.5);
  EXPECT_TRUE(parse_json_input("42"));
  EXPECT_TRUE(parse_json_input(" \"s\" "));
  EXPECT_TRUE(parse_json_input("null"));
}

// nlohmann ends its input at a NUL and skips a leading byte order mark:
// {"kind": "t"}\0garbage was a valid request body, and a body after a BOM
// was passed on to the server with it.  JSON text holds neither.
// The parser's message quotes the text it last read: a long malformed
// token is cut to 60 bytes (a 1 MiB body came back whole in its 400),
// before a character, not inside one.
TEST(JsonInput, SyntaxErrorQuotesAtMostSixtyBytesOfTheToken) {
  auto r = parse_json_input("{\"kind\": \"" + std::string(1000000, 'y'));
  ASSERT_FALSE(r);
  EXPECT_LT(r.message.size(), 300u) << r.message.substr(0, 300);
  EXPECT_NE(r.message.find("last read: '\"" + std::string(59, 'y') + "...'"), std::string::npos) << r.message;
  auto u = parse_json_input("\"" + std::string(58, 'a') + "\xC3\xA9" + std::string(100, 'b'));
  ASSERT_FALSE(u);
  EXPECT_NE(u.message.find("last read: '\"" + std::string(58, 'a') + "...'"), std::string::npos) << u.message;
  auto s = parse_json_input("[1, x]");
  ASSERT_FALSE(s);
  EXPECT_NE(s.message.find("last read: '1, x'"), std::string::npos) << s.message;
  // A number past a double's range is quoted by its own message, cut too.
  auto n = parse_json_input("{\"x\": 1" + std::string(200000, '0') + "}", 512, DuplicateKeys::refuse, Numbers::exact);
  ASSERT_FALSE(n);
  EXPECT_EQ(n.error, JsonInput::Error::number_out_of_range);
  EXPECT_EQ(n.number, "1" + std::string(39, '0') + "...");
  EXPECT_LT(n.message.size(), 300u) << n.message.substr(0, 300);
  EXPECT_NE(n.message.find("number overflow parsing '1" + std::string(59, '0') + "...'"), std::string::npos)
      << n.message.substr(0, 300);
  auto o = parse_json_input("{\"x\": 1e400}");
  ASSERT_FALSE(o);
  EXPECT_NE(o.message.find("number overflow parsing '1e400'"), std::string::npos) << o.message;
}

// A number past a double's range stops nlohmann's parser: it was a syntax
// error of the whole document, which named no field.  It is found where it
// is, the first in the document's order; the document read with each such
// number as 0 is the value (its fields' names are checked before it).
TEST(JsonInput, NumberPastADoublesRangeIsFoundWhereItIs) {
  auto r = parse_json_input(R"({"kind": "x", "priority": 1e400, "queue": -2e999})", max_json_depth,
                            DuplicateKeys::refuse, Numbers::exact);
  EXPECT_EQ(r.error, JsonInput::Error::number_out_of_range);
  EXPECT_EQ(r.path, "priority");
  EXPECT_EQ(r.field, "priority");
  EXPECT_EQ(r.number, "1e400");
  EXPECT_NE(r.message.find("number overflow parsing '1e400'"), std::string::npos) << r.message;
  EXPECT_EQ(dump(r.value), R"({"kind":"x","priority":0,"queue":0})");
  r = parse_json_input(R"({"payload": {"a": [1, {"b c": [-1e999]}], "z": 1}})");
  EXPECT_EQ(r.error, JsonInput::Error::number_out_of_range);
  EXPECT_EQ(r.path, R"(payload.a[1]["b c"][0])");
  EXPECT_EQ(r.field, "payload");
  EXPECT_EQ(r.number, "-1e999");
  r = parse_json_input("[1, 2, 1" + std::string(400, '0') + "]");  // an integer past uint64, then a double's
  EXPECT_EQ(r.error, JsonInput::Error::number_out_of_range);
  EXPECT_EQ(r.path, "[2]");
  EXPECT_EQ(r.field, "");
  r = parse_json_input("1e400");
  EXPECT_EQ(r.error, JsonInput::Error::number_out_of_range);
  EXPECT_EQ(r.path, "");
  EXPECT_EQ(r.value, 0);
  // Anything else wrong in the document comes first, before or after it:
  // the rest is read with such numbers as 0, keeping every offset.
  EXPECT_EQ(parse_json_input(R"({"a": 1e400, "b": })").error, JsonInput::Error::syntax);
  auto after = parse_json_input(R"({"a": 1e400} x)");
  EXPECT_EQ(after.error, JsonInput::Error::syntax);
  EXPECT_NE(after.message.find("column 14"), std::string::npos) << after.message;  // as for {"a": 12345} x
  EXPECT_EQ(parse_json_input(R"([1e4001])").error, JsonInput::Error::number_out_of_range);
  EXPECT_EQ(parse_json_input(R"([1e400 1])").error, JsonInput::Error::syntax);
  EXPECT_EQ(parse_json_input(R"([1e400x])").error, JsonInput::Error::syntax);
  EXPECT_EQ(parse_json_input(R"({1e400: 1})").error, JsonInput::Error::syntax);
  auto dup = parse_json_input(R"({"a": 1e400, "a": 1})", max_json_depth, DuplicateKeys::refuse);
  EXPECT_EQ(dup.error, JsonInput::Error::duplicate_key);
  EXPECT_EQ(dup.key, "a");
  auto deep = parse_json_input(R"({"a": 1e400, "b": [[1]]})", 2);
  EXPECT_EQ(deep.error, JsonInput::Error::too_deep);
  EXPECT_EQ(deep.field, "b");
  // Many of them are read again once, not once each.
  std::string many = "[";
  for (int i = 0; i < 100000; ++i) many += i ? ",1e400" : "1e400";
  r = parse_json_input(many + "]");
  EXPECT_EQ(r.error, JsonInput::Error::number_out_of_range);
  EXPECT_EQ(r.path, "[0]");
  EXPECT_EQ(r.value.size(), 100000u);
}

TEST(JsonInput, RawNulAndByteOrderMarkAreSyntaxErrors) {
  using namespace std::string_literals;
  auto nul = parse_json_input("{\"kind\": \"t\"}\0garbage"s);
  EXPECT_EQ(nul.error, JsonInput::Error::syntax);
  EXPECT_EQ(nul.message, "a NUL byte at offset 13 (write \\u0000 in a string)");
  EXPECT_EQ(parse_json_input("\"abc\"\0\"def\""s).error, JsonInput::Error::syntax);
  EXPECT_EQ(parse_json_input("{}\0"s).error, JsonInput::Error::syntax);
  auto bom = parse_json_input("\xEF\xBB\xBF{\"a\": 1}");
  EXPECT_EQ(bom.error, JsonInput::Error::syntax);
  EXPECT_EQ(bom.message, "a byte order mark (U+FEFF) before the document");
  EXPECT_TRUE(parse_json_input("{\"a\": \"\xEF\xBB\xBF\"}"));  // U+FEFF inside a string is text
  EXPECT_TRUE(parse_json_input(R"({"a": "\u0000"})"));       // an escaped NUL is JSON
}

TEST(JsonInput, DepthLimitIsInclusive) {
  EXPECT_TRUE(parse_json_input(nested(max_json_depth)));
  auto r = parse_json_input(nested(max_json_depth + 1));
  EXPECT_FALSE(r);
  EXPECT_EQ(r.error, JsonInput::Error::too_deep);
  EXPECT_TRUE(r.field.empty());
  EXPECT_TRUE(r.value.is_null());
  EXPECT_TRUE(parse_json_input("[]", 1));
  EXPECT_FALSE(parse_json_input("[[]]", 1));
  EXPECT_TRUE(parse_json_input("1", 0));
  EXPECT_FALSE(parse_json_input("{}", 0));
}

TEST(JsonInput, ObjectsCountLikeArrays) {
  std::string deep;
  for (int i = 0; i < 3; ++i) deep += "{\"a\":";
  deep += "1}}}";
  EXPECT_TRUE(parse_json_input(deep, 3));
  EXPECT_FALSE(parse_json_input(deep, 2));
  // Brackets inside strings are text, not nesting.
  EXPECT_TRUE(parse_json_input("[\"" + std::string(1000, '[') + "\"]", 1));
}

// The crash this guards against: dump() of a document this deep overflows
// an 8 MiB stack.  Parsing it must stop early and cost nothing more.
TEST(JsonInput, VeryDeepInputIsRefusedNotCrashed) {
  auto r = parse_json_input(nested(100000));
  EXPECT_EQ(r.error, JsonInput::Error::too_deep);
  r = parse_json_input(R"({"kind": "noop", "payload": )" + nested(100000, "{}") + "}");
  EXPECT_EQ(r.error, JsonInput::Error::too_deep);
  EXPECT_EQ(r.field, "payload");
  // Unbalanced: refused at the limit, before the missing brackets matter.
  EXPECT_EQ(parse_json_input(std::string(100000, '[')).error, JsonInput::Error::too_deep);
}

TEST(JsonInput, NamesTheTopLevelMember) {
  auto r = parse_json_input(R"({"a": [[1]], "b": {"c": [[[2]]]}})", 3);
  EXPECT_EQ(r.error, JsonInput::Error::too_deep);
  EXPECT_EQ(r.field, "b");
  EXPECT_TRUE(parse_json_input(R"({"a": [[1]], "b": {"c": [2]}})", 3));
  // A key of a nested object is not a top-level member.
  r = parse_json_input(R"({"a": {"inner": [[[]]]}})", 3);
  EXPECT_EQ(r.field, "a");
}

TEST(JsonInput, SyntaxErrors) {
  // (1e400: number_out_of_range, NumberPastADoublesRangeIsFoundWhereItIs)
  for (const char* bad : {"", "{", "{\"a\":1,}", "[1 2]", "nul", "\"\xff\"", "{\"a\":1} x", "[1e400"}) {
    auto r = parse_json_input(bad);
    EXPECT_EQ(r.error, JsonInput::Error::syntax) << bad;
    EXPECT_FALSE(r.message.empty()) << bad;
    EXPECT_EQ(r.message.find("[json.exception"), std::string::npos) << r.message;
    EXPECT_TRUE(r.value.is_null());
  }
  EXPECT_NE(parse_json_input("[1 2]").message.find("column 4"), std::string::npos);
}

TEST(JsonInput, DuplicateKeysLastWinsByDefault) {
  auto r = parse_json_input(R"({"a": 1, "b": {"c": 2, "c": [3]}, "a": "x"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r.value["a"], "x");
  EXPECT_EQ(r.value["b"]["c"], nlohmann::json::array({3}));
}

// Refused at any depth, naming the key and the path to its object.
TEST(JsonInput, DuplicateKeysRefused) {
  auto refuse = [](std::string_view text) { return parse_json_input(text, max_json_depth, DuplicateKeys::refuse); };
  auto r = refuse(R"({"kind": "noop", "kind": "x"})");
  EXPECT_EQ(r.error, JsonInput::Error::duplicate_key);
  EXPECT_EQ(r.key, "kind");
  EXPECT_EQ(r.path, "");
  EXPECT_TRUE(r.value.is_null());
  r = refuse(R"({"payload": {"a": [1, {"b": {"c": 1, "c": 2}}]}})");
  EXPECT_EQ(r.error, JsonInput::Error::duplicate_key);
  EXPECT_EQ(r.key, "c");
  EXPECT_EQ(r.path, "payload.a[1].b");
  r = refuse(R"([{}, {"x y": {"k": 1, "k": 1}}])");
  EXPECT_EQ(r.key, "k");
  EXPECT_EQ(r.path, R"([1]["x y"])");
  // The same key in different objects is no duplicate.
  r = refuse(R"({"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 3}, {"k": 4}]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r.value["c"][1]["k"], 4);
  // The depth limit and syntax errors still come first where they come first.
  EXPECT_EQ(refuse(R"({"a": 1, "a": )").error, JsonInput::Error::duplicate_key);
  EXPECT_EQ(refuse(R"({"a": 1 "a": 2})").error, JsonInput::Error::syntax);
}

TEST(JsonInput, ContainsNul) {
  EXPECT_FALSE(contains_nul(parse_json_input(R"({"a": ["b", {"c": "d"}], "e": 1})").value));
  EXPECT_TRUE(contains_nul(parse_json_input(R"("a\u0000b")").value));
  EXPECT_TRUE(contains_nul(parse_json_input(R"({"a": [1, {"c": "\u0000"}]})").value));
  EXPECT_TRUE(contains_nul(parse_json_input(R"({"k\u0000": 1})").value));
  EXPECT_FALSE(contains_nul(parse_json_input(R"("\\u0000")").value));  // an escaped backslash
  // Its own stack: a deep value built in memory is walked without recursion.
  nlohmann::json deep = "x";
  deep.get_ref<std::string&>().push_back('\0');
  for (int i = 0; i < 200000; ++i) {
    nlohmann::json a = nlohmann::json::array();
    a.push_back(std::move(deep));
    deep = std::move(a);
  }
  EXPECT_TRUE(contains_nul(deep));
}

JsonInput exact(const std::string& text) {
  return parse_json_input(text, max_json_depth, DuplicateKeys::last_wins, Numbers::exact);
}

// Numbers::exact: a number a double would not write back as jsonb stores
// it is a raw number, which core::dump writes as stored; the rest are
// nlohmann's.
TEST(JsonInput, ExactNumbersKeepTheirText) {
  const std::string text =
      R"({"big": 123456789012345678901234567890, "dec": 0.10000000000000000001, "z": 2.50,)"
      R"( "plain": 2.5, "one": 1.0, "i": 42, "neg": -9223372036854775809, "tiny": 0.0000001,)"
      R"( "arr": [1.10, 3, {"e": 1E+2}]})";
  auto r = exact(text);
  ASSERT_TRUE(r);
  for (const char* k : {"big", "dec", "z", "neg", "tiny"}) EXPECT_TRUE(is_raw_number(r.value[k])) << k;
  EXPECT_EQ(raw_number_text(r.value["z"]), "2.50");
  EXPECT_TRUE(is_raw_number(r.value["arr"][0]));
  EXPECT_TRUE(is_raw_number(r.value["arr"][2]["e"]));
  EXPECT_TRUE(r.value["plain"].is_number_float());
  EXPECT_TRUE(r.value["one"].is_number_float());
  EXPECT_TRUE(r.value["i"].is_number_integer());
  EXPECT_FALSE(r.value["z"].is_number());  // not a number to nlohmann
  EXPECT_EQ(dump(r.value),
            R"({"arr":[1.10,3,{"e":100}],"big":123456789012345678901234567890,)"
            R"("dec":0.10000000000000000001,"i":42,"neg":-9223372036854775809,"one":1.0,"plain":2.5,)"
            R"("tiny":0.0000001,"z":2.50})");
  // As a scalar document, and inside arrays only.
  EXPECT_EQ(dump(exact("123456789012345678901234567890").value), "123456789012345678901234567890");
  EXPECT_EQ(dump(exact("[[0.30000000000000000001]]").value), "[[0.30000000000000000001]]");
}

// Each number as PostgreSQL 15 stores it in jsonb (numeric_in, then
// numeric_out).  What the server printed for the inputs, in order:
//   select '[1e2, 2.50E+1, -0.0, 1.5e-3, 1e-20, 123.4500e1, 0e5, -0e-3, 1E+0,
//            12345678901234567890123]'::jsonb;
//   [100, 25.0, 0.0, 0.0015, 0.00000000000000000001, 1234.500, 0, 0.000, 1,
//    12345678901234567890123]
//   select '[-0, -0.5e1, 1.50, 0.0000001, 1e+16, 0.1e1, 100e-2, 1e-05, 0.001e5,
//            -1.0e-2, 2.5, 1.0, -12345678901234567890123, 18446744073709551616,
//            1e05]'::jsonb;
//   [0, -5, 1.50, 0.0000001, 10000000000000000, 1, 1.00, 0.00001, 100,
//    -0.010, 2.5, 1.0, -12345678901234567890123, 18446744073709551616, 100000]
TEST(JsonInput, ExactNumbersAsJsonbStoresThem) {
  const std::pair<const char*, const char*> cases[] = {
      {"1e2", "100"},
      {"2.50E+1", "25.0"},
      {"-0.0", "0.0"},
      {"1.5e-3", "0.0015"},
      {"1e-20", "0.00000000000000000001"},
      {"123.4500e1", "1234.500"},
      {"0e5", "0"},
      {"-0e-3", "0.000"},
      {"1E+0", "1"},
      {"12345678901234567890123", "12345678901234567890123"},
      {"-0", "0"},
      {"-0.5e1", "-5"},
      {"1.50", "1.50"},
      {"0.0000001", "0.0000001"},
      {"1e+16", "10000000000000000"},
      {"0.1e1", "1"},
      {"100e-2", "1.00"},
      {"1e-05", "0.00001"},
      {"0.001e5", "100"},
      {"-1.0e-2", "-0.010"},
      {"2.5", "2.5"},
      {"1.0", "1.0"},
      {"-12345678901234567890123", "-12345678901234567890123"},
      {"18446744073709551616", "18446744073709551616"},
      {"1e05", "100000"},
  };
  std::string array = "[", stored = "[";
  for (const auto& [in, out] : cases) {
    auto r = exact(in);
    ASSERT_TRUE(r) << in;
    EXPECT_EQ(dump(r.value), out) << in;
    array += (array.size() > 1 ? ", " : "") + std::string(in);
    stored += (stored.size() > 1 ? "," : "") + std::string(out);
  }
  EXPECT_EQ(dump(exact(array + "]").value), stored + "]");
  // A double where it writes the number back so (25.0, 0.0015), nlohmann's
  // integer for -0, a raw number for the rest.
  EXPECT_TRUE(exact("2.50E+1").value.is_number_float());
  EXPECT_TRUE(exact("1.5e-3").value.is_number_float());
  EXPECT_TRUE(exact("-0").value.is_number_integer());
  EXPECT_EQ(raw_number_text(exact("1e2").value), "100");
  EXPECT_EQ(raw_number_text(exact("-0.0").value), "0.0");
  EXPECT_EQ(number_of(exact("1e2").value), 100.0);
}

// numeric's widest: a display scale of 16383 (NUMERIC_DSCALE_MASK), and
// whatever a double holds before the point (nlohmann refuses the rest).
// The server's lengths and ends:
//   select length(x::jsonb::text), left(x::jsonb::text, 8), right(x::jsonb::text, 8)
//   1e-16383                  16385 | 0.000000 | 00000001
//   0.5e-16382                16385 | 0.000000 | 00000005
//   -0e-16383                 16385 | 0.000000 | 00000000
//   5e-324                      326 | 0.000000 | 00000005
//   1e-400                      402 | 0.000000 | 00000001
//   1e308                       309 | 10000000 | 00000000
//   -1.7976931348623157e308     310 | -1797693 | 00000000
//   0e1073741822                  1 | 0        | 0
TEST(JsonInput, ExactNumbersAtNumericsLimits) {
  auto stored = [](const std::string& in) { return dump(exact(in).value); };
  EXPECT_EQ(stored("1e-16383"), "0." + std::string(16382, '0') + "1");
  EXPECT_EQ(stored("0.5e-16382"), "0." + std::string(16382, '0') + "5");
  EXPECT_EQ(stored("-0e-16383"), "0." + std::string(16383, '0'));
  EXPECT_EQ(stored("5e-324"), "0." + std::string(323, '0') + "5");
  EXPECT_EQ(stored("1e-400"), "0." + std::string(399, '0') + "1");
  EXPECT_EQ(stored("1e308"), "1" + std::string(308, '0'));
  EXPECT_EQ(stored("-1.7976931348623157e308"), "-17976931348623157" + std::string(292, '0'));
  EXPECT_EQ(stored("0e1073741822"), "0");
}

// What numeric_in refuses stays as written (the database refuses it so):
//   select '1e-16384'::jsonb;      ERROR:  value overflows numeric format
//   select '0.0e-16383'::jsonb;    ERROR:  value overflows numeric format
//   select '0e-1073741822'::jsonb; ERROR:  value overflows numeric format
//   select '0e1073741823'::jsonb;  ERROR:  value overflows numeric format
// (an exponent of INT_MAX / 2 or more either way; else a display scale
// past 16383), never written out digit by digit.
TEST(JsonInput, ExactNumbersNumericRefusesStayAsWritten) {
  for (const char* in : {"1e-16384", "0.0e-16383", "0e-1073741822", "0e1073741823", "0e-99999999999999999999",
                         "-1e-1073741823"}) {
    auto r = exact(in);
    ASSERT_TRUE(r) << in;
    EXPECT_EQ(raw_number_text(r.value), in);
  }
}

// Numbers written as stored add at most the document's own size to it (or
// 32 KiB to a short one); past that, the rest stay as written.
TEST(JsonInput, ExactNumbersGrowADocumentBoundedly) {
  // Short: the floor takes one number of 16385 bytes, and a second.
  EXPECT_EQ(dump(exact("[1e-16383, 1e-16383]").value).size(), 2 * 16385 + 3);
  // 200 000 of them (1.8 MB, each 16385 bytes as stored: 3.3 GB): the first
  // ones stored, the rest as written.
  std::string many = "[";
  for (int i = 0; i < 200000; ++i) many += i ? ",1e-16383" : "1e-16383";
  many += "]";
  auto r = exact(many);
  ASSERT_TRUE(r);
  const std::string out = dump(r.value);
  EXPECT_LE(out.size(), 2 * many.size() + (1 << 15));
  EXPECT_GT(out.size(), 2 * many.size() - 16385);
  EXPECT_EQ(raw_number_text(r.value[0]).size(), 16385u);
  EXPECT_EQ(raw_number_text(r.value[199999]), "1e-16383");
}

// numeric's range, tried on PostgreSQL 15 (SELECT '...'::jsonb): 131072
// digits before the point and 16383 after, once the exponent is applied.
//   1e131071  1234e131068  1e-16383  0.1e-16382  0e-16383  0e999999   stored
//   1e131072  1e-16384  1.5e-16383  -0.0e-16384  0e-16384  1e2147483647,
//   the digit 1 and 131072 zeros                     value overflows numeric format
TEST(JsonInput, NumericAccepts) {
  const std::vector<std::string> stored = {
      "0", "-1", "1.5", "1e131071", "-1e131071", "1234e131068", "1e-16383", "0.1e-16382", "0e-16383", "0e999999",
      "1E+131071", "1e-0000000000000000016383", "1e308", "1e-400", "1" + std::string(131071, '0'),
      "0." + std::string(16382, '0') + "1", "0." + std::string(20000, '0') + "1e20000"};
  for (const auto& in : stored) EXPECT_TRUE(numeric_accepts(in)) << in.substr(0, 40);
  const std::vector<std::string> refused = {
      "1e131072", "-1e131072", "12345e131068", "1e-16384", "1.5e-16383", "-0.0e-16384", "0e-16384", "1e2147483647",
      "1e-2147483647", "0e1073741823", "1e99999999999999999999", "1" + std::string(131072, '0'),
      "0." + std::string(16383, '0') + "1"};
  for (const auto& in : refused) EXPECT_FALSE(numeric_accepts(in)) << in.substr(0, 40);
}

// Exact, the first number numeric refuses is found (cut to 40 characters),
// however deep; none for numbers it stores, though kept as written past
// the growth a document may take.  (Those past a double's range, 1e131072
// among them, are refused by the parser already, as 1e400 is.)
TEST(JsonInput, ExactNumbersNameTheFirstNumericRefuses) {
  EXPECT_EQ(unstorable_number(exact(R"({"pct": 10, "x": [1, {"y": 1e-16384}], "z": 0e-16384})").value), "1e-16384");
  EXPECT_EQ(unstorable_number(exact("[0e1073741823]").value), "0e1073741823");
  EXPECT_EQ(unstorable_number(exact("0." + std::string(16384, '0')).value), "0." + std::string(38, '0') + "...");
  EXPECT_EQ(exact("1e131072").error, JsonInput::Error::number_out_of_range);
  EXPECT_EQ(unstorable_number(exact(R"({"pct": 10, "big": 1e131071, "small": 1e-16383, "d": 1.5})").value), "");
  std::string many = "[";
  for (int i = 0; i < 1000; ++i) many += i ? ",1e-16383" : "1e-16383";
  EXPECT_EQ(unstorable_number(exact(many + "]").value), "");
  // Doubles: not looked for (the number is nlohmann's double, 0 for 1e-16384).
  EXPECT_EQ(unstorable_number(parse_json_input("1e-16384").value), "");
}

TEST(JsonInput, DoublesByDefault) {
  auto r = parse_json_input(R"({"big": 123456789012345678901234567890, "z": 2.50})");
  ASSERT_TRUE(r);
  EXPECT_FALSE(is_raw_number(r.value["big"]));
  EXPECT_EQ(dump(r.value), R"({"big":1.2345678901234568e+29,"z":2.5})");
  EXPECT_EQ(raw_number_text(r.value["z"]), "");
}

// core::dump with raw numbers in the document still writes invalid UTF-8
// (in a key or a value) as U+FFFD, and escapes keys.
TEST(JsonInput, DumpWithRawNumbersRepairsStrings) {
  nlohmann::json v = nlohmann::json::object();
  v["n"] = raw_number("2.50");
  v["s"] = std::string("a\xff\"b");
  v[std::string("k\xfe")] = nlohmann::json::array({raw_number("1e400"), nullptr, true});
  EXPECT_EQ(dump(v), "{\"k\xEF\xBF\xBD\":[1e400,null,true],\"n\":2.50,\"s\":\"a\xEF\xBF\xBD\\\"b\"}");
}

// What sleep and timeout read: a number, a raw number's value, else nothing.
TEST(JsonInput, NumberOf) {
  EXPECT_EQ(number_of(nlohmann::json(2)), 2.0);
  EXPECT_EQ(number_of(nlohmann::json(2.5)), 2.5);
  EXPECT_EQ(number_of(raw_number("2.50")), 2.5);
  EXPECT_EQ(number_of(raw_number("100000000000000000000")), 1e20);
  EXPECT_FALSE(number_of(raw_number("1e400")));
  EXPECT_FALSE(number_of(nlohmann::json("2.5")));
  EXPECT_FALSE(number_of(nlohmann::json(nullptr)));
}

// From a mutation test of json_input.cpp: cases no test above told apart.

// A token of exactly 60 bytes is quoted whole, one of 61 cut; a number of
// exactly 40 characters named whole, one of 41 cut.
TEST(JsonInput, QuotesAtTheirLimitsAreWhole) {
  auto whole = parse_json_input("{\"kind\": \"" + std::string(59, 'y'));
  ASSERT_FALSE(whole);
  EXPECT_NE(whole.message.find("last read: '\"" + std::string(59, 'y') + "'"), std::string::npos) << whole.message;
  auto cut = parse_json_input("{\"kind\": \"" + std::string(60, 'y'));
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.message.find("last read: '\"" + std::string(59, 'y') + "...'"), std::string::npos) << cut.message;
  const std::string forty = "1" + std::string(35, '0') + "e400";  // 40 characters
  auto n = parse_json_input("[" + forty + "]");
  ASSERT_EQ(n.error, JsonInput::Error::number_out_of_range);
  EXPECT_EQ(n.number, forty);
  auto m = parse_json_input("[" + forty + "0]");
  ASSERT_EQ(m.error, JsonInput::Error::number_out_of_range);
  EXPECT_EQ(m.number, forty.substr(0, 40) + "...");
}

// The growth a document may take from numbers written as stored is used up
// exactly: the number that takes the last byte of it is stored, not kept
// as read.  (1e-K is K + 2 bytes as stored, K - len(K) - 1 more than
// written; 16377 + 10000 + 6391 = 32768, the floor.)
TEST(JsonInput, ExactNumbersUseTheirGrowthToTheLastByte) {
  auto r = exact("[1e-16383,1e-10006,1e-6396]");
  ASSERT_TRUE(r);
  EXPECT_EQ(raw_number_text(r.value[0]).size(), 16385u);
  EXPECT_EQ(raw_number_text(r.value[1]).size(), 10008u);
  EXPECT_EQ(raw_number_text(r.value[2]), "0." + std::string(6395, '0') + "1");
  auto past = exact("[1e-16383,1e-10006,1e-6397]");  // one byte more
  ASSERT_TRUE(past);
  EXPECT_EQ(raw_number_text(past.value[2]), "1e-6397");
}

}  // namespace
}  // namespace bgexec::core
