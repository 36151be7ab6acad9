#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace bgexec::core {

// Replaces secret values with "***" before text leaves the worker (logs,
// events, results), so resolved {{secrets.NAME}} values are never persisted.
class Masker {
 public:
  // Registers a secret; empty strings and duplicates are ignored. Secrets
  // are kept longest first so a secret containing another is masked whole.
  void add(std::string secret);

  // Returns text with every occurrence of every secret replaced by "***",
  // scanning left to right and preferring the longest secret at each offset.
  std::string mask(std::string_view text) const;

  // Masks every string in a JSON value recursively, object keys included.
  // A number or boolean whose text contains a secret becomes the masked
  // string, so a numeric secret (a PIN, an account number) cannot leak.
  nlohmann::json mask_json(const nlohmann::json& value) const;

  // True when no secret has been registered (mask() is then the identity).
  bool empty() const;

 private:
  std::vector<std::string> secrets_;  // longest first, unique, non-empty
};

// Turns arbitrary chunks read from a child's stdout/stderr into whole lines,
// so a secret split across two reads is reassembled before per-line masking.
class LineSplitter {
 public:
  static constexpr std::size_t default_max_line = 64 * 1024;
  static constexpr std::string_view truncation_marker = "\u2026[truncated]";

  // max_line caps the bytes kept of one line (at least 1); the rest of an
  // over-long line is discarded up to its '\n' and the kept part is marked.
  explicit LineSplitter(std::size_t max_line = default_max_line);

  // Consumes a chunk and returns the lines it completed, without '\n' (and
  // without a '\r' right before it).
  std::vector<std::string> feed(std::string_view chunk);

  // Returns the unterminated remainder (empty if none) and resets, for EOF.
  std::string flush();

 private:
  // Appends `line` to out after stripping a trailing '\r'.
  static void emit(std::vector<std::string>& out, std::string line);

  std::size_t max_line_;
  std::string buffer_;
  bool discarding_ = false;  // inside an over-long line already emitted
};

}  // namespace bgexec::core
