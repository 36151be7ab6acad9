#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/config.hpp"

namespace bgexec::core {
namespace {

using Args = std::vector<std::string>;
using Env = std::map<std::string, std::string>;

// A JSON file in a fresh temp directory, removed with the object.
class TempConfig {
 public:
  explicit TempConfig(const std::string& content) {
    char dir_template[] = "/tmp/bgexec-config-test-XXXXXX";
    const char* dir = ::mkdtemp(dir_template);
    if (dir == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = dir;
    path_ = dir_ + "/worker.json";
    std::ofstream(path_) << content;
  }
  ~TempConfig() {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

// Returns the ConfigError message, or "" when parsing succeeds.
std::string error_of(const Args& args, const Env& env = {}) {
  try {
    parse_worker_config(args, env);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(WorkerConfig, Defaults) {
  const WorkerConfig c = parse_worker_config({}, {});
  EXPECT_EQ(c.db, "");
  EXPECT_EQ(c.id, "");
  EXPECT_EQ(c.queues, Args{"default"});
  EXPECT_EQ(c.concurrency, 10);
  EXPECT_EQ(c.lease_s, 30);
  EXPECT_FALSE(c.allow_run);
  EXPECT_TRUE(c.actions.empty());
  EXPECT_EQ(c.grace_s, 30);
  EXPECT_EQ(c.snooze_after_s, 0);
  EXPECT_EQ(c.secrets_dir, "");
  EXPECT_EQ(c.poll_s, 1.0);
  EXPECT_EQ(c.reconcile_s, 5.0);
  EXPECT_EQ(c.kill_grace_s, 0.5);
  EXPECT_EQ(c.log_cap_bytes, std::size_t{1} << 20);
  EXPECT_EQ(c.max_result_bytes, std::size_t{64} << 20);
  EXPECT_EQ(c.finish_batch, 64);
  EXPECT_DOUBLE_EQ(c.finish_delay_s, 0.002);
  EXPECT_DOUBLE_EQ(c.claim_backoff_s, 0.05);
}

TEST(WorkerConfig, AllFlagsBothSpellings) {
  const WorkerConfig c = parse_worker_config(
      {"--db", "host=x dbname=y", "--id=w1", "--queue", "a", "--queue=b,c", "--concurrency", "64",
       "--lease=45", "--allow-run", "--action", "export=/bin/export", "--action=load=/bin/load",
       "--grace", "2m", "--secrets-dir=/run/secrets", "--poll", "250ms", "--reconcile-interval=10",
       "--kill-grace", "0", "--log-cap=4096", "--finish-batch", "16", "--finish-delay=5ms",
       "--claim-backoff", "0"},
      {});
  EXPECT_EQ(c.db, "host=x dbname=y");
  EXPECT_EQ(c.id, "w1");
  EXPECT_EQ(c.queues, (Args{"a", "b", "c"}));
  EXPECT_EQ(c.concurrency, 64);
  EXPECT_EQ(c.lease_s, 45);
  EXPECT_TRUE(c.allow_run);
  EXPECT_EQ(c.actions, (Env{{"export", "/bin/export"}, {"load", "/bin/load"}}));
  EXPECT_EQ(c.grace_s, 120);
  EXPECT_EQ(c.secrets_dir, "/run/secrets");
  EXPECT_DOUBLE_EQ(c.poll_s, 0.25);
  EXPECT_EQ(c.reconcile_s, 10);
  EXPECT_EQ(c.kill_grace_s, 0);
  EXPECT_EQ(c.log_cap_bytes, 4096u);
  EXPECT_EQ(c.finish_batch, 16);
  EXPECT_DOUBLE_EQ(c.finish_delay_s, 0.005);
  EXPECT_EQ(c.claim_backoff_s, 0);
}

TEST(WorkerConfig, Environment) {
  const WorkerConfig c = parse_worker_config(
      {}, {{"BGEXEC_DB", "service=jobs"},
           {"BGEXEC_ID", "env-worker"},
           {"BGEXEC_QUEUES", "q1, q2"},
           {"BGEXEC_CONCURRENCY", "3"},
           {"BGEXEC_LEASE", "12.5"},
           {"BGEXEC_ALLOW_RUN", "yes"},
           {"BGEXEC_ACTIONS", "a=/x/a,b=/x/b"},
           {"BGEXEC_GRACE", "0"},
           {"BGEXEC_SECRETS_DIR", "/s"},
           {"BGEXEC_POLL", "2"},
           {"BGEXEC_RECONCILE_INTERVAL", "1m"},
           {"BGEXEC_KILL_GRACE", "1"},
           {"BGEXEC_LOG_CAP", "100"},
           {"BGEXEC_FINISH_BATCH", "1000"},
           {"BGEXEC_FINISH_DELAY", "0"},
           {"UNRELATED", "ignored"}});
  EXPECT_EQ(c.db, "service=jobs");
  EXPECT_EQ(c.id, "env-worker");
  EXPECT_EQ(c.queues, (Args{"q1", "q2"}));
  EXPECT_EQ(c.concurrency, 3);
  EXPECT_EQ(c.lease_s, 12.5);
  EXPECT_TRUE(c.allow_run);
  EXPECT_EQ(c.actions, (Env{{"a", "/x/a"}, {"b", "/x/b"}}));
  EXPECT_EQ(c.grace_s, 0);
  EXPECT_EQ(c.secrets_dir, "/s");
  EXPECT_EQ(c.poll_s, 2);
  EXPECT_EQ(c.reconcile_s, 60);
  EXPECT_EQ(c.kill_grace_s, 1);
  EXPECT_EQ(c.log_cap_bytes, 100u);
  EXPECT_EQ(c.finish_batch, 1000);
  EXPECT_EQ(c.finish_delay_s, 0);
}

TEST(WorkerConfig, BooleanEnvSpellings) {
  for (const char* yes : {"1", "true", "TRUE", "yes"}) {
    EXPECT_TRUE(parse_worker_config({}, {{"BGEXEC_ALLOW_RUN", yes}}).allow_run) << yes;
  }
  for (const char* no : {"0", "false", "no", "No"}) {
    EXPECT_FALSE(parse_worker_config({}, {{"BGEXEC_ALLOW_RUN", no}}).allow_run) << no;
  }
  for (const char* yes : {"on", "ON", "Yes"}) {
    EXPECT_TRUE(parse_worker_config({}, {{"BGEXEC_ALLOW_RUN", yes}}).allow_run) << yes;
  }
  EXPECT_FALSE(parse_worker_config({}, {{"BGEXEC_ALLOW_RUN", "off"}}).allow_run);
  // The message lists every spelling the parser takes.
  EXPECT_EQ(error_of({}, {{"BGEXEC_ALLOW_RUN", "maybe"}}),
            "BGEXEC_ALLOW_RUN: expected 1, true, yes or on, or 0, false, no or off (any case), got \"maybe\"");
  // A flag beats the environment, including in the "off" direction.
  EXPECT_FALSE(parse_worker_config({"--allow-run=false"}, {{"BGEXEC_ALLOW_RUN", "1"}}).allow_run);
}

// --exit-when-idle under its three spellings, each a boolean of its own
// (allow_run was the one boolean: a second must not set it).
TEST(WorkerConfig, ExitWhenIdle) {
  EXPECT_FALSE(parse_worker_config({}, {}).exit_when_idle);
  const WorkerConfig flag = parse_worker_config({"--exit-when-idle"}, {});
  EXPECT_TRUE(flag.exit_when_idle);
  EXPECT_FALSE(flag.allow_run);
  EXPECT_FALSE(parse_worker_config({"--allow-run"}, {}).exit_when_idle);
  EXPECT_TRUE(parse_worker_config({}, {{"BGEXEC_EXIT_WHEN_IDLE", "yes"}}).exit_when_idle);
  EXPECT_FALSE(parse_worker_config({"--exit-when-idle=0"}, {{"BGEXEC_EXIT_WHEN_IDLE", "1"}}).exit_when_idle);
  EXPECT_EQ(error_of({}, {{"BGEXEC_EXIT_WHEN_IDLE", "soon"}}),
            "BGEXEC_EXIT_WHEN_IDLE: expected 1, true, yes or on, or 0, false, no or off (any case), got \"soon\"");
  TempConfig file(R"({"exit_when_idle": true})");
  const WorkerConfig c = parse_worker_config({"--config", file.path()}, {});
  EXPECT_TRUE(c.exit_when_idle);
  EXPECT_FALSE(c.allow_run);
  // The flag takes no value: the next argument is not eaten.
  EXPECT_EQ(parse_worker_config({"--exit-when-idle", "--concurrency", "3"}, {}).concurrency, 3);
}

TEST(WorkerConfig, EmptyEnvIsUnset) {
  const WorkerConfig c = parse_worker_config({}, {{"BGEXEC_CONCURRENCY", ""}, {"BGEXEC_QUEUES", ""}});
  EXPECT_EQ(c.concurrency, 10);
  EXPECT_EQ(c.queues, Args{"default"});
}

TEST(WorkerConfig, ConfigFile) {
  TempConfig file(R"({"db": "dbname=f", "id": "file-w", "queues": ["fq"], "concurrency": 7,
                      "lease": 20, "allow_run": true, "actions": {"x": "/f/x"}, "grace": 1.5,
                      "secrets_dir": "/fs", "poll": 0.5, "reconcile_interval": 9,
                      "kill_grace": 2, "log_cap": 2048, "finish_batch": 8, "finish_delay": 0.01})");
  const WorkerConfig c = parse_worker_config({"--config", file.path()}, {});
  EXPECT_EQ(c.db, "dbname=f");
  EXPECT_EQ(c.id, "file-w");
  EXPECT_EQ(c.queues, Args{"fq"});
  EXPECT_EQ(c.concurrency, 7);
  EXPECT_EQ(c.lease_s, 20);
  EXPECT_TRUE(c.allow_run);
  EXPECT_EQ(c.actions, (Env{{"x", "/f/x"}}));
  EXPECT_EQ(c.grace_s, 1.5);
  EXPECT_EQ(c.secrets_dir, "/fs");
  EXPECT_EQ(c.poll_s, 0.5);
  EXPECT_EQ(c.reconcile_s, 9);
  EXPECT_EQ(c.kill_grace_s, 2);
  EXPECT_EQ(c.log_cap_bytes, 2048u);
  EXPECT_EQ(c.finish_batch, 8);
  EXPECT_DOUBLE_EQ(c.finish_delay_s, 0.01);
  // BGEXEC_CONFIG names the file too.
  EXPECT_EQ(parse_worker_config({}, {{"BGEXEC_CONFIG", file.path()}}).id, "file-w");
}

// Durations in the file may be strings, read by the parser flags and
// variables use; a bad one is refused with the same message, naming the key.
TEST(WorkerConfig, FileDurationStrings) {
  TempConfig file(R"({"lease": "30s", "grace": "5m", "poll": "500ms", "reconcile_interval": "1.5",
                      "kill_grace": "0", "finish_delay": "2ms"})");
  const WorkerConfig c = parse_worker_config({"--config", file.path()}, {});
  EXPECT_EQ(c.lease_s, 30);
  EXPECT_EQ(c.grace_s, 300);
  EXPECT_DOUBLE_EQ(c.poll_s, 0.5);
  EXPECT_EQ(c.reconcile_s, 1.5);
  EXPECT_EQ(c.kill_grace_s, 0);
  EXPECT_DOUBLE_EQ(c.finish_delay_s, 0.002);

  TempConfig bad(R"({"lease": "30 s"})");
  EXPECT_EQ(error_of({"--config", bad.path()}),
            "config file " + bad.path() + ": key \"lease\": \"30 s\" is not a duration (expected seconds, such as 30 or "
            "1.5, or a number with a unit: 500ms, 30s, 5m, 2h)");
  TempConfig negative(R"({"kill_grace": "-1s"})");
  EXPECT_EQ(error_of({"--config", negative.path()}),
            "config file " + negative.path() + ": key \"kill_grace\": expected a duration of 0 or more, got \"-1s\"");
  // The kill of an abandoned job must fit before its lease expires.
  EXPECT_EQ(error_of({"--lease", "6", "--kill-grace", "2"}),
            "--kill-grace: 2 s must be less than a third of the lease (6 s, from --lease)");
  EXPECT_EQ(error_of({"--lease", "6", "--kill-grace", "1.9"}), "");
  // A lease over a day: the database would refuse every claim.
  EXPECT_EQ(error_of({"--lease", "25h"}), "--lease: expected a duration of at most 86400 seconds, got \"25h\"");
  TempConfig long_lease(R"({"lease": 86401})");
  EXPECT_EQ(error_of({"--config", long_lease.path()}),
            "config file " + long_lease.path() + ": key \"lease\": expected a duration of at most 86400 seconds, got 86401");
  EXPECT_EQ(error_of({}, {{"BGEXEC_LEASE", "86400"}}), "");
  // Under a second: heartbeats cannot keep up (0.001 s: each timed out;
  // 1e-7 s: 0 to the server, which refused every claim).
  EXPECT_EQ(error_of({"--lease", "0.0000001"}), "--lease: expected a duration of at least 1 second, got \"0.0000001\"");
  EXPECT_EQ(error_of({"--lease", "999ms"}), "--lease: expected a duration of at least 1 second, got \"999ms\"");
  EXPECT_EQ(error_of({"--lease", "1"}), "");
  // Any duration at most 100 years: past about 9.2e9 s the timers'
  // nanoseconds overflowed, --poll and --reconcile-interval then fired in
  // a tight loop and --grace ended the drain at once.
  EXPECT_EQ(error_of({"--poll", "10000000000"}),
            "--poll: expected a duration of at most 3110400000 seconds, got \"10000000000\"");
  EXPECT_EQ(error_of({"--reconcile-interval", "3110400001"}),
            "--reconcile-interval: expected a duration of at most 3110400000 seconds, got \"3110400001\"");
  EXPECT_EQ(error_of({"--grace", "3110400000"}), "");
  TempConfig huge_grace(R"({"grace": 1e308})");
  EXPECT_EQ(error_of({"--config", huge_grace.path()}),
            "config file " + huge_grace.path() + ": key \"grace\": expected a duration of at most 3110400000 seconds, got 1e+308");
  // The same text from a variable and from the file: the same message, but for the name.
  EXPECT_EQ(error_of({}, {{"BGEXEC_LEASE", "30 s"}}),
            "BGEXEC_LEASE: \"30 s\" is not a duration (expected seconds, such as 30 or 1.5, or a number with a unit: "
            "500ms, 30s, 5m, 2h)");
  TempConfig wrong(R"({"poll": [1]})");
  EXPECT_EQ(error_of({"--config", wrong.path()}),
            "config file " + wrong.path() + ": key \"poll\": expected a number of seconds or a duration string, got [1]");
}

// A kill grace left unset fits any valid lease: its default, cut to a
// sixth of a short lease; one set explicitly is still checked against it.
TEST(WorkerConfig, KillGraceDefaultFitsShortLease) {
  EXPECT_EQ(error_of({"--lease", "1"}), "");
  EXPECT_DOUBLE_EQ(parse_worker_config({"--lease", "1"}, {}).kill_grace_s, 1.0 / 6);
  EXPECT_DOUBLE_EQ(parse_worker_config({}, {{"BGEXEC_LEASE", "1500ms"}}).kill_grace_s, 0.25);
  EXPECT_EQ(parse_worker_config({"--lease", "3"}, {}).kill_grace_s, 0.5);
  EXPECT_EQ(parse_worker_config({"--lease", "60"}, {}).kill_grace_s, 0.5);
  EXPECT_EQ(error_of({"--lease", "1", "--kill-grace", "0.5"}),
            "--kill-grace: 0.5 s must be less than a third of the lease (1 s, from --lease)");
  TempConfig file(R"({"kill_grace": 0.5})");
  EXPECT_NE(error_of({"--config", file.path(), "--lease", "1"}), "");
  EXPECT_EQ(parse_worker_config({"--lease", "1", "--kill-grace", "0.2"}, {}).kill_grace_s, 0.2);
}

// The conflict of the kill grace with the lease names where each value
// came from, as every other setting's error names its source (it named the
// config keys when both came from flags or variables).
TEST(WorkerConfig, KillGraceConflictNamesSources) {
  EXPECT_EQ(error_of({"--kill-grace", "10"}), "--kill-grace: 10 s must be less than a third of the lease (30 s, the default)");
  EXPECT_EQ(error_of({}, {{"BGEXEC_KILL_GRACE", "10"}, {"BGEXEC_LEASE", "30"}}),
            "BGEXEC_KILL_GRACE: 10 s must be less than a third of the lease (30 s, from BGEXEC_LEASE)");
  TempConfig file(R"({"kill_grace": 0.5})");
  EXPECT_EQ(error_of({"--config", file.path(), "--lease", "1"}),
            "config file " + file.path() + ": key \"kill_grace\": 0.5 s must be less than a third of the lease (1 s, from --lease)");
  TempConfig lease(R"({"lease": 3})");
  EXPECT_EQ(error_of({"--config", lease.path(), "--kill-grace", "1"}),
            "--kill-grace: 1 s must be less than a third of the lease (3 s, from config file " + lease.path() +
                ": key \"lease\")");
}

// --poll and --reconcile-interval are periods of loops that query the
// database: at least a millisecond (--poll 0.0000000001 claimed in a busy
// loop), from every source.
TEST(WorkerConfig, LoopIntervalsHaveAFloor) {
  EXPECT_EQ(error_of({"--poll", "0.0000000001"}),
            "--poll: expected a duration of at least 0.001 seconds, got \"0.0000000001\"");
  EXPECT_EQ(error_of({"--reconcile-interval", "0.5ms"}),
            "--reconcile-interval: expected a duration of at least 0.001 seconds, got \"0.5ms\"");
  EXPECT_EQ(error_of({}, {{"BGEXEC_POLL", "0.0009"}}),
            "BGEXEC_POLL: expected a duration of at least 0.001 seconds, got \"0.0009\"");
  TempConfig file(R"({"reconcile_interval": 1e-9})");
  EXPECT_EQ(error_of({"--config", file.path()}), "config file " + file.path() +
                                                     ": key \"reconcile_interval\": expected a duration of at least "
                                                     "0.001 seconds, got 1e-09");
  EXPECT_DOUBLE_EQ(parse_worker_config({"--poll", "1ms", "--reconcile-interval", "0.001"}, {}).poll_s, 0.001);
  EXPECT_DOUBLE_EQ(parse_worker_config({"--poll", "1ms", "--reconcile-interval", "0.001"}, {}).reconcile_s, 0.001);
}

// An action named twice in one source is refused naming the source and
// the action (the last path won unnoticed); across sources the stronger
// one's path replaces the weaker's, as documented.
TEST(WorkerConfig, ActionGivenTwiceInOneSource) {
  EXPECT_EQ(error_of({"--action", "a=/x", "--action=a=/y"}), "--action: action \"a\" is given more than once");
  EXPECT_EQ(error_of({"--action", "a=/x", "--action", " a =/x"}), "--action: action \"a\" is given more than once");
  EXPECT_EQ(error_of({}, {{"BGEXEC_ACTIONS", "a=/x,b=/b,a=/y"}}),
            "BGEXEC_ACTIONS: action \"a\" is given more than once");
  TempConfig file(R"({"actions": {"a": "/file/a"}})");
  const WorkerConfig c =
      parse_worker_config({"--config", file.path(), "--action", "a=/flag/a"}, {{"BGEXEC_ACTIONS", "a=/env/a,b=/env/b"}});
  EXPECT_EQ(c.actions, (Env{{"a", "/flag/a"}, {"b", "/env/b"}}));
}

// A bad entry of the file's "actions" names the action and its field, and
// shows the value at fault, not the whole object.
TEST(WorkerConfig, BadActionEntryNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"actions": {"a": {"path": "/x", "env": [""]}, "b": "/b"}})",
       R"(key "actions": action "a": "env": expected variable names, non-empty and without '=', got "")"},
      {R"({"actions": {"a": {"path": "/x", "env": ["A=B"]}}})",
       R"(key "actions": action "a": "env": expected variable names, non-empty and without '=', got "A=B")"},
      {R"({"actions": {"a": {"path": "/x", "env": "X"}}})",
       R"(key "actions": action "a": "env": expected an array of variable names, got "X")"},
      {R"({"actions": {"a": {"path": ""}}})", R"(key "actions": action "a": "path": expected a non-empty string, got "")"},
      {R"({"actions": {"a": ""}})",
       R"(key "actions": action "a": expected a path (a non-empty string) or {"path": path, "env": [names]}, got "")"},
      {R"({"actions": {"a": 1}})",
       R"(key "actions": action "a": expected a path (a non-empty string) or {"path": path, "env": [names]}, got 1)"},
      {R"({"actions": {"a": {"env": []}}})", R"(key "actions": action "a": "path" is missing)"},
      {R"({"actions": {"a": {"path": "/a", "envs": []}}})",
       R"(key "actions": action "a": unknown field "envs" (expected "path" and "env"))"},
      {R"({"actions": {"": "/x"}})", R"(key "actions": an action name must not be empty)"},
  };
  for (const auto& [content, expected] : cases) {
    TempConfig file(content);
    EXPECT_EQ(error_of({"--config", file.path()}), "config file " + file.path() + ": " + expected) << content;
  }
  // Not the whole object: a value past 60 bytes is cut.
  TempConfig big(R"({"actions": {"a": {"path": "/a", "env": [")" + std::string(200, 'X') + R"(="]}}})");
  const std::string msg = error_of({"--config", big.path()});
  EXPECT_NE(msg.find(std::string(59, 'X') + "..."), std::string::npos) << msg;
  EXPECT_EQ(msg.find(std::string(61, 'X')), std::string::npos) << msg;
}

// The sql step sessions default to the job slots; a value of its own from
// any source, 1..1024.
TEST(WorkerConfig, SqlStepsDefaultToConcurrency) {
  EXPECT_EQ(parse_worker_config({}, {}).sql_steps, 10);
  EXPECT_EQ(parse_worker_config({"--concurrency", "3"}, {}).sql_steps, 3);
  EXPECT_EQ(parse_worker_config({"--concurrency", "3", "--sql-steps", "7"}, {}).sql_steps, 7);
  EXPECT_EQ(parse_worker_config({}, {{"BGEXEC_SQL_STEPS", "2"}}).sql_steps, 2);
  TempConfig file(R"({"sql_steps": 5})");
  EXPECT_EQ(parse_worker_config({"--config", file.path()}, {}).sql_steps, 5);
  EXPECT_NE(error_of({"--sql-steps", "0"}).find("--sql-steps"), std::string::npos);
  EXPECT_NE(error_of({"--sql-steps", "1025"}).find("--sql-steps"), std::string::npos);
}

// Step processes: unset, 0 (the worker derives them from its open-file
// limit at start: core::default_step_processes); a value of its own from
// any source, 1..1024.
TEST(WorkerConfig, StepProcesses) {
  EXPECT_EQ(parse_worker_config({}, {}).step_processes, 0);
  EXPECT_EQ(parse_worker_config({"--step-processes", "2"}, {}).step_processes, 2);
  EXPECT_EQ(parse_worker_config({"--step-processes=1024"}, {}).step_processes, 1024);
  EXPECT_EQ(parse_worker_config({}, {{"BGEXEC_STEP_PROCESSES", "3"}}).step_processes, 3);
  TempConfig file(R"({"step_processes": 5})");
  EXPECT_EQ(parse_worker_config({"--config", file.path()}, {}).step_processes, 5);
  EXPECT_EQ(parse_worker_config({"--config", file.path(), "--step-processes", "1"}, {}).step_processes, 1);
  EXPECT_NE(error_of({"--step-processes", "0"}).find("--step-processes"), std::string::npos);
  EXPECT_NE(error_of({"--step-processes", "1025"}).find("--step-processes"), std::string::npos);
  EXPECT_NE(error_of({"--step-processes", "two"}).find("--step-processes"), std::string::npos);
  TempConfig bad(R"({"step_processes": 0})");
  EXPECT_NE(error_of({"--config", bad.path()}).find("step_processes"), std::string::npos);
  const std::string usage = worker_usage();
  for (const char* needle : {"--step-processes", "BGEXEC_STEP_PROCESSES", "step_processes"})
    EXPECT_NE(usage.find(needle), std::string::npos) << needle;
}

// --allow-http: repeatable, one prefix per flag; flags replace the
// variable's (comma-separated) and the file's list; each prefix is parsed
// as it is read, its error naming the source.
TEST(WorkerConfig, AllowHttp) {
  EXPECT_TRUE(parse_worker_config({}, {}).allow_http.empty());
  using V = std::vector<std::string>;
  EXPECT_EQ(parse_worker_config({"--allow-http", "http://a:1/x", "--allow-http=http://b"}, {}).allow_http,
            (V{"http://a:1/x", "http://b"}));
  EXPECT_EQ(parse_worker_config({}, {{"BGEXEC_ALLOW_HTTP", "http://a/, http://b/y"}}).allow_http,
            (V{"http://a/", "http://b/y"}));
  TempConfig file(R"({"allow_http": ["http://c/api"]})");
  EXPECT_EQ(parse_worker_config({"--config", file.path()}, {}).allow_http, (V{"http://c/api"}));
  EXPECT_EQ(parse_worker_config({"--config", file.path(), "--allow-http", "http://d"}, {}).allow_http,
            (V{"http://d"}));
  EXPECT_EQ(error_of({"--allow-http", "http://a@b/"}),
            "--allow-http: \"http://a@b/\" has userinfo (\"user@host\"), which is not allowed");
  EXPECT_NE(error_of({"--allow-http", "http://a/x?y"}).find("has a query"), std::string::npos);
  EXPECT_NE(error_of({"--allow-http", "ftp://a/"}).find("--allow-http"), std::string::npos);
  EXPECT_NE(error_of({}, {{"BGEXEC_ALLOW_HTTP", "nope"}}).find("BGEXEC_ALLOW_HTTP"), std::string::npos);
  TempConfig bad(R"({"allow_http": "http://a"})");
  EXPECT_NE(error_of({"--config", bad.path()}).find("allow_http"), std::string::npos);
  const std::string usage = worker_usage();
  EXPECT_EQ(parse_worker_config({"--allow-http", "https://a/x"}, {}).allow_http, (V{"https://a/x"}));
  EXPECT_EQ(parse_worker_config({"--http-ca-file", "/ca.pem"}, {}).http_ca_file, "/ca.pem");
  EXPECT_EQ(parse_worker_config({}, {{"BGEXEC_HTTP_CA_FILE", "/e.pem"}}).http_ca_file, "/e.pem");
  for (const char* needle : {"--allow-http", "BGEXEC_ALLOW_HTTP", "allow_http", "--http-ca-file", "BGEXEC_HTTP_CA_FILE",
                             "http_ca_file"})
    EXPECT_NE(usage.find(needle), std::string::npos) << needle;
}

// Text that is no duration says so and shows the accepted forms; a
// duration out of range says that instead.
TEST(WorkerConfig, NotADuration) {
  const std::string forms =
      " is not a duration (expected seconds, such as 30 or 1.5, or a number with a unit: 500ms, 30s, 5m, 2h)";
  for (const char* bad : {"1d", "30S", "1e3", "100us", "soon", "30 s", ""}) {
    EXPECT_EQ(error_of({std::string("--lease=") + bad}), std::string("--lease: \"") + bad + "\"" + forms) << bad;
  }
  EXPECT_EQ(error_of({}, {{"BGEXEC_POLL", "1d"}}), "BGEXEC_POLL: \"1d\"" + forms);
  TempConfig file(R"({"grace": "2 days"})");
  EXPECT_EQ(error_of({"--config", file.path()}), "config file " + file.path() + ": key \"grace\": \"2 days\"" + forms);
  // the least the setting takes, where it has one (--lease 0 said
  // "greater than 0", where 0.5 is refused too)
  EXPECT_EQ(error_of({"--lease", "0"}), "--lease: expected a duration of at least 1 second, got \"0\"");
  EXPECT_EQ(error_of({"--lease", "-5s"}), "--lease: expected a duration of at least 1 second, got \"-5s\"");
  EXPECT_EQ(error_of({"--poll", "0"}), "--poll: expected a duration of at least 0.001 seconds, got \"0\"");
  EXPECT_EQ(error_of({"--grace", "-1"}), "--grace: expected a duration of 0 or more, got \"-1\"");
}

TEST(WorkerConfig, PrecedenceFlagsOverEnvOverFile) {
  TempConfig file(R"({"db": "file", "id": "file", "concurrency": 2, "lease": 5,
                      "queues": ["file-q"], "actions": {"a": "/file/a", "b": "/file/b", "c": "/file/c"}})");
  const Env env{{"BGEXEC_CONFIG", file.path()},
                {"BGEXEC_ID", "env"},
                {"BGEXEC_CONCURRENCY", "3"},
                {"BGEXEC_QUEUES", "env-q"},
                {"BGEXEC_ACTIONS", "b=/env/b,c=/env/c"}};
  const WorkerConfig c = parse_worker_config({"--concurrency=4", "--action", "c=/flag/c"}, env);
  EXPECT_EQ(c.db, "file");         // only the file sets it
  EXPECT_EQ(c.id, "env");          // env over file
  EXPECT_EQ(c.concurrency, 4);     // flag over env over file
  EXPECT_EQ(c.lease_s, 5);         // file over default
  EXPECT_EQ(c.queues, Args{"env-q"});
  EXPECT_EQ(c.actions, (Env{{"a", "/file/a"}, {"b", "/env/b"}, {"c", "/flag/c"}}));

  // --queue on the command line replaces env and file queues.
  EXPECT_EQ(parse_worker_config({"--queue", "cli"}, env).queues, Args{"cli"});
  // --config beats BGEXEC_CONFIG.
  TempConfig other(R"({"db": "other"})");
  EXPECT_EQ(parse_worker_config({"--config", other.path()}, env).db, "other");
}

// Only --queue and --action add up when repeated; any other flag given
// twice, in either spelling, is refused naming it (the last value won
// unnoticed: --lease 5 --lease 60 ran with 60).
TEST(WorkerConfig, FlagGivenTwice) {
  EXPECT_EQ(error_of({"--id", "one", "--id", "two"}), "--id is given more than once");
  EXPECT_EQ(error_of({"--lease", "5", "--lease=60"}), "--lease is given more than once");
  EXPECT_EQ(error_of({"--concurrency=2", "--concurrency=2"}), "--concurrency is given more than once");
  EXPECT_EQ(error_of({"--allow-run", "--allow-run=false"}), "--allow-run is given more than once");
  EXPECT_EQ(error_of({"--grace", "0", "--queue", "q", "--grace", "600"}), "--grace is given more than once");
  EXPECT_EQ(error_of({"--config", "/a.json", "--config", "/b.json"}), "--config is given more than once");
  const WorkerConfig c =
      parse_worker_config({"--queue", "a", "--queue=b", "--action", "x=/bin/x", "--action=y=/bin/y"}, {});
  EXPECT_EQ(c.queues, (Args{"a", "b"}));
  EXPECT_EQ(c.actions, (Env{{"x", "/bin/x"}, {"y", "/bin/y"}}));
}

// An action's entry in the file may list the only variables its steps'
// env may set; a flag or variable naming the action replaces its path and
// keeps that list (given nowhere else).
TEST(WorkerConfig, ActionEnvAllowlist) {
  TempConfig file(R"({"actions": {"a": {"path": "/file/a", "env": ["DAY", "REGION"]},
                                  "b": {"path": "/file/b"}, "c": "/file/c", "d": {"path": "/d", "env": []}}})");
  const WorkerConfig c = parse_worker_config({"--config", file.path(), "--action", "a=/flag/a"}, {});
  EXPECT_EQ(c.actions, (Env{{"a", "/flag/a"}, {"b", "/file/b"}, {"c", "/file/c"}, {"d", "/d"}}));
  EXPECT_EQ(c.action_env.size(), 2u);
  EXPECT_EQ(c.action_env.at("a"), (Args{"DAY", "REGION"}));
  EXPECT_TRUE(c.action_env.at("d").empty());
  EXPECT_EQ(c.action_env.count("b"), 0u);
  EXPECT_TRUE(parse_worker_config({"--action", "a=/x"}, {}).action_env.empty());
}

