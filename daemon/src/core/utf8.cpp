#include "utf8.hpp"

#include "json_input.hpp"

namespace bgexec::core {

namespace {

constexpr std::string_view replacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed sequence at text[i], or 0 when it is
// ill-formed; *bad is then the length of its maximal subpart (>= 1), the
// bytes one U+FFFD stands for.
std::size_t sequence_at(std::string_view text, std::size_t i, std::size_t* bad) {
  const auto b = static_cast<unsigned char>(text[i]);
  if (b < 0x80) return 1;
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte (table 3-7)
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3;
    if (b == 0xE0) lo = 0xA0;       // no overlong forms
    else if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4;
    if (b == 0xF0) lo = 0x90;       // no overlong forms
    else if (b == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    *bad = 1;  // a continuation byte, C0, C1 or F5..FF cannot start a sequence
    return 0;
  }
  for (std::size_t k = 1; k < len; ++k) {
    if (i + k >= text.size()) {
      *bad = k;
      return 0;
    }
    const auto c = static_cast<unsigned char>(text[i + k]);
    const bool ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) {
      *bad = k;
      return 0;
    }
  }
  return len;
}

}  // namespace

// ASCII runs are skipped a byte at a time without decoding.
bool valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    std::size_t bad = 0;
    const std::size_t n = sequence_at(text, i, &bad);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

namespace {

// One pass: well-formed sequences are copied, each maximal ill-formed
// subpart (and with `nul`, each U+0000) becomes one U+FFFD.  One pass, not
// a replace per bad byte: each replace moved the rest of the text, so a
// step printing 2 MB of NUL bytes (binary output) held the worker's event
// loop for hours, its heartbeats with it.
std::string repaired(std::string_view text, bool nul) {
  std::string out;
  out.reserve(text.size() + 8);
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t bad = 0;
    const std::size_t n = nul && text[i] == '\0' ? (bad = 1, 0) : sequence_at(text, i, &bad);
    if (n == 0) {
      out += replacement;
      i += bad;
    } else {
      out.append(text, i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace

std::string to_valid_utf8(std::string_view text) { return repaired(text, false); }

std::size_t utf8_prefix(std::string_view text, std::size_t max) {
  if (text.size() <= max) return text.size();
  std::size_t cut = max;
  while (cut > 0 && max - cut < 3 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80 ? max : cut;
}

bool c1_at(std::string_view text, std::size_t i) {
  return static_cast<unsigned char>(text[i]) == 0xC2 && i + 1 < text.size() &&
         static_cast<unsigned char>(text[i + 1]) >= 0x80 && static_cast<unsigned char>(text[i + 1]) <= 0x9F;
}

std::string visible(std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c1_at(text, i)) {
      const auto c1 = static_cast<unsigned char>(text[++i]);
      out += "\\u00";
      out += hex[c1 >> 4];
      out += hex[c1 & 0xF];
    } else if (c == '\r') {
      out += "\\r";
    } else if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xF];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string utf8_cut(std::string text, std::size_t max, std::string_view suffix) {
  if (text.size() <= max) return text;
  text.resize(utf8_prefix(text, max));
  text += suffix;
  return text;
}

bool storable(std::string_view text) {
  return text.find('\0') == std::string_view::npos && valid_utf8(text);
}

std::string to_storable(std::string_view text) { return repaired(text, true); }

// Strings in place; an object is rebuilt only when one of its keys is bad.
bool sanitize_utf8(nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::string: {
      auto& s = value.get_ref<std::string&>();
      if (storable(s)) return false;
      s = to_storable(s);
      return true;
    }
    case nlohmann::json::value_t::array: {
      bool changed = false;
      for (auto& item : value) changed = sanitize_utf8(item) || changed;
      return changed;
    }
    case nlohmann::json::value_t::object: {
      bool bad_key = false;
      for (auto it = value.begin(); it != value.end() && !bad_key; ++it) bad_key = !storable(it.key());
      bool changed = false;
      if (!bad_key) {
        for (auto& item : value) changed = sanitize_utf8(item) || changed;
        return changed;
      }
      nlohmann::json out = nlohmann::json::object();
      for (auto it = value.begin(); it != value.end(); ++it) {
        sanitize_utf8(it.value());
        out[to_storable(it.key())] = std::move(it.value());
      }
      value = std::move(out);
      return true;
    }
    default:
      return false;
  }
}

namespace {

bool has_raw_number(const nlohmann::json& v) {
  if (is_raw_number(v)) return true;
  if (v.is_object() || v.is_array())
    for (const auto& item : v)
      if (has_raw_number(item)) return true;
  return false;
}

std::string plain_dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// nlohmann's compact form, with each raw number written as its text.
void dump_to(const nlohmann::json& v, std::string& out) {
  if (is_raw_number(v)) {
    out += raw_number_text(v);
  } else if (v.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += ',';
      first = false;
      out += plain_dump(it.key());
      out += ':';
      dump_to(it.value(), out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    bool first = true;
    for (const auto& item : v) {
      if (!first) out += ',';
      first = false;
      dump_to(item, out);
    }
    out += ']';
  } else {
    out += plain_dump(v);
  }
}

}  // namespace

std::string dump(const nlohmann::json& value) {
  if (!has_raw_number(value)) return plain_dump(value);
  std::string out;
  dump_to(value, out);
  return out;
}

}  // namespace bgexec::core
