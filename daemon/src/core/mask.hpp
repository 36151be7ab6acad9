#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace bgexec::core {

// Replaces secret values with "***" before text leaves the worker (logs,
// events, results), so resolved {{secrets.NAME}} values are never persisted.
// One thread at a time, const calls included: the first masking after an
// add() builds the automaton it masks with.
class Masker {
 public:
  // Registers a secret; empty strings and duplicates are ignored. Secrets
  // are kept longest first so a secret containing another is masked whole.
  // The forms a JSON encoder writes it in are registered with it (quote,
  // backslash and control characters escaped; non-ASCII as \uXXXX in lower
  // or upper case hex; '/' as \/; & < > (Go), and = ' (Gson), as \u00XX;
  // " + ` & ' < > as \u00XX in upper-case hex, as .NET's System.Text.Json):
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

  // Every string masked: the secrets and their escaped forms, longest
  // first (for tests that compare mask() with a reference).
  const std::vector<std::string>& forms() const { return secrets_; }

 private:
  // A state of the automaton: a prefix of some secret's form.  State 0 is
  // the empty prefix (the root).
  struct State {
    std::uint32_t depth = 0;  // the prefix's length
    // The longest proper suffix of the prefix that is a state and starts no
    // later than any whole form the prefix holds (a form found, no later
    // one may start); dead if there is none.
    std::uint32_t fail = 0;
    // The form the prefix ends with that starts first (itself or a suffix
    // up its failure links): a state, 0 if none.
    std::uint32_t match = 0;
    std::uint32_t kids = 0;       // its first child: the prefix plus a byte (children are numbered in a row)
    std::uint32_t kid_count = 0;  // 0: no form continues the prefix
  };
  static constexpr std::uint32_t dead = UINT32_MAX;  // no form can be under way

  // Adds the strings of forms not in secrets_ yet (no escaped forms); the
  // automaton is built again, once, before the next masking.
  void insert(std::vector<std::string> forms);

  // Builds the Aho-Corasick automaton of secrets_ for leftmost-longest
  // matching: a trie of every form, each state with its failure link and
  // the form it reports.  Time linear in the forms' total length; once for
  // all the secrets a job adds one by one before it masks anything.
  void build() const;

  // The state after reading byte c in state: the longest suffix of the
  // prefix read, plus c, that is a prefix of some form; dead past a form
  // when there is none that starts at the form's offset or before.
  std::uint32_t next(std::uint32_t state, unsigned char c) const;

  // mask() (whole) or mask_decided() (!whole): the automaton over text,
  // started over after each form masked; appends the masked text of the
  // offsets it decides to out and returns how many there are.
  std::size_t scan(std::string_view text, std::string& out, bool whole) const;

  std::vector<std::string> secrets_;  // longest first, unique, non-empty
  mutable bool built_ = true;          // the automaton is secrets_'s
  // The automaton: masking reads each byte once, and after each form found
  // at most the longest form's length again, whatever the number of forms.
  // Comparing each offset with the forms sharing its first bytes, a hundred
  // secrets holding & < / = ' > and a non-ASCII letter (up to 25 forms
  // each, all sharing their first bytes) took seconds over 8 MiB of pieces
  // of them.
  mutable std::vector<State> states_{State{}};
  mutable std::vector<unsigned char> bytes_{0};  // by state: the last byte of its prefix
  // next() of the root and of the states one byte deep, where the text
  // keeps the automaton most of the time, by state * 256 + byte: rows
  // 0 .. dense_rows_ - 1 (states are numbered breadth first).
  mutable std::vector<std::uint32_t> dense_ = std::vector<std::uint32_t>(256);
  mutable std::size_t dense_rows_ = 1;
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