// The example config that make install ships parses, its action list too.
TEST(WorkerConfig, ExampleConfigParses) {
  const WorkerConfig c = parse_worker_config({"--config", BGEXEC_EXAMPLE_CONFIG}, {});
  EXPECT_EQ(c.action_env.at("export-orders"), Args{"EXPORT_FORMAT"});
  EXPECT_EQ(c.actions.at("send-email"), "/opt/bgexec/actions/send-email");
}

TEST(WorkerConfig, FileUnknownKey) {
  TempConfig file(R"({"db": "x", "concurency": 5})");
  const std::string msg = error_of({"--config=" + file.path()});
  EXPECT_NE(msg.find("unknown key \"concurency\""), std::string::npos) << msg;
  EXPECT_NE(msg.find(file.path()), std::string::npos) << msg;
}

TEST(WorkerConfig, FileWrongTypes) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"db": 5})", "\"db\""},
      {R"({"queues": "q"})", "\"queues\""},
      {R"({"queues": []})", "\"queues\""},
      {R"({"queues": [1]})", "\"queues\""},
      {R"({"concurrency": "5"})", "\"concurrency\""},
      {R"({"concurrency": 2.5})", "\"concurrency\""},
      {R"({"concurrency": 0})", "\"concurrency\""},
      {R"({"concurrency": 5000})", "\"concurrency\""},
      {R"({"lease": "thirty"})", "\"lease\""},
      {R"({"lease": "0s"})", "\"lease\""},
      {R"({"lease": true})", "\"lease\""},
      {R"({"exit_when_idle": "yes"})", "\"exit_when_idle\""},
      {R"({"grace": "-1s"})", "\"grace\""},
      {R"({"poll": ""})", "\"poll\""},
      {R"({"lease": 0})", "\"lease\""},
      {R"({"allow_run": 1})", "\"allow_run\""},
      {R"({"actions": ["a"]})", "\"actions\""},
      {R"({"actions": {"a": 1}})", "\"actions\""},
      {R"({"actions": {"a": {"env": ["X"]}}})", "\"actions\""},
      {R"({"actions": {"a": {"path": "/a", "env": "X"}}})", "\"actions\""},
      {R"({"actions": {"a": {"path": "/a", "env": ["X=1"]}}})", "\"actions\""},
      {R"({"actions": {"a": {"path": "/a", "env": [""]}}})", "\"actions\""},
      {R"({"actions": {"a": {"path": "/a", "env": [1]}}})", "\"actions\""},
      {R"({"actions": {"a": {"path": "/a", "envs": []}}})", "\"actions\""},
      {R"({"actions": {"a": {"path": ""}}})", "\"actions\""},
      {R"({"grace": -1})", "\"grace\""},
      {R"({"log_cap": -5})", "\"log_cap\""},
      {R"({"log_cap": 1.5})", "\"log_cap\""},
      {R"({"finish_batch": 0})", "\"finish_batch\""},
      {R"({"finish_batch": 1001})", "\"finish_batch\""},
      {R"({"finish_batch": "64"})", "\"finish_batch\""},
      {R"({"finish_delay": -0.001})", "\"finish_delay\""},
  };
  for (const auto& [content, key] : cases) {
    TempConfig file(content);
    const std::string msg = error_of({"--config", file.path()});
    EXPECT_NE(msg.find("key " + key), std::string::npos) << content << " -> " << msg;
  }
}

