#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/template.hpp"

namespace bgexec::core {
namespace {

using nlohmann::json;

TemplateContext make_ctx() {
  TemplateContext ctx;
  ctx.input = json::parse(R"({"day": "2026-11-29", "n": 3, "cfg": {"deep": {"x": true}}, "list": [10, 20]})");
  ctx.steps = json::parse(R"({
    "extract": {"output": {"path": "/tmp/o.csv", "items": [{"name": "a"}, {"name": "b"}], "count": 2},
                "stdout": "ignored\n"},
    "count":   {"output": null, "stdout": "42\n"},
    "crlf":    {"output": "plain", "stdout": "7"},
    "bare":    {}
  })");
  const std::map<std::string, std::string> secrets{{"token", "t0k3n"}, {"db.pass", "pw"}};
  ctx.secret = [secrets](const std::string& name) -> std::optional<std::string> {
    const auto it = secrets.find(name);
    if (it == secrets.end()) return std::nullopt;
    return it->second;
  };
  return ctx;
}

// Returns render()'s TemplateError message, or "" when it succeeds.
std::string error_of(const json& value, const TemplateContext& ctx) {
  try {
    render(value, ctx);
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "";
}

// An error quotes its expression and the path it missed cut: a path of a
// payload's size (hundreds of KB) was quoted whole, in the job's error and
// two of its events.
TEST(Template, ErrorQuotesALongPathCut) {
  const auto ctx = make_ctx();
  std::string path = "input";
  for (int i = 0; i < 20000; ++i) path += ".k" + std::to_string(i);
  const std::string err = error_of(json("{{" + path + "}}"), ctx);
  EXPECT_LT(err.size(), 1000u) << err.size();
  EXPECT_EQ(err.rfind("template {{input.k0.k1.k2", 0), 0u) << err.substr(0, 100);
  EXPECT_NE(err.find("…}}: "), std::string::npos) << err.substr(0, 300);
  // A short one is whole.
  EXPECT_EQ(error_of(json("{{input.nope}}"), ctx), "template {{input.nope}}: input has no field \"nope\"");
}

TEST(Template, PlainValuesUntouched) {
  const auto ctx = make_ctx();
  const json v = {{"a", 1}, {"b", "no templates"}, {"c", nullptr}, {"d", {true, 2.5}}};
  EXPECT_EQ(render(v, ctx), v);
}

TEST(Template, WholeExpressionKeepsType) {
  const auto ctx = make_ctx();
  EXPECT_EQ(render("{{input.n}}", ctx), json(3));
  EXPECT_EQ(render("{{ input.cfg }}", ctx), json::parse(R"({"deep": {"x": true}})"));
  EXPECT_EQ(render("{{input.cfg.deep.x}}", ctx), json(true));
  EXPECT_EQ(render("{{input}}", ctx), ctx.input);
  EXPECT_EQ(render("{{steps.extract.output}}", ctx), ctx.steps["extract"]["output"]);
  EXPECT_EQ(render("{{steps.extract.output.count}}", ctx), json(2));
  EXPECT_EQ(render("{{steps.count.output}}", ctx), json(nullptr));
  EXPECT_EQ(render("{{steps.bare.output}}", ctx), json(nullptr));  // no output recorded
}

TEST(Template, ArrayIndexes) {
  const auto ctx = make_ctx();
  EXPECT_EQ(render("{{steps.extract.output.items.1.name}}", ctx), json("b"));
  EXPECT_EQ(render("{{input.list.0}}", ctx), json(10));
  // Past the end: what is there, not only a missing "field"
  EXPECT_EQ(error_of("{{input.list.2}}", ctx),
            "template {{input.list.2}}: input has no field \"list.2\" (\"list\" is an array of 2 items)");
  EXPECT_NE(error_of("{{input.list.-1}}", ctx).find("list.-1"), std::string::npos);
  EXPECT_NE(error_of("{{input.list.x}}", ctx).find("list.x"), std::string::npos);
}

TEST(Template, EmbeddedExpressions) {
  const auto ctx = make_ctx();
  EXPECT_EQ(render("day={{input.day}} n={{ input.n }}", ctx), json("day=2026-11-29 n=3"));
  EXPECT_EQ(render("cfg {{input.cfg}}", ctx), json(R"(cfg {"deep":{"x":true}})"));
  EXPECT_EQ(render("{{input.n}}{{input.n}}", ctx), json("33"));
  EXPECT_EQ(render(" {{input.n}}", ctx), json(" 3"));  // not exactly one expression
  EXPECT_EQ(render("v={{steps.count.output}}", ctx), json("v=null"));
}

TEST(Template, Stdout) {
  const auto ctx = make_ctx();
  // The worker records stdout with one trailing newline trimmed (job.cpp):
  // the template inserts it as it is, so "42\n\n" printed stays "42\n".
  EXPECT_EQ(render("{{steps.count.stdout}}", ctx), json("42\n"));
  EXPECT_EQ(render("load {{steps.crlf.stdout}} rows?", ctx), json("load 7 rows?"));
  EXPECT_NE(error_of("{{steps.bare.stdout}}", ctx).find("step \"bare\" has no stdout"), std::string::npos);
}

TEST(Template, RecursesIntoContainersButNotKeys) {
  const auto ctx = make_ctx();
  const json v = json::parse(R"({"{{input.day}}": ["{{input.n}}", {"p": "x{{steps.extract.output.path}}"}]})");
  const json expected = json::parse(R"({"{{input.day}}": [3, {"p": "x/tmp/o.csv"}]})");
  EXPECT_EQ(render(v, ctx), expected);
}

TEST(Template, UnclosedBracesAreLiteral) {
  const auto ctx = make_ctx();
  EXPECT_EQ(render("a {{ b", ctx), json("a {{ b"));
  EXPECT_EQ(render("{{input.n}} and {{ open", ctx), json("3 and {{ open"));
  EXPECT_EQ(render("}} {", ctx), json("}} {"));
}

TEST(Template, MissingOutputPathNamesExpression) {
  const auto ctx = make_ctx();
  EXPECT_EQ(error_of("{{steps.extract.output.missing}}", ctx),
            "template {{steps.extract.output.missing}}: step \"extract\" has no output \"missing\"");
  EXPECT_EQ(error_of("{{ steps.extract.output.path.more }}", ctx),
            "template {{steps.extract.output.path.more}}: step \"extract\" has no output \"path.more\"");
}

TEST(Template, MissingStepAndBadExpressions) {
  const auto ctx = make_ctx();
  EXPECT_NE(error_of("{{steps.nope.output}}", ctx).find("template {{steps.nope.output}}: step \"nope\""),
            std::string::npos);
  EXPECT_NE(error_of("{{steps.extract}}", ctx).find("template {{steps.extract}}"), std::string::npos);
  EXPECT_NE(error_of("{{steps.extract.result}}", ctx).find("\"result\""), std::string::npos);
  EXPECT_NE(error_of("{{env.HOME}}", ctx).find("template {{env.HOME}}: unknown root \"env\""),
            std::string::npos);
  EXPECT_NE(error_of("{{}}", ctx).find("empty expression"), std::string::npos);
  EXPECT_NE(error_of("{{input..day}}", ctx).find("empty path segment"), std::string::npos);
  EXPECT_NE(error_of("{{input.nope}}", ctx).find("input has no field \"nope\""), std::string::npos);
  // Errors inside nested containers still surface.
  EXPECT_NE(error_of(json::parse(R"({"a": [{"b": "{{input.zzz}}"}]})"), ctx).find("zzz"), std::string::npos);
}

TEST(Template, NonObjectStepsContext) {
  TemplateContext ctx;
  EXPECT_NE(error_of("{{steps.a.output}}", ctx).find("step \"a\""), std::string::npos);
  EXPECT_NE(error_of("{{input.a}}", ctx).find("input has no field \"a\""), std::string::npos);
  EXPECT_EQ(render("{{input}}", ctx), json(nullptr));
}

TEST(Template, SecretsAreResolvedAndReported) {
  const auto ctx = make_ctx();
  std::vector<std::string> used;
  const json out = render(json::parse(R"({"h": "Bearer {{secrets.token}}", "p": "{{ secrets.db.pass }}"})"),
                          ctx, &used);
  EXPECT_EQ(out["h"], "Bearer t0k3n");
  EXPECT_EQ(out["p"], "pw");
  EXPECT_EQ(used, (std::vector<std::string>{"t0k3n", "pw"}));
  // Without an out-parameter, rendering still works.
  EXPECT_EQ(render("{{secrets.token}}", ctx), json("t0k3n"));
}

TEST(Template, MissingSecret) {
  const auto ctx = make_ctx();
  EXPECT_EQ(error_of("{{secrets.nope}}", ctx), "template {{secrets.nope}}: secret nope is not available");
  TemplateContext no_resolver;
  EXPECT_NE(error_of("{{secrets.token}}", no_resolver).find("secret token is not available"),
            std::string::npos);
  EXPECT_NE(error_of("{{secrets}}", ctx).find("secrets.NAME"), std::string::npos);
}

TEST(Template, ReferencedSteps) {
  const json v = json::parse(R"({
    "with": {"a": "{{steps.extract.output.path}}", "b": ["{{ steps.count.stdout }}", "x{{steps.extract.output}}"]},
    "c": "{{input.day}} {{secrets.token}} {{ unclosed",
    "{{steps.keyonly.output}}": 1
  })");
  const auto ids = referenced_steps(v);
  // Object iteration is by key; compare as a set-like sorted vector.
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()), (std::set<std::string>{"extract", "count"}));
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(referenced_steps(json("{{steps.a.output}} {{steps.b.stdout}} {{steps.a.output}}")),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(referenced_steps(json("{{steps}} plain")).empty());
  EXPECT_EQ(referenced_secrets(v), std::vector<std::string>{"token"});
}


