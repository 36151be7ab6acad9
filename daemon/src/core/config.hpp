#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace bgexec::core {

// Settings of `bgexec worker`. Member defaults are the documented defaults.
struct WorkerConfig {
  std::string db;                               // libpq conninfo, passed verbatim ("" = PG* env)
  std::string db_source;                        // where db came from, for messages ("--db", ...; "" = unset)
  std::string id;                               // worker id; "" = caller fills host:pid
  std::vector<std::string> queues{"default"};   // queues to claim from
  int concurrency = 10;                         // job slots, 1..1024
  int sql_steps = 0;                            // sql step sessions at once, 1..1024; 0 = concurrency
  int step_processes = 0;                       // action/run step processes at once, 1..1024; 0 = from the
                                                // open-file limit at start (core::default_step_processes)
  double lease_s = 30;                          // lease length per claim/heartbeat
  std::string lease_source;                     // where lease_s came from, for messages ("" = the default)
  bool allow_run = false;                       // permit `run` (arbitrary argv) steps
  // URL prefixes an "http" step may call (core::http_url_allowed); empty:
  // http steps are refused.  Each checked by parse_http_url as it is read.
  std::vector<std::string> allow_http;
  // PEM file of CA certificates an https step's server may chain to, besides
  // the system's ("" = the system's alone).
  std::string http_ca_file;
  // Drain and exit 0 once a claim finds nothing due and no job is held
  // (Worker::claim_on): a worker that works off what is due, for tests and
  // batch runs.
  bool exit_when_idle = false;
  std::map<std::string, std::string> actions;   // action name -> executable path
  // action name -> the only variables its steps' "env" may set (config file:
  // {"path", "env"}); an action without one: none, unless allow_run.
  std::map<std::string, std::vector<std::string>> action_env;
  double grace_s = 30;                          // drain time after SIGTERM
  // A job sleeping alone with more than this left is given back at once
  // (Job::snooze_due); 0: only at a drain.
  double snooze_after_s = 0;
  std::string secrets_dir;                      // directory of secret files ("" = none)
  double poll_s = 1.0;                          // fallback poll interval
  double reconcile_s = 5.0;                     // reconcile() timer
  double kill_grace_s = 0.5;                    // TERM -> KILL delay for step processes
  std::string kill_grace_source;                // where kill_grace_s came from ("" = the default)
  std::size_t log_cap_bytes = 1 << 20;          // per-job cap on captured output
  // Most a completed job's result may be, as compact JSON text: past it the
  // job fails (54000) instead; at most max_result_limit, under what a jsonb
  // value holds (255 MiB).
  std::size_t max_result_bytes = std::size_t{64} << 20;
  int finish_batch = 64;                        // finishes per finish_many call, 1..1000
  double finish_delay_s = 0.002;                // batch window of the first finish
  double claim_backoff_s = 0.05;                // most a NOTIFY-woken claim waits after losing races
};

// The largest --max-result-bytes: under jsonb's 255 MiB (268435455 bytes),
// the most PostgreSQL stores in one result.
inline constexpr std::size_t max_result_limit = 256 * 1000 * 1000;

// Bad configuration; the message names the flag, variable or key at fault.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// parse_args's error for an option it does not know: the option as given
// (before any "="), for a "did you mean" (core/suggest.hpp).
class UnknownOption : public ConfigError {
 public:
  explicit UnknownOption(const std::string& option) : ConfigError("unknown option " + option), name(option) {}
  std::string name;
};

// Builds the worker's configuration from its arguments (without the program
// name and "worker") and the environment. Precedence: flags > environment >
// config file (--config FILE, else BGEXEC_CONFIG) > defaults. --queue given
// on the command line replaces queues from env/file; --action/BGEXEC_ACTIONS
// entries merge over the file's actions by name (an action's env list, from
// the file only, stays with its name); any other flag given twice is an
// error. Empty environment variables count as unset. -h/--help is accepted and ignored (check help_requested()
// first). Throws ConfigError naming the culprit on any bad input.
WorkerConfig parse_worker_config(const std::vector<std::string>& args,
                                 const std::map<std::string, std::string>& env);

// True when args contain -h or --help (before any "--").
bool help_requested(const std::vector<std::string>& args);

// Help text for `bgexec worker`: every flag, its variable and its default.
std::string worker_usage();

// Result of parse_args(). Option keys are spelled exactly as in the sets
// given to parse_args() (with or without the leading "--").
struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> options;
  std::multiset<std::string> flags;  // a switch given twice is here twice
};

// Generic parser for the client subcommands. Accepts `--opt value`,
// `--opt=value` (repeatable; values kept in order), boolean `--flag`, and
// positionals (anything not starting with '-', a lone "-", a negative number,
// and everything after "--"). Set entries may be written "--name", "name"
// or "-n". Throws ConfigError on an unknown option (UnknownOption), a missing value, or a
// value given to a boolean flag.
ParsedArgs parse_args(const std::vector<std::string>& args,
                      const std::set<std::string>& value_options,
                      const std::set<std::string>& bool_flags);

}  // namespace bgexec::core