TEST(WorkerConfig, FileNotReadableOrInvalid) {
  // The OS's reason, and no device or directory read (/dev/zero grew without bound)
  EXPECT_EQ(error_of({"--config", "/nonexistent/bgexec.json"}),
            "config file /nonexistent/bgexec.json: No such file or directory");
  EXPECT_EQ(error_of({"--config", "/dev/zero"}), "config file /dev/zero: not a regular file");
  EXPECT_EQ(error_of({"--config", "/tmp"}), "config file /tmp: not a regular file");
  // The parser's reason and place, as the CLI gives them for a JSON argument.
  TempConfig bad("{not json");
  EXPECT_EQ(error_of({"--config", bad.path()}),
            "config file " + bad.path() +
                ": not valid JSON: parse error at line 1, column 3: syntax error while parsing object key - "
                "invalid literal; last read: '{no'; expected string literal");
  TempConfig comma("{\"lease\": 20,\n \"grace\": 5,\n}\n");
  EXPECT_NE(error_of({"--config", comma.path()}).find("not valid JSON: parse error at line 3, column 1: syntax "
                                                     "error while parsing object key - unexpected '}'; expected "
                                                     "string literal"),
            std::string::npos);
  TempConfig huge(R"({"lease": 1e400})");
  EXPECT_NE(error_of({"--config", huge.path()}).find("not valid JSON: number overflow"), std::string::npos);
  TempConfig arr("[1]");
  EXPECT_NE(error_of({"--config", arr.path()}).find("JSON object"), std::string::npos);
  TempConfig twice(R"({"lease": 30, "lease": 40})");
  EXPECT_EQ(error_of({"--config", twice.path()}), "config file " + twice.path() + ": key \"lease\" is given twice");
}

