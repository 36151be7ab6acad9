#pragma once
// UTF-8 repair where bytes from outside (step process output, SQL results,
// server messages) become JSON: nlohmann_json stores any bytes in a string
// but throws type_error.316 when it dumps one that is not UTF-8, which would
// fail a step, a log flush or a whole finish batch.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace bgexec::core {

// Whether text is well-formed UTF-8 (Unicode table 3-7: no overlong forms,
// no surrogates, nothing above U+10FFFF, no truncated sequence).
bool valid_utf8(std::string_view text);

// text with each maximal ill-formed subsequence replaced by U+FFFD (Unicode
// "substitution of maximal subparts"): "\xFF\xFEabc" -> "\uFFFD\uFFFDabc",
// a sequence cut short at the end -> one U+FFFD. Valid text is unchanged.
std::string to_valid_utf8(std::string_view text);

// The length of text's longest prefix of at most max bytes that does not
// end inside a character: a cut there leaves no half of one.  (It backs
// off three bytes at most: a run of stray continuation bytes is cut where
// max falls.)
std::size_t utf8_prefix(std::string_view text, std::size_t max);

// text cut to its utf8_prefix of max bytes, suffix after it ("...", "…"),
// when it is longer than max; else text.
std::string utf8_cut(std::string text, std::size_t max, std::string_view suffix);

// Whether text[i] starts a C1 control, U+0080-U+009F (UTF-8 C2 80-C2 9F;
// U+009B is CSI to a terminal that takes 8-bit controls).
bool c1_at(std::string_view text, std::size_t i);

// text for a terminal: each control character but tab and newline (C0,
// DEL, and C1, U+0080-U+009F, which terminals may read as ESC [ and its
// kin) written as an escape: "\r", "\x1b", "\u009b".  Text a job made
// (its output, its error, a worker's id) then cannot move the cursor, clear
// the screen, retitle the window or set the clipboard.  Anything else,
// invalid UTF-8 included, is unchanged.
std::string visible(std::string_view text);

// Whether PostgreSQL can store text as it is, in text and in jsonb:
// valid_utf8, and no U+0000 (neither type holds it).
bool storable(std::string_view text);

// to_valid_utf8, and each U+0000 also becomes U+FFFD.  Storable text is
// unchanged.
std::string to_storable(std::string_view text);

// Repairs every string in value, object keys included (to_storable);
// returns whether anything changed. Two keys that repair to the same text
// keep the later value.
bool sanitize_utf8(nlohmann::json& value);

// Compact JSON text of value that never throws type_error.316: invalid
// UTF-8 left in a string is written as U+FFFD. For every dump of data that
// came from outside and goes to the database, a log or the terminal.
// A raw number (json_input.hpp) is written as its text.
std::string dump(const nlohmann::json& value);

}  // namespace bgexec::core
