#include "config.hpp"

#include "http_url.hpp"
#include "json_input.hpp"
#include "read_capped.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "duration.hpp"

namespace bgexec::core {

namespace {

// How a setting's text or JSON value is interpreted.
enum class Kind { text, queues, prefixes, integer, positive_seconds, nonneg_seconds, boolean, actions, bytes, config };

// One worker setting under its three spellings: flag, variable, file key.
struct Setting {
  std::string_view flag;
  std::string_view env;
  std::string_view key;  // empty: not allowed in the config file
  Kind kind;
  std::string WorkerConfig::*text_member = nullptr;
  double WorkerConfig::*seconds_member = nullptr;
  int WorkerConfig::*int_member = nullptr;  // Kind::integer, in [min, max]
  int min = 0;
  int max = 0;
  double max_s = 0;  // seconds kinds: largest value allowed, 0 for max_duration_s
  double min_s = 0;  // seconds kinds: smallest value allowed, 0 for none
  bool WorkerConfig::*bool_member = nullptr;  // Kind::boolean
};

// The longest any duration setting may be: 100 years, far inside what the
// timers hold (a steady_clock duration counts nanoseconds in 64 bits, 292
// years).  A --poll or --reconcile-interval of 1e10 s overflowed it, and
// the worker claimed or reconciled in a tight loop; a --grace of it ended
// the drain at once.
constexpr double max_duration_s = 3110400000;

const Setting settings[] = {
    {"--db", "BGEXEC_DB", "db", Kind::text, &WorkerConfig::db},
    {"--id", "BGEXEC_ID", "id", Kind::text, &WorkerConfig::id},
    {"--queue", "BGEXEC_QUEUES", "queues", Kind::queues},
    {"--concurrency", "BGEXEC_CONCURRENCY", "concurrency", Kind::integer, nullptr, nullptr,
     &WorkerConfig::concurrency, 1, 1024},
    {"--sql-steps", "BGEXEC_SQL_STEPS", "sql_steps", Kind::integer, nullptr, nullptr, &WorkerConfig::sql_steps,
     1, 1024},
    {"--step-processes", "BGEXEC_STEP_PROCESSES", "step_processes", Kind::integer, nullptr, nullptr,
     &WorkerConfig::step_processes, 1, 1024},
    // At most a day: bgexec.claim and bgexec.heartbeat refuse a longer
    // lease_for.  At least a second: heartbeats renew it every third of it,
    // each allowed a quarter of it to answer (0.001 s: every heartbeat timed
    // out; 1e-7 s: 0 to the server, which refused every claim).
    {"--lease", "BGEXEC_LEASE", "lease", Kind::positive_seconds, nullptr, &WorkerConfig::lease_s, nullptr, 0, 0,
     86400, 1},
    {.flag = "--allow-run", .env = "BGEXEC_ALLOW_RUN", .key = "allow_run", .kind = Kind::boolean,
     .bool_member = &WorkerConfig::allow_run},
    {"--allow-http", "BGEXEC_ALLOW_HTTP", "allow_http", Kind::prefixes},
    {"--http-ca-file", "BGEXEC_HTTP_CA_FILE", "http_ca_file", Kind::text, &WorkerConfig::http_ca_file},
    {.flag = "--exit-when-idle", .env = "BGEXEC_EXIT_WHEN_IDLE", .key = "exit_when_idle", .kind = Kind::boolean,
     .bool_member = &WorkerConfig::exit_when_idle},
    {"--config", "BGEXEC_CONFIG", "", Kind::config},
    {"--action", "BGEXEC_ACTIONS", "actions", Kind::actions},
    {"--grace", "BGEXEC_GRACE", "grace", Kind::nonneg_seconds, nullptr, &WorkerConfig::grace_s},
    {"--snooze-after", "BGEXEC_SNOOZE_AFTER", "snooze_after", Kind::nonneg_seconds, nullptr,
     &WorkerConfig::snooze_after_s},
    {"--secrets-dir", "BGEXEC_SECRETS_DIR", "secrets_dir", Kind::text, &WorkerConfig::secrets_dir},
    // At least a millisecond: each is the period of a loop that queries
    // the database (--poll 0.0000000001 claimed in a busy loop).
    {"--poll", "BGEXEC_POLL", "poll", Kind::positive_seconds, nullptr, &WorkerConfig::poll_s, nullptr, 0, 0, 0,
     0.001},
    {"--reconcile-interval", "BGEXEC_RECONCILE_INTERVAL", "reconcile_interval", Kind::positive_seconds,
     nullptr, &WorkerConfig::reconcile_s, nullptr, 0, 0, 0, 0.001},
    {"--kill-grace", "BGEXEC_KILL_GRACE", "kill_grace", Kind::nonneg_seconds, nullptr,
     &WorkerConfig::kill_grace_s},
    {"--log-cap", "BGEXEC_LOG_CAP", "log_cap", Kind::bytes},
    {"--max-result-bytes", "BGEXEC_MAX_RESULT_BYTES", "max_result_bytes", Kind::bytes},
    {"--finish-batch", "BGEXEC_FINISH_BATCH", "finish_batch", Kind::integer, nullptr, nullptr,
     &WorkerConfig::finish_batch, 1, 1000},
    {"--finish-delay", "BGEXEC_FINISH_DELAY", "finish_delay", Kind::nonneg_seconds, nullptr,
     &WorkerConfig::finish_delay_s},
    {"--claim-backoff", "BGEXEC_CLAIM_BACKOFF", "claim_backoff", Kind::nonneg_seconds, nullptr,
     &WorkerConfig::claim_backoff_s},
};

// Looks a setting up by its flag spelling.
const Setting* find_flag(std::string_view flag) {
  for (const auto& s : settings) {
    if (s.flag == flag) return &s;
  }
  return nullptr;
}

// Looks a setting up by its config-file key.
const Setting* find_key(std::string_view key) {
  for (const auto& s : settings) {
    if (!s.key.empty() && s.key == key) return &s;
  }
  return nullptr;
}

// Strips spaces and tabs from both ends (for comma-separated lists).
std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

// Splits on ',' and trims each item; empty items are errors.
std::vector<std::string> split_list(std::string_view text, const std::string& label) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    std::string item = trim(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (item.empty()) throw ConfigError(label + ": empty item in \"" + std::string(text) + "\"");
    out.push_back(std::move(item));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

// An --allow-http prefix: an http(s) URL without query or fragment, so that
// what it allows is plain (core::http_url_allowed).
std::string checked_prefix(const std::string& text, const std::string& label) {
  std::string error;
  auto url = parse_http_url(text, error);
  if (!url) throw ConfigError(label + ": \"" + text + "\" " + error);
  if (text.find_first_of("?#") != std::string::npos)
    throw ConfigError(label + ": \"" + text + "\" has a query or a fragment (expected http[s]://host[:port][/path])");
  return text;
}

// Parses "name=path"; both sides must be non-empty.
std::pair<std::string, std::string> parse_action(std::string_view text, const std::string& label) {
  const std::size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size()) {
    throw ConfigError(label + ": expected NAME=PATH, got \"" + std::string(text) + "\"");
  }
  return {trim(text.substr(0, eq)), trim(text.substr(eq + 1))};
}

// An action named twice in one source (--action flags, BGEXEC_ACTIONS).
std::string action_twice(const std::string& label, const std::string& name) {
  return label + ": action \"" + name + "\" is given more than once";
}

// Accepts 1/true/yes/on and 0/false/no/off, case-insensitively.
bool parse_bool(std::string_view text, const std::string& label) {
  std::string lower(text);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  if (lower == "1" || lower == "true" || lower == "yes" || lower == "on") return true;
  if (lower == "0" || lower == "false" || lower == "no" || lower == "off") return false;
  throw ConfigError(label + ": expected 1, true, yes or on, or 0, false, no or off (any case), got \"" +
                    std::string(text) + "\"");
}

// Parses a whole string as an unsigned decimal integer.
std::optional<unsigned long long> parse_unsigned(std::string_view text) {
  unsigned long long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// Range checks shared by text and JSON sources.
int checked_integer(std::optional<long long> v, const Setting& s, const std::string& label, const std::string& shown) {
  if (!v || *v < s.min || *v > s.max) {
    throw ConfigError(label + ": expected an integer from " + std::to_string(s.min) + " to " +
                      std::to_string(s.max) + ", got " + shown);
  }
  return static_cast<int>(*v);
}

// Seconds must be finite and > 0 (positive kinds) or >= 0, and at least
// the setting's least, which the message names when it has one (`--lease
// 0` said "greater than 0", where 0.5 is refused too).
double checked_seconds(std::optional<double> v, const Setting& s, const std::string& label, const std::string& shown) {
  if (s.min_s > 0 && !(v && *v >= s.min_s)) {
    throw ConfigError(label + ": expected a duration of at least " + seconds_text(s.min_s) +
                      (s.min_s == 1 ? " second" : " seconds") + ", got " + shown);
  }
  if (s.kind == Kind::positive_seconds) {
    if (!v || !(*v > 0)) throw ConfigError(label + ": expected a duration greater than 0, got " + shown);
  } else if (!v || !(*v >= 0)) {
    throw ConfigError(label + ": expected a duration of 0 or more, got " + shown);
  }
  const double most = s.max_s > 0 ? s.max_s : max_duration_s;
  if (*v > most) {
    throw ConfigError(label + ": expected a duration of at most " + std::to_string(static_cast<long long>(most)) +
                      " seconds, got " + shown);
  }
  return *v;
}

// Sets a seconds setting, remembering where the lease and the kill grace
// came from: their conflict names both sources.
void set_seconds(WorkerConfig& cfg, const Setting& s, double v, const std::string& label) {
  cfg.*(s.seconds_member) = v;
  if (s.seconds_member == &WorkerConfig::lease_s) cfg.lease_source = label;
  if (s.seconds_member == &WorkerConfig::kill_grace_s) cfg.kill_grace_source = label;
}

// A duration from text (a flag, a variable, a file's string): text that is
// no duration at all (a unit parse_seconds lacks, an exponent) is told
// apart from one out of range (0, negative), which checked_seconds names.
double checked_seconds_text(std::string_view text, const Setting& s, const std::string& label) {
  const std::string shown = "\"" + std::string(text) + "\"";
  const std::optional<double> v = parse_seconds(text);
  const bool negative = !v && text.size() > 1 && text[0] == '-' && parse_seconds(text.substr(1));
  if (!v && !negative) {
    throw ConfigError(label + ": " + shown +
                      " is not a duration (expected seconds, such as 30 or 1.5, or a number with a unit: 500ms, "
                      "30s, 5m, 2h)");
  }
  return checked_seconds(v, s, label, shown);
}

// Byte caps must be at least 1.
std::size_t checked_bytes(std::optional<unsigned long long> v, const std::string& label, const std::string& shown) {
  if (!v || *v < 1 || *v > std::numeric_limits<std::size_t>::max()) {
    throw ConfigError(label + ": expected a positive number of bytes, got " + shown);
  }
  return static_cast<std::size_t>(*v);
}

// A bytes setting: --log-cap (>= 1) or --max-result-bytes (1 ..
// max_result_limit).
void set_bytes(WorkerConfig& cfg, const Setting& s, std::optional<unsigned long long> v, const std::string& label,
               const std::string& shown) {
  if (s.key == "max_result_bytes") {
    if (!v || *v < 1 || *v > max_result_limit)
      throw ConfigError(label + ": expected a number of bytes from 1 to " + std::to_string(max_result_limit) +
                        " (under jsonb's 255 MiB), got " + shown);
    cfg.max_result_bytes = static_cast<std::size_t>(*v);
    return;
  }
  cfg.log_cap_bytes = checked_bytes(v, label, shown);
}

// Applies one textual value (from a flag or variable). Lists (queues,
// actions) replace/merge as the source dictates: the caller handles --queue.
void apply_text(WorkerConfig& cfg, const Setting& s, std::string_view value, const std::string& label) {
  const std::string shown = "\"" + std::string(value) + "\"";
  switch (s.kind) {
    case Kind::text:
      cfg.*(s.text_member) = std::string(value);
      if (s.text_member == &WorkerConfig::db) cfg.db_source = label;
      break;
    case Kind::queues:
      cfg.queues = split_list(value, label);
      break;
    case Kind::prefixes:
      cfg.allow_http.clear();
      for (auto& p : split_list(value, label)) cfg.allow_http.push_back(checked_prefix(p, label));
      break;
    case Kind::integer: {
      std::optional<long long> v;
      if (const auto u = parse_unsigned(value); u && *u <= static_cast<unsigned long long>(s.max)) {
        v = static_cast<long long>(*u);
      }
      cfg.*(s.int_member) = checked_integer(v, s, label, shown);
      break;
    }
    case Kind::positive_seconds:
    case Kind::nonneg_seconds:
      set_seconds(cfg, s, checked_seconds_text(value, s, label), label);
      break;
    case Kind::boolean:
      cfg.*(s.bool_member) = parse_bool(value, label);
      break;
    case Kind::actions: {
      // A name twice in one source is refused, as a repeated flag is: of
      // its two paths one would win unnoticed.  (Across sources a name's
      // path is replaced by the stronger one's, as documented.)
      std::set<std::string> named;
      for (const auto& item : split_list(value, label)) {
        auto [name, path] = parse_action(item, label);
        if (!named.insert(name).second) throw ConfigError(action_twice(label, name));
        cfg.actions.insert_or_assign(std::move(name), std::move(path));
      }
      break;
    }
    case Kind::bytes:
      set_bytes(cfg, s, parse_unsigned(value), label, shown);
      break;
    case Kind::config:
      break;
  }
}

// A JSON value as a message shows it: compact, cut to 60 bytes at a
// character's start (a whole "actions" object was echoed).
std::string excerpt(const nlohmann::json& v) {
  std::string text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() <= 60) return text;
  std::size_t cut = 60;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "...";
}

// Applies one config-file entry, insisting on the key's JSON type.
void apply_json(WorkerConfig& cfg, const Setting& s, const nlohmann::json& v, const std::string& label) {
  const auto wrong_type = [&](const char* expected) {
    return ConfigError(label + ": expected " + expected + ", got " + v.dump());
  };
  switch (s.kind) {
    case Kind::text:
      if (!v.is_string()) throw wrong_type("a string");
      cfg.*(s.text_member) = v.get<std::string>();
      if (s.text_member == &WorkerConfig::db) cfg.db_source = label;
      break;
    case Kind::queues: {
      if (!v.is_array() || v.empty()) throw wrong_type("a non-empty array of queue names");
      std::vector<std::string> queues;
      for (const auto& q : v) {
        if (!q.is_string() || q.get_ref<const std::string&>().empty()) {
          throw wrong_type("a non-empty array of queue names");
        }
        queues.push_back(q.get<std::string>());
      }
      cfg.queues = std::move(queues);
      break;
    }
    case Kind::prefixes: {
      if (!v.is_array()) throw wrong_type("an array of URL prefixes");
      cfg.allow_http.clear();
      for (const auto& p : v) {
        if (!p.is_string()) throw wrong_type("an array of URL prefixes");
        cfg.allow_http.push_back(checked_prefix(p.get<std::string>(), label));
      }
      break;
    }
    case Kind::integer: {
      if (!v.is_number_integer()) throw wrong_type("an integer");
      std::optional<long long> n;
      if (v.is_number_unsigned()) {
        const auto u = v.get<unsigned long long>();
        if (u <= static_cast<unsigned long long>(s.max)) n = static_cast<long long>(u);
      } else {
        n = v.get<long long>();
      }
      cfg.*(s.int_member) = checked_integer(n, s, label, v.dump());
      break;
    }
    case Kind::positive_seconds:
    case Kind::nonneg_seconds:
      // A number of seconds, or a string read as the flags and variables are ("30s").
      if (v.is_string()) {
        set_seconds(cfg, s, checked_seconds_text(v.get_ref<const std::string&>(), s, label), label);
        break;
      }
      if (!v.is_number()) throw wrong_type("a number of seconds or a duration string");
      set_seconds(cfg, s, checked_seconds(v.get<double>(), s, label, v.dump()), label);
      break;
    case Kind::boolean:
      if (!v.is_boolean()) throw wrong_type("true or false");
      cfg.*(s.bool_member) = v.get<bool>();
      break;
    case Kind::actions: {
      // name: path, or name: {"path": path, "env": [variable names]}: the
      // only variables the action's steps may set in "env".  A bad entry
      // names its action and field, and shows the value at fault (cut
      // short), not the whole object.
      if (!v.is_object())
        throw ConfigError(label + ": expected an object of name: path or name: {\"path\": path, \"env\": [names]}, got " +
                          excerpt(v));
      for (const auto& [name, entry] : v.items()) {
        if (name.empty()) throw ConfigError(label + ": an action name must not be empty");
        const std::string where = label + ": action " + excerpt(nlohmann::json(name));
        const nlohmann::json* path = &entry;
        if (entry.is_object()) {
          for (const auto& [k, unused] : entry.items())
            if (k != "path" && k != "env")
              throw ConfigError(where + ": unknown field " + excerpt(nlohmann::json(k)) +
                                " (expected \"path\" and \"env\")");
          auto p = entry.find("path");
          if (p == entry.end()) throw ConfigError(where + ": \"path\" is missing");
          path = &*p;
          if (!path->is_string() || path->get_ref<const std::string&>().empty())
            throw ConfigError(where + ": \"path\": expected a non-empty string, got " + excerpt(*path));
          std::vector<std::string> names;
          if (auto e = entry.find("env"); e != entry.end()) {
            if (!e->is_array())
              throw ConfigError(where + ": \"env\": expected an array of variable names, got " + excerpt(*e));
            for (const auto& n : *e) {
              if (!n.is_string() || n.get_ref<const std::string&>().empty() ||
                  n.get_ref<const std::string&>().find_first_of(std::string_view("=\0", 2)) != std::string::npos)
                throw ConfigError(where + ": \"env\": expected variable names, non-empty and without '=', got " +
                                  excerpt(n));
              names.push_back(n.get<std::string>());
            }
            cfg.action_env.insert_or_assign(name, std::move(names));
          }
        } else if (!entry.is_string() || entry.get_ref<const std::string&>().empty()) {
          throw ConfigError(where + ": expected a path (a non-empty string) or {\"path\": path, \"env\": [names]}, got " +
                            excerpt(entry));
        }
        cfg.actions.insert_or_assign(name, path->get<std::string>());
      }
      break;
    }
    case Kind::bytes: {
      std::optional<unsigned long long> n;
      if (v.is_number_unsigned()) n = v.get<unsigned long long>();
      else if (!v.is_number_integer()) throw wrong_type("an integer number of bytes");
      set_bytes(cfg, s, n, label, v.dump());
      break;
    }
    case Kind::config:
      break;
  }
}

// Reads and applies the JSON config file; unknown keys are errors so typos
// never pass silently.
void apply_file(WorkerConfig& cfg, const std::string& path) {
  const std::string where = "config file " + path;
  // A regular file of at most 1 MiB (read_capped), its OS error named:
  // --config /dev/zero grew the worker to gigabytes, and a missing file
  // said only "cannot be read".
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw ConfigError(where + ": " + std::strerror(errno));
  auto file = read_capped(fd, std::size_t{1} << 20, /*regular_only=*/true);
  ::close(fd);
  switch (file.status) {
    case CappedRead::Status::ok:
      break;
    case CappedRead::Status::not_regular:
      throw ConfigError(where + ": not a regular file");
    case CappedRead::Status::too_large:
      throw ConfigError(where + ": over 1 MiB");
    case CappedRead::Status::out_of_memory:
      throw ConfigError(where + ": out of memory");
    case CappedRead::Status::failed:
      throw ConfigError(where + ": " + std::strerror(file.error));
  }
  // A key given twice is refused, as in the CLI's JSON arguments: of its
  // two values one would win unnoticed.
  auto parsed = parse_json_input(file.text, max_json_depth, DuplicateKeys::refuse);
  if (parsed.error == JsonInput::Error::duplicate_key)
    throw ConfigError(where + ": key \"" + parsed.key + "\" is given twice" +
                      (parsed.path.empty() ? "" : " in " + parsed.path));
  if (parsed.error == JsonInput::Error::too_deep)
    throw ConfigError(where + ": JSON nested deeper than " + std::to_string(max_json_depth) + " levels");
  // The parser's message names the place (line and column) and what it
  // found there, as the CLI's JSON arguments and the gateway's bodies do.
  if (!parsed) throw ConfigError(where + ": not valid JSON: " + parsed.message);
  nlohmann::json doc = std::move(parsed.value);
  if (!doc.is_object()) throw ConfigError(where + ": must be a JSON object");
  for (const auto& [key, value] : doc.items()) {
    const Setting* s = find_key(key);
    if (s == nullptr) throw ConfigError(where + ": unknown key \"" + key + "\"");
    apply_json(cfg, *s, value, where + ": key \"" + key + "\"");
  }
}

// One flag occurrence from the command line, validated for existence.
struct FlagValue {
  const Setting* setting;
  std::string value;
};

// Splits the command line into known flags with their values.  Only
// --queue and --action may be given more than once (their values add up);
// of two values of any other flag one would win unnoticed (--lease 5
// --lease 60 ran with 60), so a second is refused, as the client commands
// refuse a repeated option, in "--flag value" and "--flag=value" alike.
std::vector<FlagValue> scan_flags(const std::vector<std::string>& args) {
  std::vector<FlagValue> out;
  std::set<const Setting*> seen;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") continue;
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      throw ConfigError("unexpected argument \"" + arg + "\"");
    }
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const Setting* s = find_flag(name);
    if (s == nullptr) throw ConfigError("unknown flag " + name);
    if (s->kind != Kind::queues && s->kind != Kind::actions && s->kind != Kind::prefixes && !seen.insert(s).second)
      throw ConfigError(name + " is given more than once");
    if (s->kind == Kind::boolean) {
      out.push_back({s, eq == std::string::npos ? "true" : arg.substr(eq + 1)});
      continue;
    }
    if (eq != std::string::npos) {
      out.push_back({s, arg.substr(eq + 1)});
    } else if (i + 1 < args.size()) {
      out.push_back({s, args[++i]});
    } else {
      throw ConfigError(name + " requires a value");
    }
  }
  return out;
}