TEST(WorkerConfig, MaxResultBytesFromEachSource) {
  EXPECT_EQ(parse_worker_config({"--max-result-bytes", "1000000"}, {}).max_result_bytes, 1000000u);
  EXPECT_EQ(parse_worker_config({"--max-result-bytes=256000000"}, {}).max_result_bytes, 256000000u);
  EXPECT_EQ(parse_worker_config({}, {{"BGEXEC_MAX_RESULT_BYTES", "4096"}}).max_result_bytes, 4096u);
  TempConfig file(R"({"max_result_bytes": 2048, "log_cap": 100})");
  const WorkerConfig c = parse_worker_config({"--config", file.path()}, {});
  EXPECT_EQ(c.max_result_bytes, 2048u);
  EXPECT_EQ(c.log_cap_bytes, 100u);  // each its own
  TempConfig bad(R"({"max_result_bytes": 300000000})");
  EXPECT_NE(error_of({"--config", bad.path()}).find("max_result_bytes"), std::string::npos);
}

TEST(WorkerConfig, BadFlagValuesNameTheFlag) {
  EXPECT_NE(error_of({"--concurrency", "0"}).find("--concurrency"), std::string::npos);
  EXPECT_NE(error_of({"--concurrency", "1025"}).find("--concurrency"), std::string::npos);
  EXPECT_NE(error_of({"--concurrency=ten"}).find("--concurrency"), std::string::npos);
  EXPECT_NE(error_of({"--concurrency", "-3"}).find("--concurrency"), std::string::npos);
  EXPECT_NE(error_of({"--lease", "0"}).find("--lease"), std::string::npos);
  EXPECT_NE(error_of({"--lease", "soon"}).find("--lease"), std::string::npos);
  EXPECT_NE(error_of({"--grace", "-1"}).find("--grace"), std::string::npos);
  EXPECT_NE(error_of({"--poll", "0"}).find("--poll"), std::string::npos);
  EXPECT_NE(error_of({"--reconcile-interval", "x"}).find("--reconcile-interval"), std::string::npos);
  EXPECT_NE(error_of({"--kill-grace", "1y"}).find("--kill-grace"), std::string::npos);
  EXPECT_NE(error_of({"--log-cap", "0"}).find("--log-cap"), std::string::npos);
  EXPECT_NE(error_of({"--log-cap", "1MB"}).find("--log-cap"), std::string::npos);
  // A job's result: at most 256000000 bytes, under what one jsonb value holds.
  EXPECT_NE(error_of({"--max-result-bytes", "0"}).find("--max-result-bytes: expected a number of bytes from 1 to 256000000"),
            std::string::npos);
  EXPECT_NE(error_of({"--max-result-bytes", "256000001"}).find("--max-result-bytes"), std::string::npos);
  EXPECT_NE(error_of({"--max-result-bytes", "1MB"}).find("--max-result-bytes"), std::string::npos);
  EXPECT_NE(error_of({"--finish-batch", "0"}).find("--finish-batch"), std::string::npos);
  EXPECT_NE(error_of({"--finish-batch", "1001"}).find("expected an integer from 1 to 1000"), std::string::npos);
  EXPECT_NE(error_of({"--finish-delay", "-1"}).find("--finish-delay"), std::string::npos);
  EXPECT_NE(error_of({"--concurrency", "0"}).find("expected an integer from 1 to 1024"), std::string::npos);
  EXPECT_NE(error_of({"--action", "noequals"}).find("--action"), std::string::npos);
  EXPECT_NE(error_of({"--action", "=/bin/x"}).find("--action"), std::string::npos);
  EXPECT_NE(error_of({"--queue", "a,,b"}).find("--queue"), std::string::npos);
  EXPECT_NE(error_of({"--allow-run=perhaps"}).find("--allow-run"), std::string::npos);
  EXPECT_NE(error_of({}, {{"BGEXEC_LEASE", "-2"}}).find("BGEXEC_LEASE"), std::string::npos);
  EXPECT_NE(error_of({}, {{"BGEXEC_ACTIONS", "a=/x,broken"}}).find("BGEXEC_ACTIONS"), std::string::npos);
}

