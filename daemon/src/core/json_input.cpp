#include "json_input.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace bgexec::core {

namespace {

using json = nlohmann::json;

// "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
// without its bracketed prefix.
// The text it last read is cut to 60 bytes: it quoted a malformed token
// whole, and a 1 MiB request body came back in its 400.
std::string parser_message(const std::string& what) {
  std::string m = what;
  if (auto p = m.find("] "); m.rfind("[json.exception.", 0) == 0 && p != std::string::npos) m = m.substr(p + 2);
  constexpr std::string_view marker = "last read: '";
  constexpr std::size_t keep = 60;
  const auto start = m.find(marker);
  const auto end = m.rfind('\'');
  if (start != std::string::npos && end != std::string::npos && end > start + marker.size() + keep) {
    std::size_t cut = start + marker.size() + keep;
    while (cut > start + marker.size() && (static_cast<unsigned char>(m[cut]) & 0xC0) == 0x80) --cut;
    m = m.substr(0, cut) + "..." + m.substr(end);
  }
  return m;
}

bool plain_name(const std::string& k) {
  if (k.empty()) return false;
  for (unsigned char c : k)
    if (!std::isalnum(c) && c != '_') return false;
  return true;
}

// Builds the document from nlohmann's SAX events, as its own DOM parser
// does, and stops (returns false) at the first container nested past the
// limit or, when refusing them, the first key its object already has: the
// object's own insert finds that, so no extra set of keys is kept.
class Builder {
 public:
  Builder(JsonInput& out, std::size_t max_depth, DuplicateKeys duplicates, Numbers numbers)
      : out_(out), max_depth_(max_depth), duplicates_(duplicates), numbers_(numbers) {}

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(json::number_integer_t v) { return put(v); }
  bool number_unsigned(json::number_unsigned_t v) { return put(v); }
  // nlohmann reads as a double every number with a fraction or an exponent,
  // and every integer past int64 and uint64; `text` is the number as read.
  bool number_float(json::number_float_t v, const json::string_t& text) {
    if (numbers_ == Numbers::exact) {
      json d = v;
      if (d.dump() != text) return put(raw_number(text));
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

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    out_.error = JsonInput::Error::syntax;
    out_.message = parser_message(e.what());
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

  // Where the innermost open container is, from the top level: `a.b[2]`.
  std::string path() const {
    std::string p;
    for (std::size_t i = 0; i + 1 < stack_.size(); ++i) {
      const auto& f = stack_[i];
      if (f.value->is_array()) {
        p += "[" + std::to_string(f.value->size() - 1) + "]";
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
  std::vector<Frame> stack_;
  json* element_ = nullptr;  // the member of the innermost object whose key came last
};

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
  Builder builder(out, max_depth, duplicates, numbers);
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
  if (out.error != JsonInput::Error::none) out.value = nullptr;
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

}  // namespace bgexec::core