// An environment variable's value, treating empty as unset.
std::optional<std::string> env_value(const std::map<std::string, std::string>& env, std::string_view name) {
  const auto it = env.find(std::string(name));
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// Whether `name` is a value-taking option according to the lookup map.
std::optional<std::string> match_option(const std::string& name, const std::set<std::string>& names) {
  for (const auto& n : names) {
    if (n == name) return n;
    if (!n.empty() && n[0] != '-' && (name == "--" + n || (n.size() == 1 && name == "-" + n))) return n;
  }
  return std::nullopt;
}

}  // namespace

// Layers sources from weakest to strongest: defaults (the struct), file,
// environment, flags. Flags are scanned first so an unknown flag is reported
// before any file is read.
WorkerConfig parse_worker_config(const std::vector<std::string>& args,
                                 const std::map<std::string, std::string>& env) {
  const std::vector<FlagValue> flags = scan_flags(args);
  WorkerConfig cfg;
  // Unset (negative) until a source sets it: the default depends on the lease.
  cfg.kill_grace_s = -1;

  std::optional<std::string> config_path = env_value(env, "BGEXEC_CONFIG");
  for (const auto& f : flags) {
    if (f.setting->kind == Kind::config) {
      if (f.value.empty()) throw ConfigError("--config requires a file name");
      config_path = f.value;
    }
  }
  if (config_path) apply_file(cfg, *config_path);

  for (const auto& s : settings) {
    if (s.kind == Kind::config) continue;
    if (const auto v = env_value(env, s.env)) apply_text(cfg, s, *v, std::string(s.env));
  }

  std::vector<std::string> flag_queues, flag_prefixes;
  std::set<std::string> flag_actions;
  for (const auto& f : flags) {
    const std::string label(f.setting->flag);
    if (f.setting->kind == Kind::queues) {
      for (auto& q : split_list(f.value, label)) flag_queues.push_back(std::move(q));
    } else if (f.setting->kind == Kind::prefixes) {
      // One prefix per flag, whole: a URL may hold a comma.
      flag_prefixes.push_back(checked_prefix(f.value, label));
    } else if (f.setting->kind == Kind::actions) {
      auto [name, path] = parse_action(f.value, label);
      if (!flag_actions.insert(name).second) throw ConfigError(action_twice(label, name));
      cfg.actions.insert_or_assign(std::move(name), std::move(path));
    } else {
      apply_text(cfg, *f.setting, f.value, label);
    }
  }
  if (!flag_queues.empty()) cfg.queues = std::move(flag_queues);
  if (!flag_prefixes.empty()) cfg.allow_http = std::move(flag_prefixes);
  if (cfg.sql_steps == 0) cfg.sql_steps = cfg.concurrency;
  // Left unset, the kill grace is its default cut to a sixth of a short
  // lease (half the third the check below allows), so any valid lease works
  // alone; only one the user set can conflict with the lease.
  if (cfg.kill_grace_s < 0) cfg.kill_grace_s = std::min(WorkerConfig{}.kill_grace_s, cfg.lease_s / 6);
  // A job whose lease cannot be renewed is abandoned a margin before it
  // expires, and its processes must be dead by then: TERM, then KILL after
  // the kill grace (Worker::lease_guard, at most a third of the lease early).
  // Both values' sources are named, as every other setting's error names
  // its own (the config keys were named when the values came from flags).
  if (cfg.kill_grace_s >= cfg.lease_s / 3) {
    throw ConfigError(cfg.kill_grace_source + ": " + seconds_text(cfg.kill_grace_s) +
                      " s must be less than a third of the lease (" + seconds_text(cfg.lease_s) + " s, " +
                      (cfg.lease_source.empty() ? "the default" : "from " + cfg.lease_source) + ")");
  }
  return cfg;
}