TEST(WorkerConfig, UnknownFlagsAndMissingValues) {
  EXPECT_NE(error_of({"--concurency", "3"}).find("--concurency"), std::string::npos);
  EXPECT_NE(error_of({"--db"}).find("--db requires a value"), std::string::npos);
  EXPECT_NE(error_of({"stray"}).find("\"stray\""), std::string::npos);
  EXPECT_NE(error_of({"-x"}).find("\"-x\""), std::string::npos);
  // Help flags are tolerated by the parser (the caller checks them first).
  EXPECT_EQ(error_of({"--help"}), "");
}

TEST(WorkerConfig, HelpRequested) {
  EXPECT_TRUE(help_requested({"--help"}));
  EXPECT_TRUE(help_requested({"--queue", "q", "-h"}));
  EXPECT_FALSE(help_requested({}));
  EXPECT_FALSE(help_requested({"--id", "--help"}));  // the value of --id
  EXPECT_FALSE(help_requested({"--", "--help"}));
  EXPECT_TRUE(help_requested({"--allow-run", "--help"}));
}

TEST(WorkerConfig, UsageDocumentsEveryFlag) {
  const std::string usage = worker_usage();
  for (const char* needle :
       {"--db", "BGEXEC_DB", "--id", "BGEXEC_ID", "--queue", "BGEXEC_QUEUES", "--concurrency",
        "BGEXEC_CONCURRENCY", "Defaults to 10.", "--sql-steps", "BGEXEC_SQL_STEPS", "--lease", "BGEXEC_LEASE", "Defaults to 30.", "--allow-run",
        "BGEXEC_ALLOW_RUN", "--config", "BGEXEC_CONFIG", "--action", "BGEXEC_ACTIONS", "--grace",
        "BGEXEC_GRACE", "--snooze-after", "BGEXEC_SNOOZE_AFTER", "--secrets-dir", "BGEXEC_SECRETS_DIR", "--poll", "BGEXEC_POLL", "Defaults to 1.",
        "--reconcile-interval", "BGEXEC_RECONCILE_INTERVAL", "Defaults to 5.", "--kill-grace",
        "BGEXEC_KILL_GRACE", "Defaults to 0.5.", "--log-cap", "BGEXEC_LOG_CAP", "1048576",
        "--max-result-bytes", "BGEXEC_MAX_RESULT_BYTES", "67108864",
        "--finish-batch", "BGEXEC_FINISH_BATCH", "Defaults to 64.", "--finish-delay", "BGEXEC_FINISH_DELAY",
        "Defaults to 0.002."}) {
    EXPECT_NE(usage.find(needle), std::string::npos) << needle;
  }
}

