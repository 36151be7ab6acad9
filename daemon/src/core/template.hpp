#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bgexec::core {

// What `{{ ... }}` expressions can see while a step's fields are rendered.
struct TemplateContext {
  nlohmann::json input;  // the job payload's "input"
  nlohmann::json steps;  // {id: {"output": ..., "stdout": "..."}} for completed steps;
                        // stdout as the worker records it (one trailing newline trimmed);
                        // without one, a non-null output stands in (text, else compact JSON)
  // Resolves secrets.NAME; nullopt (or an empty function) means unavailable.
  std::function<std::optional<std::string>(const std::string&)> secret;
};

// A template that cannot be rendered; the message names the whole
// expression, e.g. `template {{steps.a.output.x}}: step "a" has no output "x"`.
class TemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a render may still produce, in bytes (strings as their text,
// numbers, keys and punctuation roughly as JSON): a template repeated in a
// string or an array copies its value each time, so a payload of 1 MiB
// rendered to gigabytes.  Charged as the value is built, so a render over
// the bound throws before it holds more than one value past it.
struct RenderBudget {
  std::size_t cap = 0;   // the bound
  std::size_t left = 0;  // what is left of it; decreased by each render
  std::string bound;     // the bound as the error names it (empty: "N bytes")
};

// Renders every string inside `value` (recursing into objects and arrays;
// keys are left alone). Supported expressions, whitespace inside the braces
// allowed:
//   input                     input.a.b           input.items.0
//   steps.ID.output           steps.ID.output.x.y steps.ID.output.items.0
//   steps.ID.stdout           (the recorded stdout, as it is)
//   secrets.NAME              (via ctx.secret)
// A string that is exactly one expression takes the value's JSON type; inside
// a larger string, strings are inserted as-is and other values as compact
// JSON. `{{` without a closing `}}` is literal text. Each secret value used is
// appended to *secrets_used (when given) so the caller can mask it.
// Throws TemplateError for an unknown root, a missing step, path or secret,
// and when the rendered value is over what `budget` (when given) has left.
nlohmann::json render(const nlohmann::json& value, const TemplateContext& ctx,
                      std::vector<std::string>* secrets_used = nullptr, RenderBudget* budget = nullptr);

// The step ids referenced by `steps.ID...` expressions anywhere in `value`,
// unique, in order of first appearance. Never throws on malformed templates
// (those are reported by render()).
std::vector<std::string> referenced_steps(const nlohmann::json& value);

// The secret names referenced by `secrets.NAME` expressions in `value`,
// unique, in order of first appearance.
std::vector<std::string> referenced_secrets(const nlohmann::json& value);

}  // namespace bgexec::core
