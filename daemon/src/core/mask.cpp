#include "mask.hpp"

#include "utf8.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <vector>

namespace bgexec::core {

namespace {

constexpr std::string_view mask_text = "***";

// Drops a trailing partial UTF-8 sequence from `kept` when `next` (the
// first byte cut away) is a continuation byte, so a cut line never ends in
// half a character. Non-UTF-8 input is left as is.
void trim_partial_utf8(std::string& kept, unsigned char next) {
  if ((next & 0xC0) != 0x80) return;
  std::size_t at = kept.size();
  while (at > 0 && kept.size() - at < 3 && (static_cast<unsigned char>(kept[at - 1]) & 0xC0) == 0x80) {
    --at;
  }
  if (at > 0 && (static_cast<unsigned char>(kept[at - 1]) & 0xC0) == 0xC0) kept.resize(at - 1);
}

// The inside of a JSON string literal holding text, as nlohmann writes it
// (with ensure_ascii, as Python's json.dumps does by default); nullopt when
// text is not UTF-8, which no encoder writes as such.
std::optional<std::string> json_escaped(const std::string& text, bool ascii) {
  try {
    std::string quoted = nlohmann::json(text).dump(-1, ' ', ascii);
    return quoted.substr(1, quoted.size() - 2);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// escaped with the hex digits of its \uXXXX escapes in upper case (Java,
// .NET); an escaped backslash before a 'u' is left alone.
std::string upper_hex(const std::string& escaped) {
  std::string out = escaped;
  for (std::size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i] != '\\') continue;
    if (out[i + 1] == 'u')
      for (std::size_t k = i + 2; k < i + 6 && k < out.size(); ++k)
        out[k] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[k])));
    ++i;  // the escaped character
  }
  return out;
}

