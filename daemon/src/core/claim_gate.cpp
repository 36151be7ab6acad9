// Whether the worker may claim (see claim_gate.hpp).
#include "core/claim_gate.hpp"

namespace bgexec::core {

ClaimGate::Change ClaimGate::down(const std::string& which, const std::string& error) {
  return down_.emplace(which, error).second ? Change::unavailable : Change::none;
}

ClaimGate::Change ClaimGate::up(const std::string& which) {
  if (down_.erase(which) == 0) return Change::none;
  return down_.empty() ? Change::reopened : Change::none;
}

}  // namespace bgexec::core
