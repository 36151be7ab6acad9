#include "json_input.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "numeric.hpp"
#include "utf8.hpp"

namespace bgexec::core {

namespace {

using json = nlohmann::json;

// "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
// without its bracketed prefix.
// The text it quotes is cut to 60 bytes: it quoted a malformed token
// whole ("last read: '...'"), or a number past a double's range ("number
// overflow parsing '1000...'"), and a 1 MiB request body came back in its
// 400.
std::string parser_message(const std::string& what) {
  std::string m = what;
  if (auto p = m.find("] "); m.rfind("[json.exception.", 0) == 0 && p != std::string::npos) m = m.substr(p + 2);
  constexpr std::size_t keep = 60;
  for (std::string_view marker : {"last read: '", "parsing '"}) {
    const auto start = m.find(marker);
    const auto end = m.rfind('\'');
    if (start != std::string::npos && end != std::string::npos && end > start + marker.size() + keep) {
      const std::size_t from = start + marker.size();
      m = m.substr(0, from + utf8_prefix(std::string_view(m).substr(from), keep)) + "..." + m.substr(end);
      break;
    }
  }
  return m;
}

// A number as an error quotes it: at most 40 characters, then "...".
std::string shown_number(std::string_view text) {
  constexpr std::size_t keep = 40;
  return text.size() <= keep ? std::string(text) : std::string(text.substr(0, keep)) + "...";
}

bool plain_name(const std::string& k) {
  if (k.empty()) return false;
  for (unsigned char c : k)
    if (!std::isalnum(c) && c != '_') return false;
  return true;
}

// What numeric_in takes (PostgreSQL 15, utils/adt/numeric.c): an exponent
// under INT_MAX / 2 either way (set_var_from_str), then a display scale
// that fits NUMERIC_DSCALE_MASK and a weight, in base-10000 digits, that
// fits an int16 (make_result).  Past them: "value overflows numeric format".
constexpr long long numeric_max_exponent = INT_MAX / 2;  // refused from here on
constexpr long long numeric_max_dscale = 0x3FFF;
constexpr long long numeric_min_weight = -32768, numeric_max_weight = 32767;

// A number written as stored may add this much to a document however short
// it is: more than the longest numeric writes a number in a double's range
// ("-0." and 16383 digits; 1e308 is 309).
constexpr std::size_t numeric_growth_floor = 1 << 15;

// A JSON number's text as jsonb stores it, which is numeric's (numeric_in,
// then numeric_out): the display scale is the digits after the point less
// the exponent (at least 0), and the value is written with exactly that
// many after the point, with no leading zeros ("0" before the point when
// nothing else) and no sign on zero.  1e2 is 100, 2.50E+1 is 25.0, -0.0 is
// 0.0, 1.5e-3 is 0.0015.  No rounding: the digits it keeps are those
// given, moved by the exponent.  Nullopt for a number numeric_in refuses
// (which the database refuses as written; *refused is then set), and for
// one longer than `max_size` as stored, found before it is written.
std::optional<std::string> numeric_text(std::string_view text, std::size_t max_size, bool* refused = nullptr) {
  auto refuse = [&] {
    if (refused) *refused = true;
    return std::nullopt;
  };
  const bool negative = !text.empty() && text.front() == '-';
  if (negative) text.remove_prefix(1);
  long long exponent = 0;
  const auto e = text.find_first_of("eE");
  if (e != std::string_view::npos) {
    std::string_view x = text.substr(e + 1);
    const bool down = !x.empty() && x.front() == '-';
    if (!x.empty() && (x.front() == '-' || x.front() == '+')) x.remove_prefix(1);
    for (char c : x) {  // digits only (JSON's grammar); leading zeros allowed
      exponent = exponent * 10 + (c - '0');
      if (exponent >= numeric_max_exponent) return refuse();
    }
    if (down) exponent = -exponent;
    text = text.substr(0, e);
  }
  const auto dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction = dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  const auto n = static_cast<long long>(whole.size() + fraction.size());
  // The i-th of the number's digits (the whole part's, then the fraction's); 0 outside them.
  auto digit = [&](long long i) -> char {
    if (i < 0 || i >= n) return '0';
    const auto u = static_cast<std::size_t>(i);
    return u < whole.size() ? whole[u] : fraction[u - whole.size()];
  };
  const long long point = static_cast<long long>(whole.size()) + exponent;  // digits before the point
  const long long dscale = std::max(0LL, static_cast<long long>(fraction.size()) - exponent);
  if (dscale > numeric_max_dscale) return refuse();
  long long first = 0;  // the first digit not 0; n when the number is zero
  while (first < n && digit(first) == '0') ++first;
  const bool zero = first == n;
  if (!zero) {
    const long long dweight = point - 1 - first;  // its power of ten
    const long long weight = dweight >= 0 ? dweight / 4 : -((-dweight - 1) / 4 + 1);
    if (weight < numeric_min_weight || weight > numeric_max_weight) return refuse();
  }
  // Digits before the point: from the first not 0 (its weight bounds them), else a 0.
  const long long int_digits = zero || first >= point ? 0 : point - first;
  const auto size = static_cast<std::size_t>((negative && !zero) + std::max(int_digits, 1LL) +
                                             (dscale > 0 ? 1 + dscale : 0));
  if (size > max_size) return std::nullopt;
  std::string out;
  out.reserve(size);
  if (negative && !zero) out += '-';
  if (int_digits == 0) out += '0';
  for (long long i = point - int_digits; i < point; ++i) out += digit(i);
  if (dscale > 0) {
    out += '.';
    for (long long i = point; i < point + dscale; ++i) out += digit(i);
  }
  return out;
}

// Builds the document from nlohmann's SAX events, as its own DOM parser
// does, and stops (returns false) at the first container nested past the
// limit or, when refusing them, the first key its object already has: the
// object's own insert finds that, so no extra set of keys is kept.
class Builder {
 public:
  Builder(JsonInput& out, std::size_t max_depth, DuplicateKeys duplicates, Numbers numbers, std::size_t growth)
      : out_(out), max_depth_(max_depth), duplicates_(duplicates), numbers_(numbers), growth_left_(growth) {}

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(json::number_integer_t v) { return put(v); }
  bool number_unsigned(json::number_unsigned_t v) { return put(v); }
  // nlohmann reads as a double every number with a fraction or an exponent,
  // and every integer past int64 and uint64; `text` is the number as read.
  // Exact, it is the number as jsonb stores it, while the document grows
  // by no more than growth_left_; past that (or when numeric refuses it) as
  // read.
  bool number_float(json::number_float_t v, const json::string_t& text) {
    if (numbers_ == Numbers::exact) {
      const auto stored = numeric_text(text, text.size() + growth_left_);
      if (stored && stored->size() > text.size()) growth_left_ -= stored->size() - text.size();
      const std::string& t = stored ? *stored : text;
      json d = v;
      if (d.dump() != t) return put(raw_number(t));
    }
    return put(v);
  }
  bool string(json::string_t& v) { return put(std::move(v)); }
  bool binary(json::binary_t& v) { return put(json::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(json::string_t& k) {
    auto& obj = stack_.back().value->get_ref<json::object_t&>();
    auto [it, fresh] = obj.try_emplace(std::move(k));
    stack_.back().key = &it->first;
    if (!fresh) {
      if (duplicates_ == DuplicateKeys::refuse) {
        out_.error = JsonInput::Error::duplicate_key;
        out_.key = it->first;
        out_.path = path();
        return false;
      }
      it->second = nullptr;  // the last value wins
    }
    element_ = &it->second;
    return true;
  }

  // A number past a double's range (out_of_range.406) is read in a value's
  // place, so where it is is known: the open containers, and the member
  // whose key came last or the array's next element.  The `token` is the
  // number as read.
  bool parse_error(std::size_t, const std::string& token, const nlohmann::detail::exception& e) {
    out_.error = JsonInput::Error::syntax;
    out_.message = parser_message(e.what());
    if (e.id == 406) {
      out_.error = JsonInput::Error::number_out_of_range;
      out_.number = shown_number(token);
      out_.path = path(true);
      if (!stack_.empty() && stack_.front().value->is_object() && stack_.front().key)
        out_.field = *stack_.front().key;
    }
    return false;
  }

 private:
  struct Frame {
    json* value;                         // an open object or array
    const std::string* key = nullptr;    // an object's member being read
  };

  // Places a value where the document is at: its root, the next element of
  // the open array, or the member whose key came last.
  json* place(json&& v) {
    if (stack_.empty()) {
      out_.value = std::move(v);
      return &out_.value;
    }
    auto& top = *stack_.back().value;
    if (top.is_array()) {
      auto& a = top.get_ref<json::array_t&>();
      a.push_back(std::move(v));
      return &a.back();
    }
    *element_ = std::move(v);
    return element_;
  }
  bool put(json&& v) {
    place(std::move(v));
    return true;
  }
  bool open(json&& container) {
    if (stack_.size() >= max_depth_) {
      out_.error = JsonInput::Error::too_deep;
      // The top-level member the limit was hit in (none when the top level
      // is not an object, or is itself too deep).
      if (!stack_.empty() && stack_.front().value->is_object() && stack_.front().key)
        out_.field = *stack_.front().key;
      return false;
    }
    stack_.push_back({place(std::move(container))});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  // Where the innermost open container is, from the top level: `a.b[2]`;
  // with `value`, where the value read next in it goes (its last key's
  // member, its next element): `a.b[2].c`.
  std::string path(bool value = false) const {
    std::string p;
    const std::size_t frames = value || stack_.empty() ? stack_.size() : stack_.size() - 1;
    for (std::size_t i = 0; i < frames; ++i) {
      const auto& f = stack_[i];
      if (f.value->is_array()) {
        // An outer array's last element is the open container; the
        // innermost one's next is the value.
        p += "[" + std::to_string(f.value->size() - (i + 1 < stack_.size() ? 1 : 0)) + "]";
      } else if (plain_name(*f.key)) {
        if (!p.empty()) p += '.';
        p += *f.key;
      } else {
        p += "[" + json(*f.key).dump(-1, ' ', false, json::error_handler_t::replace) + "]";
      }
    }
    return p;
  }

  JsonInput& out_;
  std::size_t max_depth_;
  DuplicateKeys duplicates_;
  Numbers numbers_;
  std::size_t growth_left_;  // bytes numbers written as stored may still add to the document
  std::vector<Frame> stack_;
  json* element_ = nullptr;  // the member of the innermost object whose key came last
};

// `text` with every number past a double's range written as 0 and blanks,
// so every other token keeps its offset (and a syntax error its message).
// Read with nlohmann's own lexer, so the tokens are the parser's; up to the
// first token it cannot read, where the parser stops too.
std::string without_overflowing_numbers(std::string_view text) {
  std::string out(text);
  const char* begin = text.data();
  using Lexer = nlohmann::detail::lexer<json, decltype(nlohmann::detail::input_adapter(begin, begin))>;
  using Token = Lexer::token_type;
  Lexer lexer(nlohmann::detail::input_adapter(begin, begin + text.size()), false);
  for (Token t = lexer.scan(); t != Token::end_of_input && t != Token::parse_error; t = lexer.scan()) {
    if (t != Token::value_float || std::isfinite(lexer.get_number_float())) continue;
    const std::size_t end = lexer.get_position().chars_read_total;
    const std::size_t size = lexer.get_token_string().size();  // [-+.0-9eE]: nothing escaped
    out.replace(end - size, size, "0" + std::string(size - 1, ' '));
  }
  return out;
}

}  // namespace

json raw_number(std::string_view text) {
  return json::binary(json::binary_t::container_type(text.begin(), text.end()), raw_number_subtype);
}

bool is_raw_number(const json& v) {
  return v.is_binary() && v.get_binary().has_subtype() && v.get_binary().subtype() == raw_number_subtype;
}

std::string_view raw_number_text(const json& v) {
  if (!is_raw_number(v)) return {};
  const auto& b = v.get_binary();
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

std::optional<double> number_of(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (!is_raw_number(v)) return std::nullopt;
  std::string text(raw_number_text(v));
  char* end = nullptr;
  double d = std::strtod(text.c_str(), &end);  // JSON's number syntax is strtod's (C locale)
  if (end != text.c_str() + text.size() || !std::isfinite(d)) return std::nullopt;
  return d;
}

JsonInput parse_json_input(std::string_view text, std::size_t max_depth, DuplicateKeys duplicates,
                           Numbers numbers) {
  JsonInput out;
  // Bytes JSON text never holds, which nlohmann passes over: it ends the
  // input at a NUL ({"kind": "t"}\0garbage was a valid request body) and
  // skips a leading byte order mark (which the text passed on to the
  // server then still had: 22P02 naming a field that was fine).
  if (auto nul = text.find('\0'); nul != std::string_view::npos) {
    out.error = JsonInput::Error::syntax;
    out.message = "a NUL byte at offset " + std::to_string(nul) + " (write \\u0000 in a string)";
    return out;
  }
  if (text.substr(0, 3) == "\xEF\xBB\xBF") {
    out.error = JsonInput::Error::syntax;
    out.message = "a byte order mark (U+FEFF) before the document";
    return out;
  }
  // A number written as stored may be far longer than as read (1e-16383
  // is 16385 bytes): all told, they may add as much as the document holds,
  // or a number's worth to a short one, so that a step's 16 MiB of output
  // takes no more than twice that, not gigabytes.
  Builder builder(out, max_depth, duplicates, numbers, std::max(text.size(), numeric_growth_floor));
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json, true);
  } catch (const json::exception& e) {
    out.error = JsonInput::Error::syntax;
    out.message = parser_message(e.what());
  }
  if (!ok && out.error == JsonInput::Error::none) {
    out.error = JsonInput::Error::syntax;
    out.message = "not a JSON document";
  }
  if (out.error == JsonInput::Error::number_out_of_range) {
    // The parser stops at the number, so the rest is unread: a syntax error
    // there (a key twice, a nesting too deep) is the document's, and comes
    // first.  So the document is read again with each such number as 0,
    // which is the value then, for the checks that come before a value's
    // (the names of a body's fields).
    const std::string rest = without_overflowing_numbers(text);
    JsonInput again;
    Builder check(again, max_depth, duplicates, Numbers::doubles, 0);
    try {
      json::sax_parse(rest.begin(), rest.end(), &check, json::input_format_t::json, true);
    } catch (const json::exception& e) {
      again.error = JsonInput::Error::syntax;
      again.message = parser_message(e.what());
    }
    if (again.error != JsonInput::Error::none) out = std::move(again);
    else out.value = std::move(again.value);
  }
  if (out.error != JsonInput::Error::none && out.error != JsonInput::Error::number_out_of_range) out.value = nullptr;
  return out;
}

bool contains_nul(const nlohmann::json& v) {
  auto has_nul = [](const std::string& s) { return s.find('\0') != std::string::npos; };
  std::vector<const nlohmann::json*> todo{&v};
  while (!todo.empty()) {
    const auto* j = todo.back();
    todo.pop_back();
    if (j->is_string()) {
      if (has_nul(j->get_ref<const std::string&>())) return true;
    } else if (j->is_object()) {
      for (auto it = j->begin(); it != j->end(); ++it) {
        if (has_nul(it.key())) return true;
        todo.push_back(&it.value());
      }
    } else if (j->is_array()) {
      for (const auto& e : *j) todo.push_back(&e);
    }
  }
  return false;
}

bool numeric_accepts(std::string_view number) {
  bool refused = false;
  numeric_text(number, 0, &refused);  // size 0: nothing is written
  return !refused;
}

std::string unstorable_number(const nlohmann::json& v) {
  // Walked with its own stack, children pushed last first: the first in
  // the document's order (an object's keys sorted) is found first.
  std::vector<const nlohmann::json*> todo{&v};
  while (!todo.empty()) {
    const auto* j = todo.back();
    todo.pop_back();
    if (is_raw_number(*j)) {
      const std::string_view text = raw_number_text(*j);
      if (numeric_accepts(text)) continue;
      return shown_number(text);
    }
    if (j->is_object() || j->is_array()) {
      const std::size_t at = todo.size();
      for (const auto& e : *j) todo.push_back(&e);
      std::reverse(todo.begin() + static_cast<std::ptrdiff_t>(at), todo.end());
    }
  }
  return {};
}

}  // namespace bgexec::core
