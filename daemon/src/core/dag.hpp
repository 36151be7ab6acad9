#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bgexec::core {

// A workflow's steps are malformed; the message names the offending step.
class DagError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The validated dependency graph of a workflow's steps. Immutable once built.
class Dag {
 public:
  // Builds the graph from the payload's "steps" array. Validates defensively
  // (the database validates at submit, but the worker must never crash on bad
  // data): a non-empty array of objects, each with a unique non-empty string
  // "id", an optional "needs" array of strings naming other existing steps,
  // and no cycles. Throws DagError otherwise.
  static Dag from_steps(const nlohmann::json& steps);

  // Step ids in definition order.
  const std::vector<std::string>& ids() const;

  // The step's JSON definition; throws DagError for an unknown id.
  const nlohmann::json& step(const std::string& id) const;

  // Steps that are neither done nor running and whose needs are all done,
  // in definition order: what may start now.
  std::vector<std::string> ready(const std::set<std::string>& done,
                                 const std::set<std::string>& running) const;

  // Steps no other step needs, in definition order (their outputs form the
  // workflow's result).
  std::vector<std::string> sinks() const;

  // The step's direct dependencies (deduplicated, as written); throws
  // DagError for an unknown id.
  std::vector<std::string> needs(const std::string& id) const;

  // Whether a step with this id exists.
  bool contains(const std::string& id) const;

  // Number of steps.
  std::size_t size() const;

 private:
  Dag() = default;

  // Index of id in ids_; throws DagError for an unknown id.
  std::size_t index_of(const std::string& id) const;

  std::vector<std::string> ids_;
  std::vector<nlohmann::json> steps_;
  std::vector<std::vector<std::string>> needs_;
  std::map<std::string, std::size_t> index_;
};

}  // namespace bgexec::core