TEST(ParseArgs, MixedArguments) {
  const ParsedArgs p = parse_args({"kind", "--queue", "q1", "--after=5", "--follow", "{\"a\":1}", "--queue=q2"},
                                  {"--queue", "after"}, {"--follow", "json"});
  EXPECT_EQ(p.positional, (Args{"kind", "{\"a\":1}"}));
  EXPECT_EQ(p.options.at("--queue"), (Args{"q1", "q2"}));
  EXPECT_EQ(p.options.at("after"), Args{"5"});
  EXPECT_EQ(p.flags, (std::multiset<std::string>{"--follow"}));
}

// A switch given twice is there twice, for the caller to refuse as it
// refuses an option's second value (--json --json was taken silently).
TEST(ParseArgs, RepeatedSwitchCounts) {
  const ParsedArgs p = parse_args({"--json", "x", "--json", "--wait"}, {}, {"--json", "--wait"});
  EXPECT_EQ(p.flags.count("--json"), 2u);
  EXPECT_EQ(p.flags.count("--wait"), 1u);
}

TEST(ParseArgs, PositionalForms) {
  const ParsedArgs p = parse_args({"-", "-5", "--", "--queue", "x"}, {"--queue"}, {});
  EXPECT_EQ(p.positional, (Args{"-", "-5", "--queue", "x"}));
  EXPECT_TRUE(p.options.empty());
}