// A budget bounds what a render produces, charged as it is built: a
// template repeated in a string, an array or an object copied its value
// each time (1 MiB of payload rendered to gigabytes on the worker).
TEST(Template, BudgetBoundsRepeats) {
  auto ctx = make_ctx();
  ctx.input["big"] = std::string(1000, 'x');
  std::string spliced;
  for (int i = 0; i < 100; ++i) spliced += "{{input.big}}";
  json lone = json::array();
  for (int i = 0; i < 100; ++i) lone.push_back("{{input.big}}");
  json keyed = json::object();
  for (int i = 0; i < 100; ++i) keyed["k" + std::to_string(i)] = "{{input.big}}";
  for (const json& v : {json(spliced), lone, keyed}) {
    RenderBudget small{50000, 50000, ""};
    try {
      render(v, ctx, nullptr, &small);
      ADD_FAILURE() << "rendered past its budget: " << v.dump().substr(0, 40);
    } catch (const TemplateError& e) {
      EXPECT_EQ(std::string(e.what()), "template {{input.big}}: the rendered value would be over 50000 bytes");
    }
    RenderBudget named{50000, 50000, "the job's bound"};
    try {
      render(v, ctx, nullptr, &named);
    } catch (const TemplateError& e) {
      EXPECT_EQ(std::string(e.what()), "template {{input.big}}: the rendered value would be over the job's bound");
    }
    RenderBudget enough{200000, 200000, ""};
    EXPECT_EQ(render(v, ctx, nullptr, &enough), render(v, ctx));
    EXPECT_GT(200000 - enough.left, 100000u);  // what it holds is charged
    EXPECT_LT(200000 - enough.left, 110000u);
  }
  // literal text counts too, and what is left is shared by later renders
  RenderBudget shared{30, 30, ""};
  EXPECT_EQ(render("0123456789", ctx, nullptr, &shared), json("0123456789"));
  EXPECT_EQ(shared.left, 18u);
  try {
    render("0123456789012345678", ctx, nullptr, &shared);
    ADD_FAILURE() << "rendered past what was left";
  } catch (const TemplateError& e) {
    EXPECT_EQ(std::string(e.what()), "template: the rendered value would be over 30 bytes");
  }
  // a lone template of a structured value is charged its size
  RenderBudget tiny{20, 20, ""};
  try {
    render("{{steps.extract.output}}", ctx, nullptr, &tiny);
    ADD_FAILURE() << "a structured value past the budget";
  } catch (const TemplateError& e) {
    EXPECT_EQ(std::string(e.what()), "template {{steps.extract.output}}: the rendered value would be over 20 bytes");
  }
}