// Skips the value of value-taking flags so `--id --help` is not a help
// request; stops at "--".
bool help_requested(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return false;
    if (arg == "-h" || arg == "--help") return true;
    const Setting* s = find_flag(arg);
    if (s != nullptr && s->kind != Kind::boolean) ++i;
  }
  return false;
}

// Kept next to the settings table so every flag, variable and default is
// documented in one place.
std::string worker_usage() {
  return R"(usage: bgexec worker [FLAGS]

Claims jobs from PostgreSQL and runs them. Precedence: flags > environment >
config file > defaults. Every flag accepts both "--flag value" and
"--flag=value"; only --queue, --action and --allow-http may be given more
than once.
Durations are seconds ("30", "1.5") or take a unit ("500ms", "30s", "5m",
"2h"); in the config file, a number of seconds or such a string.

  --db CONNINFO              libpq connection string, passed verbatim (PG*
                             variables and service= work). Env BGEXEC_DB.
                             Defaults to "" (libpq defaults / PG* env).
  --id NAME                  Worker id. Env BGEXEC_ID. Defaults to host:pid.
  --queue Q                  Queue to claim from; repeatable or comma-separated;
                             replaces env/file queues. Env BGEXEC_QUEUES
                             (comma-separated). Defaults to "default".
  --concurrency N            Jobs run at once, 1..1024. Env BGEXEC_CONCURRENCY.
                             Defaults to 10.
  --sql-steps N              "sql" steps run at once, each on its own
                             connection, 1..1024; more wait for one to end.
                             Env BGEXEC_SQL_STEPS. Defaults to --concurrency.
  --step-processes N         "action" and "run" step processes at once,
                             1..1024; more wait for one to end (their
                             timeout counting), in the order they asked.
                             Env BGEXEC_STEP_PROCESSES. Defaults to what
                             the open-file limit holds beside the worker's
                             connections and sql steps (3 per process), at
                             most 1024.
  --lease SECONDS            Lease length, 1 to 86400 (a day); heartbeats
                             renew it.
                             Env BGEXEC_LEASE. Defaults to 30.
  --allow-run                Permit "run" steps (arbitrary argv), and an
                             action step's env setting any variable for an
                             action with no env list (without it: none).
                             Env BGEXEC_ALLOW_RUN (1/true/yes/on,
                             0/false/no/off). Defaults to off.
  --allow-http PREFIX        Permit "http" steps to URLs under PREFIX
                             (http[s]://host[:port][/path], matched parsed:
                             same scheme, host and port, path at a '/'
                             boundary);
                             repeatable; replaces env/file prefixes. The
                             worker's host makes the requests, so this is its
                             SSRF allowlist. Env BGEXEC_ALLOW_HTTP
                             (comma-separated). Defaults to none (http steps
                             refused).
  --http-ca-file FILE        PEM CA certificates an https step's server may
                             chain to, besides the system's (a private CA).
                             Env BGEXEC_HTTP_CA_FILE. Defaults to none.
  --exit-when-idle           Once it holds no job and a claim finds none due
                             in its queues, drain and exit 0 (tests, batch
                             runs). Env BGEXEC_EXIT_WHEN_IDLE (1/true/yes/on,
                             0/false/no/off). Defaults to off.
  --config FILE              JSON config file with keys db, id, queues,
                             concurrency, sql_steps, step_processes, lease,
                             allow_run, allow_http, http_ca_file,
                             exit_when_idle,
                             actions, grace, snooze_after,
                             secrets_dir, poll, reconcile_interval, kill_grace,
                             log_cap, max_result_bytes, finish_batch, finish_delay,
                             claim_backoff.
                             Env BGEXEC_CONFIG. Defaults to none.
  --action NAME=PATH         Executable run for action NAME; repeatable (each
                             name once), merged over env/file.
                             Env BGEXEC_ACTIONS (name=path,name=path).
                             Defaults to none.
                             In the config file, an action may be
                             {"path": PATH, "env": [NAMES]}: its steps' env
                             may set those variables only.
  --grace SECONDS            Drain time after SIGTERM, SIGINT or SIGHUP, >= 0.
                             Env BGEXEC_GRACE. Defaults to 30.
  --snooze-after SECONDS     A job whose running steps are all sleeps with
                             more than this left goes back to the queue
                             until its wake-up, holding no slot; 0: only
                             at a drain. Env BGEXEC_SNOOZE_AFTER.
                             Defaults to 0.
  --secrets-dir DIR          Directory holding one file per secret
                             ({{secrets.NAME}}). Env BGEXEC_SECRETS_DIR.
                             Defaults to none.
  --poll SECONDS             Poll interval when no NOTIFY arrives, >= 0.001.
                             Env BGEXEC_POLL. Defaults to 1.
  --reconcile-interval SECONDS
                             How often reconcile() runs, >= 0.001.
                             Env BGEXEC_RECONCILE_INTERVAL. Defaults to 5.
  --kill-grace SECONDS       Delay between TERM and KILL for step processes,
                             >= 0 and less than a third of the lease.
                             Env BGEXEC_KILL_GRACE. Defaults to 0.5.
                             (With a lease under 3 s, a sixth of the lease.)
  --log-cap BYTES            Cap on output captured per run of a job, >= 1.
                             Env BGEXEC_LOG_CAP. Defaults to 1048576 (1 MiB).
  --max-result-bytes BYTES   Most a completed job's result (its sink steps'
                             outputs) may be as JSON text, 1..256000000;
                             past it the job fails (54000), not retried.
                             Env BGEXEC_MAX_RESULT_BYTES. Defaults to
                             67108864 (64 MiB).
  --finish-batch N           Most finishes sent in one finish_many call (one
                             commit), 1..1000. Env BGEXEC_FINISH_BATCH.
                             Defaults to 64.
  --finish-delay SECONDS     How long the first finish of a batch waits for
                             more to join it, >= 0 (0: send at once).
                             Env BGEXEC_FINISH_DELAY. Defaults to 0.002.
  --claim-backoff SECONDS    Most a claim woken by NOTIFY waits after such
                             claims found nothing (other workers took the
                             jobs): 1 ms after the first, doubling up to this
                             while they keep finding nothing; >= 0 (0: claim
                             on every NOTIFY). Env BGEXEC_CLAIM_BACKOFF.
                             Defaults to 0.05.
  -h, --help                 Show this help.