TEST(ParseArgs, ShortOptions) {
  const ParsedArgs p = parse_args({"-n", "3", "-f"}, {"n"}, {"-f"});
  EXPECT_EQ(p.options.at("n"), Args{"3"});
  EXPECT_TRUE(p.flags.count("-f"));
}

TEST(ParseArgs, Errors) {
  EXPECT_THROW(parse_args({"--nope"}, {"--queue"}, {}), ConfigError);
  EXPECT_THROW(parse_args({"--queue"}, {"--queue"}, {}), ConfigError);
  EXPECT_THROW(parse_args({"--follow=yes"}, {}, {"--follow"}), ConfigError);
  try {
    parse_args({"--bogus=1"}, {}, {});
    FAIL() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--bogus"), std::string::npos);
  }
}

// From a mutation test of config.cpp: cases no test above told apart.

// An integer setting's bounds are allowed, from a flag and from the file.
TEST(WorkerConfig, IntegerBoundsAreInclusive) {
  EXPECT_EQ(parse_worker_config({"--concurrency", "1"}, {}).concurrency, 1);
  EXPECT_EQ(parse_worker_config({"--concurrency", "1024"}, {}).concurrency, 1024);
  TempConfig file(R"({"finish_batch": 1, "sql_steps": 1024})");
  const WorkerConfig c = parse_worker_config({"--config", file.path()}, {});
  EXPECT_EQ(c.finish_batch, 1);
  EXPECT_EQ(c.sql_steps, 1024);
}