// A step with no stdout recorded (a sql step, an approval's resume input):
// its output stands in, as text or compact JSON, a null one too (an
// approval resumed without input failed its job: `step "gate" has no
// stdout`).
TEST(Template, OutputStandsInForStdout) {
  TemplateContext ctx;
  ctx.steps = json::parse(R"({"q": {"output": [{"a": 1}]}, "gate": {"output": "yes"}, "nap": {"output": null},
                              "bare": {}})");
  EXPECT_EQ(render("{{steps.q.stdout}}", ctx), json(R"([{"a":1}])"));
  EXPECT_EQ(render("ok {{steps.gate.stdout}}", ctx), json("ok yes"));
  EXPECT_EQ(render("[{{steps.nap.stdout}}]", ctx), json("[null]"));
  EXPECT_EQ(render("{{steps.nap.stdout}}", ctx), json("null"));
  EXPECT_NE(error_of("{{steps.bare.stdout}}", ctx).find("step \"bare\" has no stdout"), std::string::npos);
}

// From a mutation test of template.cpp: cases no test above told apart.

// Tabs inside the braces are whitespace, as blanks and newlines are.
TEST(Template, TabsAroundTheExpression) {
  const auto ctx = make_ctx();
  EXPECT_EQ(render("{{\tinput.day\t}}", ctx), json("2026-11-29"));
}

