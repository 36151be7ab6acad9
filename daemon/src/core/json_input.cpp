#include "json_input.hpp"

#include <vector>

namespace bgexec::core {

namespace {

// Thrown from the parser callback to stop at the first container too deep.
struct TooDeep {};

}  // namespace

// The parser callback sees each container's start with the number of
// containers around it, and each key with its own object's depth: the
// top-level object's keys arrive at depth 1.
JsonInput parse_json_input(std::string_view text, std::size_t max_depth) {
  JsonInput out;
  std::string top_key;
  auto limit = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using ev = nlohmann::json::parse_event_t;
    if (event == ev::key && depth == 1) {
      top_key = parsed.get<std::string>();
    } else if ((event == ev::object_start || event == ev::array_start) &&
               static_cast<std::size_t>(depth) >= max_depth) {
      throw TooDeep{};
    }
    return true;
  };
  try {
    out.value = nlohmann::json::parse(text.begin(), text.end(), limit, true);
  } catch (const TooDeep&) {
    out.error = JsonInput::Error::too_deep;
    out.field = top_key;
  } catch (const nlohmann::json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    std::string m = e.what();
    if (auto p = m.find("] "); m.rfind("[json.exception.", 0) == 0 && p != std::string::npos)
      m = m.substr(p + 2);
    out.error = JsonInput::Error::syntax;
    out.message = std::move(m);
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
