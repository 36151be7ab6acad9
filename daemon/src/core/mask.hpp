#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
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
  // The forms a JSON encoder writes it in are registered with it (quote,
  // backslash and control characters escaped; non-ASCII as \uXXXX in lower
  // or upper case hex; '/' as \/; & < > (Go), and = ' (Gson), as \u00XX):
  // a step printing JSON on stdout or stderr writes those, and they are
  // stored as the step's captured stdout or log lines.
  void add(std::string secret);

  // Returns text with every occurrence of every secret replaced by "***",
  // scanning left to right and preferring the longest secret at each offset.
  std::string mask(std::string_view text) const;

  // Masks every string in a JSON value recursively, object keys included.
  // A number or boolean whose text contains a secret becomes the masked
  // string, so a numeric secret (a PIN, an account number) cannot leak.
  nlohmann::json mask_json(const nlohmann::json& value) const;
  // The same, in place: no copy of a value that may be a step's 16 MiB of
  // rows (each copy of them as nlohmann values is hundreds of MB).
  void mask_json_in_place(nlohmann::json& value) const;

  // True when no secret has been registered (mask() is then the identity).
  bool empty() const;

  // Masks the longest prefix of text that further input cannot change,
  // appending the result to out, and returns its length in text: the rest
  // (shorter than the longest secret) is a proper prefix of a secret and
  // waits for more input.  For StreamMasker.
  std::size_t mask_decided(std::string_view text, std::string& out) const;

 private:
  // Adds the strings of forms not in secrets_ yet (no escaped forms).
  void insert(std::vector<std::string> forms);

  // Whether a secret may start at text[i]: its first byte, and its first
  // two (a one-byte secret matching any second).  Most offsets of most
  // text are passed over here.
  bool may_start(std::string_view text, std::size_t i) const;

  std::vector<std::string> secrets_;  // longest first, unique, non-empty
  std::array<bool, 256> starts_{};     // bytes some secret starts with
  // secrets_'s indexes by first byte, longest first: an offset is compared
  // with the secrets that start with its byte, not with every secret (a
  // hundred secrets against 15 MiB of hex output held the worker 28 s).
  std::array<std::vector<std::uint32_t>, 256> by_first_{};
  std::array<std::uint64_t, 65536 / 64> pairs_{};  // first two bytes some secret may start with
};

// Masks a stream fed in chunks exactly as Masker::mask masks the whole of
// it, so a secret split across reads, or across lines (a PEM key, a
// multi-line token), is masked before the stream is cut into lines.  Holds
// back only a tail that may still become a secret (shorter than the longest
// one); the masker may gain secrets between feeds.
class StreamMasker {
 public:
  explicit StreamMasker(const Masker& masker) : masker_(masker) {}

  // Consumes a chunk; returns the masked text that is decided so far.
  std::string feed(std::string_view chunk);

  // Returns the masked held-back tail and resets, for EOF.
  std::string flush();

 private:
  const Masker& masker_;
  std::string held_;
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