// An index is any run of decimal digits, 9 included.
TEST(Template, IndexNine) {
  TemplateContext ctx;
  ctx.input = json::parse(R"({"a": [0, 1, 2, 3, 4, 5, 6, 7, 8, "nine", 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]})");
  EXPECT_EQ(render("{{input.a.9}}", ctx), json("nine"));
  EXPECT_EQ(render("{{input.a.19}}", ctx), json(19));
}

// A miss in an array says how many items it has, one in the singular.
TEST(Template, MissInAnArrayCountsItsItems) {
  TemplateContext ctx;
  ctx.input = json::parse(R"({"one": [1], "two": [1, 2]})");
  EXPECT_NE(error_of("{{input.one.5}}", ctx).find("(\"one\" is an array of 1 item)"), std::string::npos)
      << error_of("{{input.one.5}}", ctx);
  EXPECT_NE(error_of("{{input.two.5}}", ctx).find("(\"two\" is an array of 2 items)"), std::string::npos)
      << error_of("{{input.two.5}}", ctx);
}

// steps.ID.stdout takes no path, however long.
TEST(Template, StdoutTakesNoPath) {
  const auto ctx = make_ctx();
  EXPECT_NE(error_of("{{steps.count.stdout.x}}", ctx).find("steps.ID.stdout takes no path"), std::string::npos);
  EXPECT_NE(error_of("{{steps.count.stdout.x.y}}", ctx).find("steps.ID.stdout takes no path"), std::string::npos);
}

// Returns render()'s TemplateError message under budget b, or "" when it succeeds.
std::string error_of_budget(const json& value, const TemplateContext& ctx, RenderBudget* b) {
  try {
    render(value, ctx, nullptr, b);
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "";
}

// The budget's bound itself is allowed: a render of exactly what is left
// passes, one byte more does not.  A lone string is charged its text and
// its quotes, spliced text its literal parts before and after.
TEST(Template, BudgetBoundIsInclusive) {
  auto ctx = make_ctx();  // input.day: "2026-11-29", 10 bytes
  RenderBudget exact{12, 12, ""};
  EXPECT_EQ(render("{{input.day}}", ctx, nullptr, &exact), json("2026-11-29"));
  EXPECT_EQ(exact.left, 0u);
  RenderBudget short_one{11, 11, ""};
  EXPECT_NE(error_of_budget("{{input.day}}", ctx, &short_one).find("would be over 11 bytes"), std::string::npos);
  // "on " + day + " ok": 2 (quotes) + 3 + 10 + 3
  RenderBudget spliced{18, 18, ""};
  EXPECT_EQ(render("on {{input.day}} ok", ctx, nullptr, &spliced), json("on 2026-11-29 ok"));
  EXPECT_EQ(spliced.left, 0u);
  RenderBudget spliced_short{17, 17, ""};
  EXPECT_NE(error_of_budget("on {{input.day}} ok", ctx, &spliced_short).find("would be over 17 bytes"),
            std::string::npos);
}

// A steps expression with an empty id names no step.
TEST(Template, ReferencedStepsSkipsAnEmptyId) {
  EXPECT_TRUE(referenced_steps(json("{{steps..output}}")).empty());
  EXPECT_EQ(referenced_steps(json("{{steps..output}} {{steps.a.output}}")), std::vector<std::string>{"a"});
}

}  // namespace
}  // namespace bgexec::core