// A file's queue name and an action's path are never empty; an action's
// env name holds no NUL (it would end the name the process is given).
TEST(WorkerConfig, EmptyNamesRefused) {
  {
    TempConfig file(R"({"queues": ["a", ""]})");
    EXPECT_NE(error_of({"--config", file.path()}).find("a non-empty array of queue names"), std::string::npos);
  }
  {
    TempConfig file(R"({"actions": {"a": {"path": "/a", "env": ["X\u0000Y"]}}})");
    const std::string msg = error_of({"--config", file.path()});
    EXPECT_NE(msg.find("\"env\": expected variable names"), std::string::npos) << msg;
  }
  EXPECT_NE(error_of({"--action", "a="}).find("expected NAME=PATH"), std::string::npos);
  EXPECT_NE(error_of({}, {{"BGEXEC_ACTIONS", "a=/x,b="}}).find("expected NAME=PATH"), std::string::npos);
}

// A bare "--" is no flag of the worker's.
TEST(WorkerConfig, BareDoubleDashIsUnexpected) {
  EXPECT_EQ(error_of({"--"}), "unexpected argument \"--\"");
}

// A negative number, ".5" included, is a positional argument; a name
// registered without dashes is --name (or -n for one letter), never -name.
TEST(ParseArgs, NegativeNumbersAndSingleDash) {
  const ParsedArgs p = parse_args({"-.5", "-0.5"}, {}, {});
  EXPECT_EQ(p.positional, (Args{"-.5", "-0.5"}));
  EXPECT_THROW(parse_args({"-after", "5"}, {"after"}, {}), ConfigError);
  EXPECT_EQ(parse_args({"--after", "5"}, {"after"}, {}).options.at("after"), Args{"5"});
}

}  // namespace
}  // namespace bgexec::core
