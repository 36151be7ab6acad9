#include "dag.hpp"

#include <algorithm>

namespace bgexec::core {

namespace {

// Names a step by its position when it has no usable id yet.
std::string step_label(std::size_t pos) { return "step #" + std::to_string(pos + 1); }

}  // namespace

// Validates shape, ids and needs first, then detects cycles with an
// iterative three-colour DFS (no recursion: a hostile payload cannot blow
// the stack) and reports the cycle as "a -> b -> a".
Dag Dag::from_steps(const nlohmann::json& steps) {
  if (!steps.is_array()) throw DagError("workflow steps must be an array");
  if (steps.empty()) throw DagError("workflow has no steps");

  Dag dag;
  for (std::size_t pos = 0; pos < steps.size(); ++pos) {
    const nlohmann::json& s = steps[pos];
    if (!s.is_object()) throw DagError(step_label(pos) + " must be an object");
    const auto id_it = s.find("id");
    if (id_it == s.end() || !id_it->is_string() || id_it->get_ref<const std::string&>().empty()) {
      throw DagError(step_label(pos) + " must have a non-empty string \"id\"");
    }
    const std::string& id = id_it->get_ref<const std::string&>();
    if (dag.index_.count(id) != 0) throw DagError("duplicate step id \"" + id + "\"");
    dag.index_.emplace(id, pos);
    dag.ids_.push_back(id);
    dag.steps_.push_back(s);
  }

  for (std::size_t pos = 0; pos < steps.size(); ++pos) {
    const std::string& id = dag.ids_[pos];
    std::vector<std::string> deps;
    const auto needs_it = steps[pos].find("needs");
    if (needs_it != steps[pos].end() && !needs_it->is_null()) {
      if (!needs_it->is_array()) throw DagError("step \"" + id + "\": \"needs\" must be an array");
      for (const auto& n : *needs_it) {
        if (!n.is_string()) throw DagError("step \"" + id + "\": \"needs\" must contain strings");
        const std::string& dep = n.get_ref<const std::string&>();
        if (dep == id) throw DagError("step \"" + id + "\" needs itself");
        if (dag.index_.count(dep) == 0) {
          throw DagError("step \"" + id + "\" needs unknown step \"" + dep + "\"");
        }
        if (std::find(deps.begin(), deps.end(), dep) == deps.end()) deps.push_back(dep);
      }
    }
    dag.needs_.push_back(std::move(deps));
  }

  enum : char { white, grey, black };
  std::vector<char> colour(dag.ids_.size(), white);
  for (std::size_t start = 0; start < dag.ids_.size(); ++start) {
    if (colour[start] != white) continue;
    // Stack of (node, next dependency to visit); the grey nodes on it form
    // the current path, which is the cycle when a grey node is met again.
    std::vector<std::pair<std::size_t, std::size_t>> stack{{start, 0}};
    colour[start] = grey;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next == dag.needs_[node].size()) {
        colour[node] = black;
        stack.pop_back();
        continue;
      }
      const std::size_t dep = dag.index_.at(dag.needs_[node][next++]);
      if (colour[dep] == grey) {
        std::string path;
        bool on_cycle = false;
        for (const auto& frame : stack) {
          if (frame.first == dep) on_cycle = true;
          if (on_cycle) path += dag.ids_[frame.first] + " -> ";
        }
        path += dag.ids_[dep];
        throw DagError("step \"" + dag.ids_[dep] + "\" is part of a cycle: " + path);
      }
      if (colour[dep] == white) {
        colour[dep] = grey;
        stack.emplace_back(dep, 0);
      }
    }
  }
  return dag;
}

// Definition order, as submitted.
const std::vector<std::string>& Dag::ids() const { return ids_; }

// Looks the step up through the id index.
const nlohmann::json& Dag::step(const std::string& id) const { return steps_[index_of(id)]; }

// Linear scan in definition order; a step is ready when every need is done.
std::vector<std::string> Dag::ready(const std::set<std::string>& done,
                                    const std::set<std::string>& running) const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < ids_.size(); ++i) {
    if (done.count(ids_[i]) != 0 || running.count(ids_[i]) != 0) continue;
    const auto& deps = needs_[i];
    if (std::all_of(deps.begin(), deps.end(), [&](const std::string& d) { return done.count(d) != 0; })) {
      out.push_back(ids_[i]);
    }
  }
  return out;
}

// Marks every step that appears in someone's needs, returns the rest.
std::vector<std::string> Dag::sinks() const {
  std::vector<bool> needed(ids_.size(), false);
  for (const auto& deps : needs_) {
    for (const auto& d : deps) needed[index_.at(d)] = true;
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < ids_.size(); ++i) {
    if (!needed[i]) out.push_back(ids_[i]);
  }
  return out;
}

// Copy of the validated needs list.
std::vector<std::string> Dag::needs(const std::string& id) const { return needs_[index_of(id)]; }

// Membership test without throwing.
bool Dag::contains(const std::string& id) const { return index_.count(id) != 0; }

// Step count.
std::size_t Dag::size() const { return ids_.size(); }

// Shared lookup so step() and needs() report unknown ids the same way.
std::size_t Dag::index_of(const std::string& id) const {
  const auto it = index_.find(id);
  if (it == index_.end()) throw DagError("unknown step \"" + id + "\"");
  return it->second;
}

}  // namespace bgexec::core
