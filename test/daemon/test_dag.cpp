#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dag.hpp"

namespace bgexec::core {
namespace {

using nlohmann::json;
using Ids = std::vector<std::string>;

// The DESIGN.md example, with an extra independent branch.
json sample() {
  return json::parse(R"([
    {"id": "extract", "action": "export-orders"},
    {"id": "count", "needs": ["extract"], "run": ["wc"]},
    {"id": "side", "sleep": 1},
    {"id": "gate", "needs": ["count"], "approval": {}},
    {"id": "load", "needs": ["gate", "extract"], "sql": "select 1"}
  ])");
}

// Returns the DagError message, or "" if none was thrown.
std::string error_of(const json& steps) {
  try {
    Dag::from_steps(steps);
  } catch (const DagError& e) {
    return e.what();
  }
  return "";
}

TEST(Dag, BuildsInDefinitionOrder) {
  const Dag d = Dag::from_steps(sample());
  EXPECT_EQ(d.ids(), (Ids{"extract", "count", "side", "gate", "load"}));
  EXPECT_EQ(d.size(), 5u);
  EXPECT_EQ(d.step("count")["run"], json({"wc"}));
  EXPECT_EQ(d.needs("load"), (Ids{"gate", "extract"}));
  EXPECT_TRUE(d.needs("extract").empty());
  EXPECT_TRUE(d.contains("gate"));
  EXPECT_FALSE(d.contains("nope"));
  EXPECT_THROW(d.step("nope"), DagError);
  EXPECT_THROW(d.needs("nope"), DagError);
}

TEST(Dag, ReadyProgression) {
  const Dag d = Dag::from_steps(sample());
  EXPECT_EQ(d.ready({}, {}), (Ids{"extract", "side"}));
  EXPECT_EQ(d.ready({}, {"extract"}), (Ids{"side"}));
  EXPECT_EQ(d.ready({"extract"}, {"side"}), (Ids{"count"}));
  EXPECT_EQ(d.ready({"extract", "count"}, {}), (Ids{"side", "gate"}));
  // load needs gate AND extract.
  EXPECT_EQ(d.ready({"gate", "count", "side"}, {}), (Ids{"extract"}));
  EXPECT_EQ(d.ready({"extract", "count", "side", "gate"}, {}), (Ids{"load"}));
  EXPECT_TRUE(d.ready({"extract", "count", "side", "gate", "load"}, {}).empty());
}

TEST(Dag, Sinks) {
  EXPECT_EQ(Dag::from_steps(sample()).sinks(), (Ids{"side", "load"}));
  const Dag diamond = Dag::from_steps(json::parse(R"([
    {"id": "a"}, {"id": "b", "needs": ["a"]}, {"id": "c", "needs": ["a"]}, {"id": "d"}
  ])"));
  EXPECT_EQ(diamond.sinks(), (Ids{"b", "c", "d"}));
}

TEST(Dag, ForwardReferenceAllowed) {
  const Dag d = Dag::from_steps(json::parse(R"([{"id": "b", "needs": ["a"]}, {"id": "a"}])"));
  EXPECT_EQ(d.ready({}, {}), (Ids{"a"}));
  EXPECT_EQ(d.sinks(), (Ids{"b"}));
}

TEST(Dag, DuplicateNeedsAreCollapsed) {
  const Dag d = Dag::from_steps(json::parse(R"([{"id": "a"}, {"id": "b", "needs": ["a", "a"]}])"));
  EXPECT_EQ(d.needs("b"), (Ids{"a"}));
}

TEST(Dag, RejectsBadShapes) {
  EXPECT_NE(error_of(json::object()).find("must be an array"), std::string::npos);
  EXPECT_NE(error_of(json::array()).find("no steps"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"([1])")).find("step #1 must be an object"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"([{"id": "a"}, {"name": "x"}])")).find("step #2"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"([{"id": 5}])")).find("\"id\""), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"([{"id": ""}])")).find("step #1"), std::string::npos);
}

TEST(Dag, RejectsDuplicateIds) {
  EXPECT_NE(error_of(json::parse(R"([{"id": "a"}, {"id": "a"}])")).find("duplicate step id \"a\""),
            std::string::npos);
}

TEST(Dag, RejectsBadNeeds) {
  EXPECT_NE(error_of(json::parse(R"([{"id": "a", "needs": "b"}])")).find("step \"a\""), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"([{"id": "a", "needs": [1]}])")).find("step \"a\""), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"([{"id": "a", "needs": ["zz"]}])")).find("unknown step \"zz\""),
            std::string::npos);
  EXPECT_NE(error_of(json::parse(R"([{"id": "a", "needs": ["a"]}])")).find("step \"a\" needs itself"),
            std::string::npos);
}

TEST(Dag, RejectsCycles) {
  const std::string msg = error_of(json::parse(R"([
    {"id": "start"},
    {"id": "a", "needs": ["start", "c"]},
    {"id": "b", "needs": ["a"]},
    {"id": "c", "needs": ["b"]}
  ])"));
  EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a -> c -> b -> a"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("start"), std::string::npos) << msg;  // not on the cycle
}

TEST(Dag, DeepChainDoesNotRecurse) {
  json steps = json::array();
  constexpr int n = 100000;
  for (int i = 0; i < n; ++i) {
    json s = {{"id", "s" + std::to_string(i)}};
    if (i > 0) s["needs"] = {"s" + std::to_string(i - 1)};
    steps.push_back(std::move(s));
  }
  const Dag d = Dag::from_steps(steps);
  EXPECT_EQ(d.sinks(), Ids{"s" + std::to_string(n - 1)});
  EXPECT_EQ(d.ready({}, {}), Ids{"s0"});
}

// From a mutation test of dag.cpp: a step on the search's path that leads
// into the cycle is no part of it, and is not named.
TEST(Dag, CycleReachedThroughAnotherStepNamesTheCycleOnly) {
  const std::string msg = error_of(json::parse(R"([
    {"id": "entry", "needs": ["a"]},
    {"id": "a", "needs": ["c"]},
    {"id": "b", "needs": ["a"]},
    {"id": "c", "needs": ["b"]}
  ])"));
  EXPECT_EQ(msg, "step \"a\" is part of a cycle: a -> c -> b -> a");
}

}  // namespace
}  // namespace bgexec::core
