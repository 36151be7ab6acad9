#pragma once
// JSON that comes from outside the process (HTTP request bodies, command-line
// arguments).  nlohmann's parser is iterative, but dump(), copies and
// comparisons recurse once per level: a document nested 60000 deep parses
// fine and then overflows the stack when written back out.  So input is
// parsed with a nesting limit, and strings holding U+0000, which neither
// PostgreSQL's text nor its jsonb can store (a text parameter would be cut at
// the NUL), can be found before they reach the database.

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bgexec::core {

// The deepest nesting of arrays and objects accepted from outside: far more
// than any job payload needs, far less than what overflows a thread's stack.
inline constexpr std::size_t max_json_depth = 512;
// The deepest nesting read back from the database as JSON: a stored value
// wraps an input of max_json_depth in a level or two (an event's data around
// a step's output).  Deeper (a worker role's own event data, a row written
// past the functions) is kept as its text, a JSON string: a value nested
// 50 000 deep crashed the gateway and the worker, copying or writing it out.
inline constexpr std::size_t max_stored_json_depth = 2 * max_json_depth;

// What parse_json_input does with an object key given twice: keep the last
// value (nlohmann's and jsonb's rule), or refuse the document, so that of
// two values for one field neither wins unnoticed.
enum class DuplicateKeys { last_wins, refuse };

// What parse_json_input makes of a number: nlohmann's int64, uint64 or
// double (a decimal past 17 digits or an integer past 2^64 rounded), or
// with Numbers::exact, the number as jsonb stores it, PostgreSQL's numeric
// (1e2 is 100, 2.50E+1 is 25.0, -0.0 is 0.0): a double when the double
// writes that back, else (123456789012345678901234567890,
// 0.10000000000000000001, 2.50, 100) a raw number holding that text, which
// core::dump writes.  So a step's output reads the same in the run that
// printed it as in a re-run reading it back from the database.  A number
// numeric refuses (1e-16384) stays as written, and so do those past what
// numbers so written may add to a document (its own size, or 32 KiB to a
// short one: 1e-16383 is 16385 bytes).  For JSON bgexec passes on (the
// database's, which prints numbers as stored; a step's output), not for
// requests it checks and sends on as text.
enum class Numbers { doubles, exact };

// A raw number: its JSON text kept as read (a binary value of subtype
// raw_number_subtype, which JSON text never produces).  Only core::dump
// writes it back as a number; nlohmann's own dump() would write it as
// {"bytes": [...], "subtype": ...}.  Not a number to is_number().
inline constexpr std::uint8_t raw_number_subtype = 0x4e;  // 'N'
nlohmann::json raw_number(std::string_view text);
bool is_raw_number(const nlohmann::json& v);
// Its text; empty for anything else.
std::string_view raw_number_text(const nlohmann::json& v);
// A number's value as a double, a raw number's too (nullopt past a
// double's range); nullopt for anything else.  Where a step needs a number
// (sleep, timeout), a raw one is as good as nlohmann's.
std::optional<double> number_of(const nlohmann::json& v);

struct JsonInput {
  // number_out_of_range: a number past a double's range (1e400), which
  // nlohmann cannot read, in a document otherwise well formed (a syntax
  // error, a key twice or a nesting too deep anywhere in it is that error
  // instead).
  enum class Error { none, syntax, too_deep, duplicate_key, number_out_of_range };
  Error error = Error::none;
  // The document; null unless error is none, but for number_out_of_range:
  // the document with every such number read as 0, for the checks that come
  // before its values' (the names of a request's fields).
  nlohmann::json value;
  // syntax, number_out_of_range: what the parser reported, with its
  // position ("syntax error while parsing value - invalid literal; last
  // read: 'x' at line 1, column 1", "number overflow parsing '1e400'").
  std::string message;
  // too_deep, number_out_of_range: the member of the top-level object the
  // limit was hit in, or that holds the number; empty when the top level is
  // not an object (or the limit is hit by it, or it is the number).
  std::string field;
  // duplicate_key: the key given twice, and where its object is: empty for
  // the top level, else the path to it from there (`payload.a[2]`, a key
  // that is not a plain name quoted: `payload["a b"]`).
  // number_out_of_range: path is where the number is (`payload.a[2]`; empty
  // when it is the document).
  std::string key, path;
  // number_out_of_range: the first such number, as read (cut to 40
  // characters and "...").
  std::string number;

  explicit operator bool() const { return error == Error::none; }
};

// Parses `text` as one JSON document whose arrays and objects nest at most
// `max_depth` levels: a scalar is depth 0, `[]` and `{}` are 1, `[[]]` is 2.
// Stops reading at the first container past the limit, and with
// DuplicateKeys::refuse at the first key its object already has.  Never
// throws for bad input: a syntax error, invalid UTF-8, a raw NUL byte
// anywhere or a leading byte order mark is Error::syntax; a number past a
// double's range is Error::number_out_of_range, found where it is read.
JsonInput parse_json_input(std::string_view text, std::size_t max_depth = max_json_depth,
                           DuplicateKeys duplicates = DuplicateKeys::last_wins,
                           Numbers numbers = Numbers::doubles);

// True when a string value or an object key anywhere in `v` contains U+0000.
// Walks with its own stack, so any depth is safe.
bool contains_nul(const nlohmann::json& v);

}  // namespace bgexec::core