SECONDS may have a fraction (0.5); every one is at most 3110400000 (100 years).
Env BGEXEC_LOG_LEVEL (debug, info, warn, error; any case) sets log verbosity;
any other value is an error. Defaults to info.
)";
}

// Single pass; options match by the spelling the caller registered.
ParsedArgs parse_args(const std::vector<std::string>& args, const std::set<std::string>& value_options,
                      const std::set<std::string>& bool_flags) {
  ParsedArgs out;
  bool only_positional = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (only_positional) {
      out.positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    const bool looks_numeric = arg.size() > 1 && arg[0] == '-' &&
                               ((arg[1] >= '0' && arg[1] <= '9') || arg[1] == '.');
    if (arg.empty() || arg[0] != '-' || arg == "-" || looks_numeric) {
      out.positional.push_back(arg);
      continue;
    }
    const std::size_t eq = arg.rfind("--", 0) == 0 ? arg.find('=') : std::string::npos;
    const std::string name = arg.substr(0, eq);
    if (const auto key = match_option(name, value_options)) {
      if (eq != std::string::npos) {
        out.options[*key].push_back(arg.substr(eq + 1));
      } else if (i + 1 < args.size()) {
        out.options[*key].push_back(args[++i]);
      } else {
        throw ConfigError("option " + name + " requires a value");
      }
    } else if (const auto flag = match_option(name, bool_flags)) {
      if (eq != std::string::npos) throw ConfigError("option " + name + " takes no value");
      out.flags.insert(*flag);
    } else {
      throw UnknownOption(name);
    }
  }
  return out;
}

}  // namespace bgexec::core
