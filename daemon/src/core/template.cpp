#include "template.hpp"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <system_error>

#include "utf8.hpp"

namespace bgexec::core {

namespace {

// One `{{ ... }}` occurrence inside a string.
struct Placeholder {
  std::size_t begin;  // offset of "{{"
  std::size_t end;    // offset just past "}}"
  std::string expr;   // trimmed inner text
};

// Strips ASCII whitespace from both ends.
std::string_view trim(std::string_view s) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Finds every complete placeholder in order; an opening "{{" with no "}}"
// after it ends the scan, leaving the rest as literal text.
std::vector<Placeholder> scan(std::string_view text) {
  std::vector<Placeholder> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t open = text.find("{{", pos);
    if (open == std::string_view::npos) break;
    const std::size_t close = text.find("}}", open + 2);
    if (close == std::string_view::npos) break;
    out.push_back({open, close + 2, std::string(trim(text.substr(open + 2, close - open - 2)))});
    pos = close + 2;
  }
  return out;
}

// Splits on '.', keeping empty segments so "input..a" is detectably wrong.
std::vector<std::string> split_path(std::string_view expr) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = expr.find('.', start);
    parts.emplace_back(expr.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts;
}

// Joins segments [from, to) with '.', for error messages.
std::string join(const std::vector<std::string>& parts, std::size_t from, std::size_t to) {
  std::string out;
  for (std::size_t i = from; i < to; ++i) {
    if (i > from) out.push_back('.');
    out += parts[i];
  }
  return out;
}

// Parses an array index segment: decimal digits only, no sign.
std::optional<std::size_t> parse_index(const std::string& seg) {
  if (seg.empty() || !std::all_of(seg.begin(), seg.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  std::size_t idx = 0;
  const auto [end, ec] = std::from_chars(seg.data(), seg.data() + seg.size(), idx);
  if (ec != std::errc{} || end != seg.data() + seg.size()) return std::nullopt;
  return idx;
}

// Builds the error for one expression: `template {{EXPR}}: WHAT`, each
// cut (a path of a payload's size, hundreds of KB, was quoted whole, in the
// job's error and two of its events).
TemplateError error_for(const std::string& expr, const std::string& what) {
  return TemplateError("template {{" + utf8_cut(expr, 200, "…") + "}}: " + utf8_cut(what, 400, "…"));
}

// Walks parts[from..] through objects (by key) and arrays (by index). On a
// miss, throws naming `owner` and the path up to the failing segment.
const nlohmann::json& walk(const nlohmann::json& root, const std::vector<std::string>& parts,
                           std::size_t from, const std::string& expr, const std::string& owner) {
  const nlohmann::json* cur = &root;
  for (std::size_t i = from; i < parts.size(); ++i) {
    const std::string& seg = parts[i];
    const nlohmann::json* next = nullptr;
    if (cur->is_object()) {
      const auto it = cur->find(seg);
      if (it != cur->end()) next = &*it;
    } else if (cur->is_array()) {
      const auto idx = parse_index(seg);
      if (idx && *idx < cur->size()) next = &(*cur)[*idx];
    }
    if (next == nullptr) {
      std::string what = owner + " \"" + join(parts, from, i + 1) + "\"";
      // Past an array's end, or no index: say what is there (it read as a
      // missing field, "x.5").
      if (cur->is_array())
        what += " (" + (i > from ? "\"" + join(parts, from, i) + "\" is " : std::string()) + "an array of " +
                std::to_string(cur->size()) + (cur->size() == 1 ? " item" : " items") + ")";
      throw error_for(expr, what);
    }
    cur = next;
  }
  return *cur;
}

// Resolves one trimmed expression to its JSON value; records secrets used.
nlohmann::json evaluate(const std::string& expr, const TemplateContext& ctx,
                        std::vector<std::string>* secrets_used) {
  if (expr.empty()) throw error_for(expr, "empty expression");
  const std::vector<std::string> parts = split_path(expr);
  if (std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
    if (parts[0] != "secrets") throw error_for(expr, "empty path segment");
  }
  const std::string& root = parts[0];

  if (root == "input") {
    return walk(ctx.input, parts, 1, expr, "input has no field");
  }

  if (root == "steps") {
    if (parts.size() < 3) {
      throw error_for(expr, "expected steps.ID.output or steps.ID.stdout");
    }
    const std::string& id = parts[1];
    const nlohmann::json* step = nullptr;
    if (ctx.steps.is_object()) {
      const auto it = ctx.steps.find(id);
      if (it != ctx.steps.end()) step = &*it;
    }
    if (step == nullptr || !step->is_object()) {
      throw error_for(expr, "step \"" + id + "\" has not completed (or does not exist)");
    }
    if (parts[2] == "output") {
      static const nlohmann::json null_output;
      const auto it = step->find("output");
      const nlohmann::json& output = it != step->end() ? *it : null_output;
      return walk(output, parts, 3, expr, "step \"" + id + "\" has no output");
    }
    if (parts[2] == "stdout") {
      if (parts.size() > 3) throw error_for(expr, "steps.ID.stdout takes no path");
      const auto it = step->find("stdout");
      // As the worker recorded it: one trailing newline already trimmed.
      if (it != step->end() && it->is_string()) return it->get<std::string>();
      // None recorded (a sql step's rows, an approval's resume input, a
      // stdout its output renders exactly): the output stands in, its text
      // if a string, else its compact JSON; in every run alike.  A null
      // one too, "null": an approval resumed without input (the CLI's
      // plain `resume ID`) failed the job here, as did a sleep step or one
      // skipped by its `if`, whose {{steps.ID.output}} renders null.
      const auto out = step->find("output");
      if (out == step->end()) throw error_for(expr, "step \"" + id + "\" has no stdout");
      return out->is_string() ? *out : nlohmann::json(dump(*out));
    }
    throw error_for(expr, "unknown step field \"" + parts[2] + "\" (expected output or stdout)");
  }

  if (root == "secrets") {
    const std::string name = expr.size() > 8 ? expr.substr(8) : std::string();
    if (name.empty()) throw error_for(expr, "expected secrets.NAME");
    std::optional<std::string> value;
    if (ctx.secret) value = ctx.secret(name);
    if (!value) throw error_for(expr, "secret " + name + " is not available");
    if (secrets_used != nullptr) secrets_used->push_back(*value);
    return *value;
  }

  throw error_for(expr, "unknown root \"" + root + "\" (expected input, steps or secrets)");
}

// Takes n bytes from the budget (none given: no bound); throws naming the
// expression being rendered (empty: literal text) when they are not left.
void charge(RenderBudget* budget, std::size_t n, const std::string& expr) {
  if (budget == nullptr) return;
  if (n > budget->left) {
    std::string what = "the rendered value would be over " +
                       (budget->bound.empty() ? std::to_string(budget->cap) + " bytes" : budget->bound);
    throw expr.empty() ? TemplateError("template: " + what) : error_for(expr, what);
  }
  budget->left -= n;
}

// The bytes charged for a value: strings as their text (and quotes), other
// scalars as about their JSON, containers as their items, keys and
// punctuation.  Iterative: an output nests up to max_json_depth levels.
std::size_t rendered_size(const nlohmann::json& value) {
  std::size_t n = 0;
  std::vector<const nlohmann::json*> todo{&value};
  while (!todo.empty()) {
    const nlohmann::json* v = todo.back();
    todo.pop_back();
    switch (v->type()) {
      case nlohmann::json::value_t::string:
        n += v->get_ref<const std::string&>().size() + 2;
        break;
      case nlohmann::json::value_t::object:
        n += 2;
        for (auto it = v->begin(); it != v->end(); ++it) {
          n += it.key().size() + 4;
          todo.push_back(&it.value());
        }
        break;
      case nlohmann::json::value_t::array:
        n += 2;
        for (const auto& item : *v) {
          n += 1;
          todo.push_back(&item);
        }
        break;
      case nlohmann::json::value_t::binary:  // a raw number: its text
        n += v->get_binary().size();
        break;
      default:
        n += 8;
    }
  }
  return n;
}

// Renders one string: a lone placeholder keeps its value's type; otherwise
// the placeholders are spliced into the surrounding text.
nlohmann::json render_string(const std::string& text, const TemplateContext& ctx,
                             std::vector<std::string>* secrets_used, RenderBudget* budget) {
  const std::vector<Placeholder> found = scan(text);
  if (found.empty()) {
    charge(budget, text.size() + 2, "");
    return text;
  }
  if (found.size() == 1 && found[0].begin == 0 && found[0].end == text.size()) {
    nlohmann::json v = evaluate(found[0].expr, ctx, secrets_used);
    charge(budget, rendered_size(v), found[0].expr);
    return v;
  }
  charge(budget, 2, "");
  std::string out;
  std::size_t pos = 0;
  for (const auto& ph : found) {
    charge(budget, ph.begin - pos, "");
    out.append(text, pos, ph.begin - pos);
    const nlohmann::json v = evaluate(ph.expr, ctx, secrets_used);
    if (v.is_string()) {
      charge(budget, v.get_ref<const std::string&>().size(), ph.expr);
      out += v.get_ref<const std::string&>();
    } else {
      std::string text_of = dump(v);
      charge(budget, text_of.size(), ph.expr);
      out += text_of;
    }
    pos = ph.end;
  }
  charge(budget, text.size() - pos, "");
  out.append(text, pos, std::string::npos);
  return out;
}

// Calls fn(parts) for every placeholder expression in every string of value.
template <typename Fn>
void for_each_expr(const nlohmann::json& value, const Fn& fn) {
  if (value.is_string()) {
    for (const auto& ph : scan(value.get_ref<const std::string&>())) fn(split_path(ph.expr));
  } else if (value.is_structured()) {
    for (const auto& item : value) for_each_expr(item, fn);
  }
}

// Appends s to out unless already present (keeps first-appearance order).
void add_unique(std::vector<std::string>& out, const std::string& s) {
  if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
}

}  // namespace

// Recurses through containers, copying keys and rendering string leaves.
nlohmann::json render(const nlohmann::json& value, const TemplateContext& ctx,
                      std::vector<std::string>* secrets_used, RenderBudget* budget) {
  switch (value.type()) {
    case nlohmann::json::value_t::string:
      return render_string(value.get_ref<const std::string&>(), ctx, secrets_used, budget);
    case nlohmann::json::value_t::object: {
      charge(budget, 2, "");
      nlohmann::json out = nlohmann::json::object();
      for (const auto& [key, item] : value.items()) {
        charge(budget, key.size() + 4, "");
        out[key] = render(item, ctx, secrets_used, budget);
      }
      return out;
    }
    case nlohmann::json::value_t::array: {
      charge(budget, 2, "");
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : value) {
        charge(budget, 1, "");
        out.push_back(render(item, ctx, secrets_used, budget));
      }
      return out;
    }
    default:
      charge(budget, rendered_size(value), "");
      return value;
  }
}

// Collects parts[1] of every `steps.ID...` expression.
std::vector<std::string> referenced_steps(const nlohmann::json& value) {
  std::vector<std::string> ids;
  for_each_expr(value, [&](const std::vector<std::string>& parts) {
    if (parts.size() >= 2 && parts[0] == "steps" && !parts[1].empty()) add_unique(ids, parts[1]);
  });
  return ids;
}

// Collects the NAME of every `secrets.NAME` expression (dots allowed in NAME).
std::vector<std::string> referenced_secrets(const nlohmann::json& value) {
  std::vector<std::string> names;
  for_each_expr(value, [&](const std::vector<std::string>& parts) {
    if (parts.size() >= 2 && parts[0] == "secrets") {
      const std::string name = join(parts, 1, parts.size());
      if (!name.empty()) add_unique(names, name);
    }
  });
  return names;
}

}  // namespace bgexec::core