// escaped with every '/' written as the escape \/, as PHP's json_encode
// (and others) write it.  No '/' of escaped is escaped already: the
// encoders above write '/' bare.
std::string slash_escaped(const std::string& escaped) {
  std::string out;
  for (char c : escaped) {
    if (c == '/') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// The characters an "HTML-safe" encoder writes as \u00XX: Go's
// encoding/json (by default) those of go_html, Gson those of gson_html.
constexpr std::string_view go_html = "&<>";
constexpr std::string_view gson_html = "&<>='";

// escaped (a form json_escaped wrote) with each character of html written
// as \u00XX in lower-case hex and U+2028 and U+2029 as \u2028 and \u2029,
// as Go and Gson write them; the characters of escaped's own escapes are
// left alone.
std::string html_escaped(const std::string& escaped, std::string_view html) {
  constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    const char c = escaped[i];
    if (c == '\\' && i + 1 < escaped.size()) {  // \", \\, \n, \uXXXX: its hex digits are not in html
      out.push_back(c);
      out.push_back(escaped[++i]);
    } else if (html.find(c) != std::string_view::npos) {
      out += "\\u00";
      out.push_back(hex[static_cast<unsigned char>(c) >> 4]);
      out.push_back(hex[static_cast<unsigned char>(c) & 15]);
    } else if (escaped.compare(i, 3, "\xe2\x80\xa8") == 0 || escaped.compare(i, 3, "\xe2\x80\xa9") == 0) {
      out += escaped[i + 2] == '\xa8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// The ASCII characters .NET's System.Text.Json writes as \u00XX by default
// (JavaScriptEncoder.Default) that an ensure_ascii encoder writes bare or
// as \": the quote, + and ` besides & ' < >.  Its other escapes are
// ensure_ascii's in upper-case hex: \\, \n, \t, \b, \f, \r short, other
// control characters, DEL and every non-ASCII character as \uXXXX.
constexpr std::string_view dotnet_hex = "\"&'+<>`";

// escaped (a form json_escaped wrote with ensure_ascii) as System.Text.Json
// writes it: \" as \u0022, each character of dotnet_hex as \u00XX, and the
// hex digits of every \uXXXX in upper case; the characters of escaped's
// own escapes (\\, \n, the digits of \u00e4) are left alone.
std::string dotnet_escaped(const std::string& escaped) {
  constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    const char c = escaped[i];
    if (c == '\\' && i + 1 < escaped.size()) {
      if (escaped[++i] == '"') {
        out += "\\u0022";
      } else {
        out.push_back(c);
        out.push_back(escaped[i]);
      }
    } else if (dotnet_hex.find(c) != std::string_view::npos) {
      out += "\\u00";
      out.push_back(hex[static_cast<unsigned char>(c) >> 4]);
      out.push_back(hex[static_cast<unsigned char>(c) & 15]);
    } else {
      out.push_back(c);
    }
  }
  return upper_hex(out);
}

// Whether an HTML-safe encoder writes text otherwise than a plain one.
bool has_html(const std::string& text) {
  return text.find_first_of(gson_html) != std::string::npos || text.find("\xe2\x80\xa8") != std::string::npos ||
         text.find("\xe2\x80\xa9") != std::string::npos;
}

// Whether a and b are in secrets_'s order: longest first, then lexical.
bool before(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() > b.size() : a < b;
}

}  // namespace

// The secret and the forms JSON encoders write it in, one per encoder
// style (never a mix of styles within one string): plain or ensure_ascii;
// '/' bare or \/; bare or HTML-safe as Go or as Gson; lower or upper hex;
// and, for a secret holding a character of dotnet_hex, as .NET writes it.
// At most 25 forms besides the secret, and only those that differ.
void Masker::add(std::string secret) {
  if (secret.empty()) return;
  std::vector<std::string> forms;
  const bool html = has_html(secret);
  const bool slash = secret.find('/') != std::string::npos;
  const bool dotnet = secret.find_first_of(dotnet_hex) != std::string::npos;
  for (bool ascii : {false, true}) {
    auto escaped = json_escaped(secret, ascii);
    if (!escaped) continue;
    if (ascii && dotnet) forms.push_back(dotnet_escaped(*escaped));
    std::vector<std::string> styles{std::move(*escaped)};
    if (html) {
      styles.push_back(html_escaped(styles[0], go_html));
      styles.push_back(html_escaped(styles[0], gson_html));
    }
    for (std::string& style : styles) {
      if (slash) {
        forms.push_back(slash_escaped(style));
        forms.push_back(upper_hex(forms.back()));
      }
      forms.push_back(upper_hex(style));
      forms.push_back(std::move(style));
    }
  }
  forms.push_back(std::move(secret));
  insert(std::move(forms));
}

// Keeps secrets_ sorted by descending length (ties: lexical, for a stable
// order; duplicates are found by binary search).  One sort and one build of
// the automaton, before the next masking, for all the secrets added since.
void Masker::insert(std::vector<std::string> forms) {
  const std::size_t old_size = secrets_.size();
  for (std::string& secret : forms) {
    if (std::binary_search(secrets_.begin(), secrets_.begin() + static_cast<std::ptrdiff_t>(old_size), secret, before) ||
        std::find(secrets_.begin() + static_cast<std::ptrdiff_t>(old_size), secrets_.end(), secret) != secrets_.end())
      continue;
    secrets_.push_back(std::move(secret));
  }
  if (secrets_.size() == old_size) return;
  std::sort(secrets_.begin(), secrets_.end(), before);
  built_ = false;
}

// The trie first (each node's children a list through sibling links), then
// its nodes renumbered breadth first as states, so each state's failure
// link, match and dense row are computed from states already complete: a
// suffix of a prefix is shorter, so it comes earlier.
void Masker::build() const {
  std::vector<std::uint32_t> first_kid(1, 0);
  std::vector<std::uint32_t> sibling(1, 0);
  std::vector<unsigned char> byte(1, 0);
  std::vector<bool> ends(1, false);  // a form ends at the node
  for (const std::string& secret : secrets_) {
    std::uint32_t at = 0;
    for (const char ch : secret) {
      const auto c = static_cast<unsigned char>(ch);
      std::uint32_t kid = first_kid[at];
      while (kid != 0 && byte[kid] != c) kid = sibling[kid];
      if (kid == 0) {
        kid = static_cast<std::uint32_t>(first_kid.size());
        first_kid.push_back(0);
        sibling.push_back(first_kid[at]);
        byte.push_back(c);
        ends.push_back(false);
        first_kid[at] = kid;
      }
      at = kid;
    }
    ends[at] = true;
  }
  const std::size_t count = first_kid.size();
  states_.assign(count, State{});
  bytes_.assign(count, 0);
  dense_rows_ = 1;
  for (std::uint32_t kid = first_kid[0]; kid != 0; kid = sibling[kid]) ++dense_rows_;
  dense_.assign(dense_rows_ * 256, 0);
  std::vector<std::uint32_t> order{0};  // trie nodes by state number
  order.reserve(count);
  for (std::uint32_t k = 0; k < order.size(); ++k) {
    State& s = states_[k];
    s.kids = static_cast<std::uint32_t>(order.size());
    for (std::uint32_t node = first_kid[order[k]]; node != 0; node = sibling[node]) {
      const auto id = static_cast<std::uint32_t>(order.size());
      order.push_back(node);
      State& kid = states_[id];
      kid.depth = s.depth + 1;
      bytes_[id] = byte[node];
      if (ends[node]) {
        kid.fail = dead;
        kid.match = id;
      } else {
        kid.fail = k == 0 ? 0 : next(s.fail, byte[node]);
        kid.match = kid.fail == dead ? 0 : states_[kid.fail].match;
      }
    }
    s.kid_count = static_cast<std::uint32_t>(order.size()) - s.kids;
    if (k < dense_rows_) {  // the root's row, or their failure link's (the root's or dead) with their own children
      const auto row = dense_.begin() + static_cast<std::ptrdiff_t>(k) * 256;
      if (k != 0 && s.fail == dead) std::fill(row, row + 256, dead);
      else if (k != 0) std::copy(dense_.begin(), dense_.begin() + 256, row);
      for (std::uint32_t kid = s.kids; kid < s.kids + s.kid_count; ++kid) row[bytes_[kid]] = kid;
    }
  }
  built_ = true;
}

// Follows failure links until a state continues with c; a state with a
// dense row has the answer there.
std::uint32_t Masker::next(std::uint32_t state, unsigned char c) const {
  for (; state >= dense_rows_; state = states_[state].fail) {
    if (state == dead) return dead;
    const State& s = states_[state];
    for (std::uint32_t kid = s.kids; kid < s.kids + s.kid_count; ++kid)
      if (bytes_[kid] == c) return kid;
  }
  return dense_[state * 256 + c];
}

// Masks as a reference pass would: at each offset left to right, the
// longest form starting there becomes "***" and the pass resumes after it,
// otherwise the byte is copied.  The automaton (leftmost-longest, as the
// aho-corasick crate builds it) reports in each state the form ending there
// that starts first; past a form's end no failure link leads anywhere but
// dead, so a form found is only ever replaced by one starting at the same
// offset or earlier, and when the automaton dies the last form found is the
// leftmost and, for its offset, the longest.  The pass starts over at its
// end: the bytes read past it, fewer than the longest form, are read again.
std::size_t Masker::scan(std::string_view text, std::string& out, bool whole) const {
  if (!built_) build();
  const std::size_t n = text.size();
  std::size_t copied = 0;     // text[0, copied) is decided and in out
  std::size_t found = 0;      // the last form found: text[found, found_end)
  std::size_t found_end = 0;  // 0: none since the pass started over
  std::uint32_t state = 0;
  std::size_t j = 0;
  for (;;) {
    if (state == 0)  // no form under way: skip the bytes no form starts with
      while (j < n && dense_[static_cast<unsigned char>(text[j])] == 0) ++j;
    if (j < n) {
      state = next(state, static_cast<unsigned char>(text[j]));
      if (state != dead) {
        if (const std::uint32_t m = states_[state].match; m != 0) {
          found = j + 1 - states_[m].depth;
          found_end = j + 1;
        }
        ++j;
        continue;
      }
    } else {
      if (state == 0) break;
      // Streaming, the text from the state's offset on is a proper prefix
      // of a form: it is held back, with any form found (it starts there
      // or later).  Every offset before starts no form.
      if (!whole && states_[state].kid_count != 0) {
        const std::size_t at = n - states_[state].depth;
        out.append(text.data() + copied, at - copied);
        return at;
      }
      if (found_end == 0) break;
    }
    out.append(text.data() + copied, found - copied);
    out += mask_text;
    copied = j = found_end;
    found_end = 0;
    state = 0;
  }
  out.append(text.data() + copied, n - copied);
  return n;
}

// Single left-to-right pass: at each offset the longest matching secret is
// replaced and skipped, so overlapping secrets leave no fragment behind.
std::string Masker::mask(std::string_view text) const {
  if (secrets_.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  scan(text, out, true);
  return out;
}

// Recurses through objects and arrays; scalars other than strings are only
// rewritten when their JSON text actually contains a secret.
nlohmann::json Masker::mask_json(const nlohmann::json& value) const {
  nlohmann::json out = value;
  mask_json_in_place(out);
  return out;
}

void Masker::mask_json_in_place(nlohmann::json& value) const {
  if (secrets_.empty()) return;
  switch (value.type()) {
    case nlohmann::json::value_t::string: {
      auto& text = value.get_ref<std::string&>();
      std::string masked = mask(text);
      if (masked != text) text = std::move(masked);
      return;
    }
    case nlohmann::json::value_t::object: {
      // A key holding a secret is masked too: its item moves to the masked
      // key (where two keys mask alike, one of their items is kept).
      std::vector<std::string> renamed;
      for (auto it = value.begin(); it != value.end(); ++it) {
        mask_json_in_place(it.value());
        if (mask(it.key()) != it.key()) renamed.push_back(it.key());
      }
      for (const auto& key : renamed) {
        nlohmann::json item = std::move(value[key]);
        value.erase(key);
        value[mask(key)] = std::move(item);
      }
      return;
    }
    case nlohmann::json::value_t::array:
      for (auto& item : value) mask_json_in_place(item);
      return;
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
    case nlohmann::json::value_t::binary:  // a raw number: its text (core::dump)
    case nlohmann::json::value_t::boolean: {
      const std::string text = dump(value);
      std::string masked = mask(text);
      if (masked != text) value = std::move(masked);
      return;
    }
    default:
      return;
  }
}

// No secrets registered.
bool Masker::empty() const { return secrets_.empty(); }

// mask()'s pass, stopping at the first offset where a form longer than the
// rest of text starts with that rest: a longer form that may still match
// wins over a shorter one matching now, as in mask().
std::size_t Masker::mask_decided(std::string_view text, std::string& out) const { return scan(text, out, false); }

std::string StreamMasker::feed(std::string_view chunk) {
  std::string out;
  if (held_.empty() && masker_.empty()) return std::string(chunk);
  held_.append(chunk);
  out.reserve(held_.size());
  held_.erase(0, masker_.mask_decided(held_, out));
  return out;
}

std::string StreamMasker::flush() {
  std::string out = masker_.mask(held_);
  held_.clear();
  return out;
}

// A zero cap would make every line "truncated"; clamp to one byte.
LineSplitter::LineSplitter(std::size_t max_line) : max_line_(std::max<std::size_t>(max_line, 1)) {}

// Drops one trailing '\r' (CRLF output) and stores the line.
void LineSplitter::emit(std::vector<std::string>& out, std::string line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  out.push_back(std::move(line));
}

// Buffers at most max_line_ bytes; on overflow emits the kept prefix with the
// marker at once and discards input until the line's '\n', so memory stays
// bounded whatever the child writes.
std::vector<std::string> LineSplitter::feed(std::string_view chunk) {
  std::vector<std::string> lines;
  while (!chunk.empty()) {
    const std::size_t nl = chunk.find('\n');
    const std::string_view piece = chunk.substr(0, nl);
    if (discarding_) {
      if (nl == std::string_view::npos) return lines;
      discarding_ = false;
    } else if (buffer_.size() + piece.size() > max_line_) {
      const std::size_t room = max_line_ - buffer_.size();
      buffer_.append(piece.substr(0, room));
      trim_partial_utf8(buffer_, static_cast<unsigned char>(piece[room]));
      buffer_ += truncation_marker;
      lines.push_back(std::move(buffer_));
      buffer_.clear();
      discarding_ = nl == std::string_view::npos;
      if (discarding_) return lines;
    } else if (nl == std::string_view::npos) {
      buffer_.append(piece);
      return lines;
    } else {
      buffer_.append(piece);
      emit(lines, std::move(buffer_));
      buffer_.clear();
    }
    chunk.remove_prefix(nl + 1);
  }
  return lines;
}

// The partial last line at EOF; the splitter is reusable afterwards.
std::string LineSplitter::flush() {
  std::string rest = std::move(buffer_);
  buffer_.clear();
  discarding_ = false;
  if (!rest.empty() && rest.back() == '\r') rest.pop_back();
  return rest;
}

}  // namespace bgexec::core
