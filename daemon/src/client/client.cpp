// Client subcommands: submit, status, jobs, tail, stop, resume, retry,
// queues, pause-queue, resume-queue, configure-queue, workers, schedule,
// unschedule, schedules, purge.
// Each runs one coroutine on an io_context over one pg::Connection.
#include "client/client.hpp"

#include "core/events_page.hpp"
#include "core/backoff.hpp"
#include "core/config.hpp"
#include "core/duration.hpp"
#include "core/json_input.hpp"
#include "core/many.hpp"
#include "core/number.hpp"
#include "core/output.hpp"
#include "core/read_capped.hpp"
#include "core/suggest.hpp"
#include "core/timestamp.hpp"
#include "core/utf8.hpp"
#include "pg/connection.hpp"
#include "util/event.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <optional>
#include <set>
#include <streambuf>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

namespace bgexec::client {

namespace asio = boost::asio;
using nlohmann::json;
using namespace boost::asio::experimental::awaitable_operators;

namespace {

// Each command and the options it takes besides --db and --json, as its
// usage line gives them: another command's option is refused (exit 2), not
// ignored.
const std::map<std::string, std::set<std::string>> command_options = {
    {"submit",
     {"--queue", "--priority", "--max-attempts", "--timeout", "--run-after", "--idempotency-key",
      "--unique-key", "--concurrency-key", "--wait", "--follow"}},
    {"status", {}},
    {"jobs", {"--queue", "--kind", "--status", "--limit", "--before"}},
    {"tail", {"--from"}},
    {"stop", {"--queue", "--kind", "--status", "--limit"}},
    {"resume", {}},
    {"retry", {"--queue", "--kind", "--status", "--limit"}},
    {"reschedule", {"--run-after", "--priority"}},
    {"queues", {}},
    {"pause-queue", {}},
    {"resume-queue", {}},
    {"configure-queue",
     {"--max-queued", "--max-running", "--max-running-per-key", "--retry-base", "--retry-cap", "--rate-limit",
      "--rate-period", "--default-max-attempts", "--default-timeout"}},
    {"workers", {"--all"}},
    {"schedule",
     {"--queue", "--priority", "--max-attempts", "--timeout", "--concurrency-key", "--time-zone", "--no-overlap"}},
    {"unschedule", {}},
    {"schedules", {}},
    {"pause-schedule", {}},
    {"resume-schedule", {}},
    {"run-schedule", {"--wait", "--follow"}},
    {"purge", {"--batch", "--status"}}};

constexpr const char* usage_text = R"(usage:
  bgexec submit KIND [JSON|@FILE] [--queue Q] [--priority N] [--max-attempts N]
                [--timeout DUR|none] [--run-after TIMESTAMP|+DUR] [--idempotency-key K]
                [--unique-key K] [--concurrency-key K] [--wait | --follow]
  bgexec status ID
  bgexec jobs [--queue Q] [--kind K] [--status S[,S...]] [--limit N] [--before ID]
  bgexec tail ID [--from SEQ]
  bgexec stop ID
  bgexec stop [--queue Q] [--kind K] [--status S[,S...]] [--limit N]
  bgexec resume ID [JSON|@FILE]
  bgexec retry ID
  bgexec retry [--queue Q] [--kind K] [--status S[,S...]] [--limit N]
  bgexec reschedule ID [--run-after TIMESTAMP|+DUR] [--priority N]
  bgexec queues
  bgexec pause-queue NAME
  bgexec resume-queue NAME
  bgexec configure-queue NAME [--max-queued N|none] [--max-running N|none] [--max-running-per-key N|none]
                  [--retry-base DUR] [--retry-cap DUR] [--rate-limit N|none] [--rate-period DUR]
                  [--default-max-attempts N] [--default-timeout DUR|none]
  bgexec workers [--all]
  bgexec schedule NAME CRON KIND [JSON|@FILE] [--queue Q] [--priority N]
                  [--max-attempts N] [--timeout DUR|none] [--concurrency-key K]
                  [--time-zone TZ] [--no-overlap]
  bgexec unschedule NAME
  bgexec pause-schedule NAME
  bgexec resume-schedule NAME
  bgexec run-schedule NAME [--wait | --follow]
  bgexec schedules
  bgexec purge OLDER_THAN [--batch N] [--status S[,S...]]
Common options: --db CONNINFO (else BGEXEC_DB, else libpq PG* variables), --json.
DUR: seconds or 500ms/30s/5m/2h, or an interval the server reads (2d, '1 day').
--timeout none (or 0): no timeout, whatever the queue's --default-timeout.
submit prints the job id; --wait waits for the end quietly, --follow shows steps
and logs live.  jobs lists your jobs, newest first (--limit 1-500, default
50); when there are more, the last line says which --before shows the next ones.
--status S[,S...]: any of queued, running, suspended, completed, failed,
cancelled and timed_out.  stop and retry with --queue, --kind
or --status instead of an ID act on every one of your jobs that matches
(at least one of the three; --limit N: at most N, oldest first), in
transactions of 500 jobs, and print how many: stop on queued, suspended
and running jobs by default, retry on failed and timed_out ones (name
cancelled in --status to re-run cancelled jobs too).  reschedule moves a
queued job of yours to another --run-after (a past time is now) or
--priority, and prints when it runs.  pause-queue stops workers claiming a
queue's jobs (submits still queue them), resume-queue lets them claim again,
configure-queue sets its caps, rate limit (at most N jobs started per
--rate-period, default 1s), retry backoff (none removes a cap) and what a
job submitted without --max-attempts or --timeout gets (1 and none
remove those); each
prints the queue's settings, and needs an administrator (configure_queue is
not granted to bgexec_client).  workers lists the live workers (--all:
the stopped and silent ones too) with their jobs in flight.  tail exits once
the job's last event is a terminal or suspended one.  Text output escapes the
control characters a job's output or error holds (\r, \x1b); --json prints
them as stored.  schedule creates or replaces a recurring job: CRON is five
fields (minute hour day-of-month month day-of-week) or @hourly/@daily/...,
read on the clock of --time-zone (default UTC); --no-overlap skips a run
while the last one's job is unfinished.  It prints the first run, in UTC.
pause-schedule stops a schedule firing, keeping it; resume-schedule lets it fire
again from its next run after now (the runs missed while paused do not fire).
run-schedule submits a schedule's job now, out of turn, and prints its id as
submit does.  purge deletes your terminal jobs (a superuser's: everyone's)
finished longer ago than OLDER_THAN (DUR, or an interval such as
"30 days"), with their events, oldest first, in transactions of --batch
jobs (default 1000, up to 100000), and prints how many; an error keeps the
batches before it.  --status: only jobs that ended so (completed, failed,
cancelled, timed_out; comma-separated).
Exit codes: 0 ok / completed; 1 failed, cancelled or timed out (or resume/retry
was refused); 2 usage; 3 database error; 4 job not found; 5 suspended; 6 output
could not be written; 141 (quietly) the output's reader has gone.  stop
exits 0 whenever the job exists and prints what it found: "stop requested"
for a running job (its worker ends it as cancelled), else the job's status;
stop and retry of many exit 0 when each batch went through, however many
jobs matched.
unschedule, pause-schedule, resume-schedule and run-schedule exit 4 when
there is no such schedule.
)";

struct Usage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// stdout of a client command is core::OutBuf (core/output.hpp): a failed
// write is an exit status, never lost.
using core::check_output;
using core::OutBuf;
using core::OutputError;

// While follow waits with nothing to print: a pipe whose reader has gone
// reports POLLERR on its write end (`bgexec tail ID | head -1` of a job
// quiet for hours), noticed before the next event would be written; and
// by --wait, which prints only at the job's end (`submit --wait | true`
// waited out the whole job).
void check_reader() {
  pollfd p{STDOUT_FILENO, 0, 0};
  if (::poll(&p, 1, 0) == 1 && (p.revents & POLLERR)) throw OutputError(EPIPE);
}

bool terminal(const std::string& kind) {
  return kind == "completed" || kind == "failed" || kind == "cancelled" || kind == "timed_out";
}

int exit_for(const std::string& status) {
  if (status == "completed") return ok;
  if (status == "suspended") return suspended;
  if (terminal(status)) return job_failed;
  return ok;
}

// What one jsonb holds (256 MiB); an @FILE or @- argument larger than that
// is refused once read that far, never the server's to refuse.
constexpr std::size_t max_json_arg = std::size_t{256} << 20;

// The whole of `fd` (`name` in messages: the path, or - for stdin), up to
// max_json_arg (core::read_capped); past it, a Usage error.  A 300 MB file
// took 1.1 GB and 20 s only for the server to refuse it, and a
// stringstream swallowed an allocation failure, the text cut short read as
// invalid JSON.
std::string read_capped(int fd, const std::string& name) {
  auto r = core::read_capped(fd, max_json_arg);
  using Status = core::CappedRead::Status;
  auto fail = [&](const std::string& why) { return Usage("cannot read " + name + ": " + why); };
  switch (r.status) {
    case Status::ok:
      return std::move(r.text);
    case Status::too_large:
      throw fail("larger than 256 MiB");
    case Status::out_of_memory:
      throw fail("out of memory");
    case Status::failed:
    case Status::not_regular:
      break;
  }
  throw fail(std::strerror(r.error));
}

// JSON argument: inline text, @FILE, or @- for stdin.  Checked here, and
// passed on as given: numbers are stored as written (jsonb keeps any
// precision), where a round trip through a double turned
// 123456789012345678901234567890 into 1.2345678901234568e+29 (the gateway
// passes its bodies on the same way).
std::string json_arg(const std::string& arg) {
  std::string text = arg;
  if (!arg.empty() && arg[0] == '@') {
    if (arg == "@-") {
      text = read_capped(STDIN_FILENO, "-");
    } else {
      const std::string path = arg.substr(1);
      if (path.empty()) throw Usage("@ needs a file name (@FILE), or @- for stdin");
      std::error_code ec;
      // (a directory opens, and reads as nothing: "invalid JSON:")
      if (std::filesystem::is_directory(path, ec)) throw Usage("cannot read " + path + ": it is a directory");
      struct File {  // closed however the read ends
        int fd;
        ~File() {
          if (fd >= 0) ::close(fd);
        }
      } f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
      if (f.fd < 0) throw Usage("cannot read " + path + ": " + std::strerror(errno));
      text = read_capped(f.fd, path);
    }
    // A file saved with a UTF-8 byte order mark (RFC 8259 lets a reader
    // ignore it): nlohmann skips it, the server refused it.
    if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
  }
  // Nested past the limit, a document would overflow the stack when written
  // back out (core/json_input.hpp); a NUL is refused by jsonb; a key given
  // twice is refused, as the gateway refuses it: of its two values one would
  // win unnoticed.
  auto in = core::parse_json_input(text, core::max_json_depth, core::DuplicateKeys::refuse);
  if (in.error == core::JsonInput::Error::too_deep)
    throw Usage("JSON nested deeper than " + std::to_string(core::max_json_depth) + " levels");
  if (in.error == core::JsonInput::Error::duplicate_key)
    throw Usage("duplicate key " + core::dump(in.key) + " in the JSON argument" +
                (in.path.empty() ? "" : " at " + in.path));
  // The parser's message names the place and, for 1e400, the number past a
  // double's range (the text itself was echoed, invalid UTF-8 included).
  if (!in) {
    // A bare word (hello, yes) is text the shell passed unquoted for JSON:
    // say how to write it, where the parser's "invalid literal; last read:
    // 'h'" told a newcomer nothing.
    const auto first = text.find_first_not_of(" \t\r\n");
    const unsigned char c = first == std::string::npos ? 0 : static_cast<unsigned char>(text[first]);
    if (std::isalpha(c) && std::string_view(text).substr(first, 4) != "true" &&
        std::string_view(text).substr(first, 5) != "false" && std::string_view(text).substr(first, 4) != "null")
      throw Usage("invalid JSON: " + core::visible(text.substr(first, std::min<std::size_t>(text.size() - first, 40))) +
                  " is no JSON value: an object is written '{\"key\": \"value\"}', text as a JSON string, "
                  "'\"hello\"'");
    throw Usage("invalid JSON: " + in.message);
  }
  if (core::contains_nul(in.value)) throw Usage("JSON holds a NUL character (\\u0000), which PostgreSQL cannot store");
  return text;
}

using core::parse_integer;

std::int64_t parse_id(const std::string& s) {
  auto v = parse_integer(s, 1, INT64_MAX);
  if (!v) throw Usage("invalid job id \"" + s + "\"");
  return *v;
}

// An integer option's value in [lo, hi]; a Usage error names the option.
long long int_option(const std::string& option, const std::string& value, long long lo, long long hi) {
  auto v = parse_integer(value, lo, hi);
  if (!v)
    throw Usage(option + ": expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi) +
                ", got \"" + value + "\"");
  return *v;
}

// A json/jsonb column's value; text that does not parse (invalid UTF-8 from a
// SQL_ASCII database) is kept as a string rather than thrown.
json db_json(const std::optional<std::string>& text) {
  if (!text) return nullptr;
  // (nested past core::max_stored_json_depth: the text, as Result::to_json keeps it)
  auto in = core::parse_json_input(*text, core::max_stored_json_depth);
  return in ? std::move(in.value) : json(*text);
}

// A JSON text without the blanks jsonb's output puts after ':' and ',';
// the start of one too (status: a value the server cut), as it is not parsed.
std::string compact_json_prefix(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      in_string = escaped || c != '"';
      escaped = !escaped && c == '\\';
    } else if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      continue;
    } else {
      in_string = c == '"';
    }
    out += c;
  }
  return out;
}

// A json/jsonb column's text, exactly as the database wrote it, without the
// blanks jsonb's output puts after ':' and ','; nullopt when it is no JSON
// (invalid UTF-8 from a SQL_ASCII database: db_json's string stands in).
// Numbers stay as stored, where nlohmann's double rounds any beyond 17
// digits or 2^64.
std::optional<std::string> exact_json(const std::optional<std::string>& text) {
  if (!text || !json::accept(*text)) return std::nullopt;
  return compact_json_prefix(*text);
}

// bgexec status's text form: payload, result and error are cut to
// status_cut bytes of compact JSON; the server sends status_fetch
// characters of each (left(x::text, n), as bgexec._json_prefix makes it).  Enough for the same output: jsonb's
// text puts at most one blank after each ':' or ',', which follows at least
// one other character, so status_fetch characters (as many bytes or more)
// are at least status_fetch / 2 bytes compacted, past status_cut.
constexpr std::size_t status_cut = 2000;
constexpr std::size_t status_fetch = 8192;
static_assert(status_fetch / 2 > status_cut);

// Whether the server cut this text (left() gave all status_fetch
// characters: the value may be longer).  Counted in characters, as left() does;
// a JSON string (its text starts with '"') it sends whole.
bool status_doc_cut(const std::string& text) {
  if (text.size() < status_fetch || text.front() == '"') return false;
  std::size_t chars = 0;
  for (char c : text) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return chars >= status_fetch;
}

// Compact JSON cut to max bytes, before a character, not inside one (a half
// character printed is invalid UTF-8 on the terminal); never throws on
// invalid UTF-8.
std::string short_json(const json& j, std::size_t max = 300) { return core::utf8_cut(core::dump(j), max, "..."); }

struct Session {
  pg::Connection conn;
  bool json_out = false;
  bool live = false;  // --follow display (vs quiet --wait)
  // The arguments the statement's parameters come from ($1 first), so a
  // value the server cannot convert is reported as that argument's fault.
  std::vector<std::string> arg_names;
  // Called as a follow of the job starts: Ctrl-C then says the job goes on.
  std::function<void(std::int64_t)> on_follow;
  // How a listing shows a time (pg::utc_iso): to the second in its text,
  // to the microsecond with --json.
  pg::Time time_digits() const { return json_out ? pg::Time::json : pg::Time::seconds; }
};

// A member of an event's data; null when the data is no object or has no
// such member.  Event data may have any shape (a worker role appends log,
// progress and step events of its own): it is shown, never thrown on.
json member(const json& d, const char* key) {
  if (!d.is_object()) return nullptr;
  auto it = d.find(key);
  return it == d.end() ? json() : *it;
}

// A string as itself, null as `absent`, anything else as compact JSON.
std::string text_of(const json& v, const std::string& absent) {
  if (v.is_string()) return v.get<std::string>();
  return v.is_null() ? absent : core::dump(v);
}

// A listing's cell on one line, its columns intact: each control character
// a blank — a byte below 0x20 (a tab, a newline, an ESC that would start a
// terminal sequence), DEL, and C1 (U+0080-U+009F: U+009B is CSI).
std::string one_line(std::string text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (core::c1_at(text, i)) {
      out += ' ';
      ++i;
    } else {
      out += c < 0x20 || c == 0x7F ? ' ' : static_cast<char>(c);
    }
  }
  return out;
}

// One readable line per event (logs: one line per log line).
void print_event(const json& e, bool as_json) {
  if (as_json) {
    std::cout << core::dump(e) << std::endl;
    check_output();
    return;
  }
  const std::string kind = e.value("kind", "");
  const json& d = e["data"];
  const json step_value = member(d, "step");
  const std::string step = step_value.is_string() ? step_value.get<std::string>() : "";
  std::ostringstream os;
  os << "[" << e.value("seq", 0) << "] ";
  if (kind == "started") {
    os << "started (attempt " << text_of(member(d, "attempt"), "?") << ", worker " << text_of(member(d, "worker"), "?")
       << ")";
  } else if (kind == "step_started") {
    os << "> " << step;
  } else if (kind == "step_completed" && member(d, "skipped") == true) {
    os << "skipped " << step << " (its if was false)";
  } else if (kind == "step_completed") {
    os << "ok " << step << " " << short_json(member(d, "output"));
  } else if (kind == "step_failed") {
    // Ended from outside (a stop, the job's timeout, a shutdown, a sibling's
    // failure) rather than failed: the worker's message says which.
    static const std::set<std::string> ended = {"stopped", "job_timeout", "worker_shutdown", "sibling_failed",
                                                "sleeping"};
    const json err = member(d, "error");
    const json reason = member(err, "reason");
    const json message = member(err, "message");
    if (reason.is_string() && ended.count(reason.get<std::string>()) && message.is_string())
      os << "ended " << step << ": " << message.get<std::string>();
    else
      os << "FAILED " << step << ": " << short_json(err);
  } else if (kind == "log") {
    std::string prefix = "  " + step + "|" + text_of(member(d, "stream"), "") + "| ";
    json lines = member(d, "lines");
    if (!lines.is_array()) lines = lines.is_null() ? json::array() : json::array({lines});
    std::string out;
    for (auto& l : lines) {
      // A CRLF line's CR is its line end, not a control to show.
      std::string line = text_of(l, "null");
      if (line.ends_with('\r')) line.pop_back();
      out += (out.empty() ? "" : "\n") + prefix + line;
    }
    std::cout << core::visible(out) << std::endl;
    check_output();
    return;
  } else if (kind == "progress") {
    const json progress = member(d, "progress");
    os << "progress " << step << " " << short_json(progress.is_null() ? d : progress);
  } else if (kind == "suspended") {
    const json prompt = member(d, "prompt");
    os << "suspended at " << step << ": " << core::dump(prompt.is_null() ? json("") : prompt) << "  (bgexec resume "
       << e.value("job_id", 0) << " JSON)";
  } else if (kind == "retry_scheduled" && member(d, "manual") == true) {
    os << "retry requested by " << text_of(member(d, "by"), "?") << " (it was "
       << text_of(member(d, "previous_status"), "?") << ")";
  } else if (kind == "retry_scheduled" && member(d, "delay_ms").is_number()) {
    // "retry in 0.3 s after attempt 1: boom", as the database scheduled it
    const json err = member(d, "error");
    const json message = member(err, "message");
    os << "retry in " << core::seconds_text(member(d, "delay_ms").get<double>() / 1000) << " s after attempt "
       << text_of(member(d, "attempt"), "?") << ": " << (message.is_string() ? message.get<std::string>() : short_json(err));
  } else if (kind == "rescheduled") {
    // "rescheduled by alice: run_after 2026-12-08T03:00:00.000000Z, priority 5"
    os << "rescheduled by " << text_of(member(d, "by"), "?") << ": run_after " << text_of(member(d, "run_after"), "?")
       << ", priority " << text_of(member(d, "priority"), "?");
  } else if (kind == "stop_requested" && member(d, "by").is_string()) {
    os << "stop requested by " << member(d, "by").get<std::string>();
  } else if (kind == "resumed") {
    const json by = member(d, "by");
    os << "resumed" << (step.empty() ? "" : " at " + step) << (by.is_string() ? " by " + by.get<std::string>() : "")
       << ": " << short_json(member(d, "input"));
  } else if (kind == "worker_lost" && member(d, "message").is_string()) {
    os << "worker lost: " << member(d, "message").get<std::string>();
  } else if (kind == "completed") {
    os << "completed " << short_json(member(d, "result"), 2000);
  } else if (terminal(kind)) {
    const json err = member(d, "error");
    const json message = member(err, "message");
    os << kind << ": " << (message.is_null() ? short_json(err) : core::dump(message));
  } else {
    os << kind << " " << short_json(d);
  }
  std::cout << core::visible(os.str()) << std::endl;
  check_output();
}

json row_event(const pg::Result& r, int i) {
  json e = {{"job_id", std::stoll(r.get(i, "job_id").value_or("0"))},
            {"seq", std::stoi(r.get(i, "seq").value_or("0"))},
            {"kind", r.get(i, "kind").value_or("")},
            {"created_at", r.get(i, "created_at").value_or("")}};
  // Numbers as stored (core::dump writes them back so).  Data no double
  // reads (1e400, appended by a worker role of the user's own), or nested
  // past core::max_stored_json_depth, is the string of its text, as status
  // prints such a result; it was replaced by {}.
  const std::string text = r.get(i, "data").value_or("{}");
  auto d = core::parse_json_input(text, core::max_stored_json_depth, core::DuplicateKeys::last_wins,
                                  core::Numbers::exact);
  e["data"] = d ? std::move(d.value) : json(text);
  return e;
}

// Before follow waits for job `id` (submit and run-schedule with --wait or
// --follow, tail), and after status shows it (waiting false, no "waiting
// anyway"): a note on stderr when the job is queued where nothing
// will claim it, its queue paused or no live worker's (a typo in --queue,
// the workers down), so the wait does not look like a hang.  It waits
// anyway: a worker may come.  Live as queue_stats.workers counts them.  A
// job running already gets no note, nor one the role cannot see.
asio::awaitable<void> note_unclaimed(Session& s, std::int64_t id, bool waiting = true) {
  pg::Params ip = {std::to_string(id)};
  std::optional<pg::Result> r;
  try {
    // queue_stats, not the worker table: clients may read the view only.
    // pg_catalog's = of enums (pg/connection.hpp: built-ins a user could shadow).
    r = co_await s.conn.query(
        "SELECT s.queue, s.paused, s.workers FROM bgexec.queue_stats s"
        " WHERE s.queue = (SELECT j.queue FROM bgexec.job j"
        "                   WHERE j.id = $1 AND j.status OPERATOR(pg_catalog.=) 'queued')",
        ip);
  } catch (const pg::Error&) {
    co_return;  // only a note: the wait reports what is wrong with the connection
  }
  if (r->rows() == 0) co_return;
  const std::string queue = r->get(0, 0).value_or("");
  const std::string tail = waiting ? "; waiting for job " + std::to_string(id) + " anyway" : "";
  if (r->get(0, 1) == "t")
    std::cerr << "note: queue " << queue << " is paused (bgexec resume-queue " << queue << ")" << tail << std::endl;
  else if (r->get(0, 2) == "0")
    std::cerr << "note: no live worker claims from queue " << queue << " (bgexec workers lists them)" << tail
              << std::endl;
}

// Follows a job's events after `from`: LISTEN first, then replay, then live
// (notifications, with a 1 s poll as a fallback); filtering by seq makes the
// seam gapless and duplicate-free.  Returns the exit code of the ending
// event.  from_given: `from` is the user's (tail --from), checked against
// the job's last event.
asio::awaitable<int> follow(Session& s, std::int64_t id, int from, bool print, bool from_given = false) {
  if (s.on_follow) s.on_follow(id);
  int last = from;
  std::string ending;
  bool checked_status = false;
  // Read the job row again, before the next page: after a reconnect or a
  // poll.  Before: the page would print the new events past the position
  // of a log rewound and written past it again.
  bool recheck = false, check_first = false;
  bool listening = false;
  std::optional<std::string> last_created;  // created_at of the event at `last`, once read
  // A page at a time: the rest of a long log in one result held it all in
  // memory (100 MB for 500 000 events) before the first line was printed.
  // Cut by size too, as the gateway's streams: a page of a thousand steps'
  // outputs of a megabyte took tail to 310 MB.
  constexpr int page = 1000;
  static const std::string page_sql = core::events_page_sql(256 * 1024);
  // A lost connection (a restart, a failover) is no end: the events are in
  // the database, and the follow goes on from its cursor once it reaches
  // it again, as the gateway's streams do.  Retried with backoff, 0.2 s
  // doubling to 5 s, a line on stderr each way.
  // A session never opened (a wrong role, database or host) is no lost
  // one: exit 3, as every other command.
  core::Backoff backoff(std::chrono::milliseconds(200), std::chrono::seconds(5));
  bool lost = false;
  bool opened = s.conn.connected();
  // The wait for a notification, its error kept: operator|| waits for the
  // first branch to *succeed*, so a connection lost in the wait was
  // dropped when the poll timer fired, and the next query connected again
  // without LISTEN (the follow went on at the 1 s poll, without a word).
  auto notified = [&s]() -> asio::awaitable<std::pair<std::vector<pg::Notification>, std::exception_ptr>> {
    std::pair<std::vector<pg::Notification>, std::exception_ptr> out;
    try {
      out.first = co_await s.conn.wait_notifications();
    } catch (const pg::Error&) {
      out.second = std::current_exception();
    }
    co_return out;
  };
  for (;;) {
    if (lost) {
      check_reader();
      asio::steady_timer t(co_await asio::this_coro::executor, backoff.next());
      co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    try {
      if (!listening) {
        // A hot standby refuses LISTEN (25006): the poll alone, there.
        try {
          co_await s.conn.query("LISTEN bgexec_events");
        } catch (const pg::Error& e) {
          if (e.sqlstate() != "25006") throw;
        }
        listening = true;
        opened = true;
        if (lost) std::cerr << "bgexec: reconnected; following job " << id << " from event " << last << std::endl;
        if (lost) recheck = check_first = true;  // a failover may have rewound the log
        lost = false;
        backoff.reset();
      }
      check_reader();
      if (!check_first) {
        pg::Params params = {std::to_string(id), std::to_string(last), std::to_string(page)};
        auto r = co_await s.conn.query(page_sql, params);
        // The same on every row: how many events the page's query read.
        const long long fetched =
            r.rows() > 0 ? parse_integer(r.get(0, "fetched").value_or("0"), 0, page).value_or(0) : 0;
        for (int i = 0; i < r.rows(); ++i) {
          json e = row_event(r, i);
          if (e["seq"].get<int>() <= last) continue;
          last = e["seq"].get<int>();
          last_created = r.get(i, "created_at");
          if (print) print_event(e, s.json_out);
          std::string k = e["kind"];
          ending = terminal(k) || k == "suspended" ? k : "";  // a later `resumed` reopens it
        }
        // More written already: the next page at once.  Before the end: a
        // page ending on an old terminal or suspended event (a retry, a
        // resume after it) is not the log's end, which tail took it for when
        // the event fell last on a full page.
        if (r.rows() >= page || fetched > r.rows()) continue;
        if (!ending.empty()) co_return exit_for(ending);
      }
      if (!checked_status || recheck) {
        // Started after the end (--from at the last event): the job row says how it ended.
        const bool first = !checked_status;
        checked_status = true;
        recheck = false;
        const bool before_page = check_first;
        check_first = false;
        pg::Params job_params = {std::to_string(id), std::to_string(last), last_created};
        auto st = co_await s.conn.query(core::rewind_check_sql(), job_params);
        if (st.rows() == 0) co_return not_found;
        std::string status = st.get(0, 0).value_or("");
        const long long last_seq =
            parse_integer(st.get(0, 1).value_or("0"), 0, std::numeric_limits<int>::max()).value_or(0);
        // A cursor past the last event would wait for seqs the job may never
        // reach, even after it ends (the gateway answers 400 alike).  Only
        // the user's: event rows past last_seq (written around the API) are
        // replayed, and were refused as "--from 3" nobody had given.
        if (first && from_given && from > last_seq)
          throw Usage("--from " + std::to_string(from) + " is past job " + std::to_string(id) + "'s last event (" +
                      std::to_string(last_seq) + ")");
        // Rewound (core::rewind_check_sql): an asynchronous failover lost
        // the newest events and the job's next ones took their seqs.
        // Waiting for seqs past the position hung, even after the job
        // ended below it, and skipped the new events: said on stderr, the
        // follow goes on from the first event that is new.
        if (auto resume = st.get(0, 2)) {
          const long long r = parse_integer(*resume, 0, std::numeric_limits<int>::max()).value_or(0);
          std::cerr << "bgexec: job " << id << "'s event log was rewound by a failover: this follow was at event "
                    << last << ", the job's last event is now " << last_seq << "; events after " << r
                    << " are not the ones this follow read, following from there" << std::endl;
          last = static_cast<int>(r);
          last_created.reset();
          ending.clear();
          continue;
        }
        // Ended (or suspended) with every event up to last_seq read: the job
        // row's status is final, whatever rows follow last_seq.
        if ((terminal(status) || status == "suspended") && last_seq <= last) co_return exit_for(status);
        if (first) co_await note_unclaimed(s, id);
        if (before_page) continue;
      }
      asio::steady_timer poll(co_await asio::this_coro::executor, std::chrono::seconds(1));
      // Wake on our job's notification or after the poll interval.
      for (bool mine = false; !mine;) {
        auto res = co_await (notified() || poll.async_wait(asio::as_tuple(asio::use_awaitable)));
        if (res.index() == 1) {
          recheck = check_first = true;  // the poll reads the job row too (a rewind without a reconnect)
          break;
        }
        auto& [batch, error] = std::get<0>(res);
        if (error) std::rethrow_exception(error);
        for (auto& n : batch) {
          auto colon = n.payload.find(':');
          if (n.payload.substr(0, colon) == std::to_string(id)) mine = true;
        }
      }
    } catch (const pg::Error& e) {
      if (!e.connection_lost() || !opened) throw;
      if (!lost)
        std::cerr << "bgexec: connection lost (" << (e.fields().primary.empty() ? e.what() : e.fields().primary)
                  << "); reconnecting" << std::endl;
      lost = true;
      listening = false;
      s.conn.close();
    }
  }
}

// An option's value, if given and not empty (given at most once: run() refuses two).
std::optional<std::string> option(const core::ParsedArgs& a, const std::string& k) {
  auto it = a.options.find(k);
  if (it == a.options.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

// A duration option's seconds as an interval literal.  Past what the
// literal holds (a 70-digit number) a usage error naming the option, as
// the server's own "out of range" for a shorter one is; it was exit 3,
// naming nothing.  Past what an interval's time holds (2^63 microseconds)
// too: the server's error quoted the literal this made of it
// ("10000000000000000905969664 seconds"), not what was given.
std::string interval_option(const std::string& name, double secs, const std::string& given) {
  constexpr double max_interval_s = 9223372036854.775807;  // 2^63 - 1 microseconds
  const auto out_of_range = [&] { return Usage(name + ": interval field value out of range: \"" + given + "\""); };
  if (std::fabs(secs) >= max_interval_s) throw out_of_range();
  try {
    return core::to_pg_interval(secs);
  } catch (const std::invalid_argument&) {
    throw out_of_range();
  }
}

// The job fields submit and schedule share, checked here, so a typo is a
// usage error naming the option, not a database error.
struct JobOptions {
  std::string queue;
  long long priority = 0;
  // Not given: NULL, the queue's default (configure_queue), else 1.
  std::optional<std::string> max_attempts, timeout, concurrency_key;
};

JobOptions job_options(const core::ParsedArgs& a) {
  JobOptions o;
  o.queue = option(a, "--queue").value_or("default");
  if (auto v = option(a, "--priority")) o.priority = int_option("--priority", *v, INT32_MIN, INT32_MAX);
  if (auto v = option(a, "--max-attempts"))
    o.max_attempts = std::to_string(int_option("--max-attempts", *v, 1, INT32_MAX));
  // --timeout none: 0, no timeout whatever the queue's default (as
  // configure-queue --default-timeout none).
  if (auto t = option(a, "--timeout")) {
    auto secs = *t == "none" ? std::optional<double>(0) : core::parse_seconds(*t);
    o.timeout = secs ? interval_option("--timeout", *secs, *t) : *t;
  }
  o.concurrency_key = option(a, "--concurrency-key");
  return o;
}

asio::awaitable<int> report_job(Session& s, std::int64_t id, const core::ParsedArgs& a,
                                 bool deduplicated = false);

// --run-after TIMESTAMP|+DUR (submit, reschedule): the time as ISO text
// (run_after), or the delay after now() on the database's clock (run_in);
// neither when not given.
struct RunAfter {
  std::optional<std::string> run_after, run_in;
};

RunAfter run_after_option(const core::ParsedArgs& a) {
  std::optional<std::string> run_after, run_in;
  if (auto t = option(a, "--run-after")) {
    if (!t->empty() && (*t)[0] == '+') {
      // Seconds or 500ms/30s/5m/2h/1d, a day 86 400 s (core::parse_delay),
      // else PostgreSQL's interval (`+1 day`, `+2 weeks`), its error naming
      // --run-after, taken as that many seconds (extract(epoch): a day
      // 24 h, a month 30 days): a calendar day's length followed the
      // session's TimeZone (23, 24 or 25 h across a DST night by PGTZ).
      auto secs = core::parse_delay(t->substr(1));
      run_in = secs ? interval_option("--run-after", *secs, *t) : t->substr(1);
    } else {
      // ISO 8601 only, read here: the server read "08/12/2026" by the
      // session's DateStyle and an offset-less time in its TimeZone (PGTZ,
      // the role's, the server's), not the user's.  Without an offset, in
      // the user's local time zone (TZ, else /etc/localtime), as `date`
      // reads it; a time a DST change skips or repeats needs an offset.
      const auto iso = core::parse_iso_time(*t);
      if (!iso)
        throw Usage("--run-after: \"" + *t +
                    "\" is not an ISO 8601 time (2026-12-08T03:00, 2026-12-08 03:00:00+05:30, "
                    "2026-12-08T03:00Z) nor +DUR (+30s, +5m, +2h, +1d)");
      auto local = iso->offset_minutes ? core::LocalResult{iso, ""} : core::resolve_local(*iso);
      if (!local.time) throw Usage("--run-after: \"" + *t + "\" " + local.error);
      run_after = core::iso_text(*local.time);
    }
  }
  return {run_after, run_in};
}

asio::awaitable<int> cmd_submit(Session& s, const core::ParsedArgs& a) {
  if (a.positional.empty() || a.positional.size() > 2) throw Usage("submit takes KIND [JSON|@FILE]");
  std::string payload = a.positional.size() > 1 ? json_arg(a.positional[1]) : "{}";
  auto opt = [&](const std::string& k) { return option(a, k); };
  JobOptions jo = job_options(a);
  auto [run_after, run_in] = run_after_option(a);
  s.arg_names = {"KIND",         "JSON",      "--queue",   "--priority",         "--run-after",
                 "--run-after",  "--max-attempts", "--timeout", "--idempotency-key", "--concurrency-key",
                 "--unique-key"};
  pg::Params p = {a.positional[0],
                  payload,
                  jo.queue,
                  std::to_string(jo.priority),
                  run_after,
                  run_in,
                  jo.max_attempts,
                  jo.timeout,
                  opt("--idempotency-key"),
                  jo.concurrency_key,
                  opt("--unique-key")};
  // With an idempotency or unique key, whether the job already existed, as the
  // gateway's 200 {"deduplicated": true} (_inserted_here: read after the
  // submit, so a concurrent first submit it waited for counts too).
  auto r = co_await s.conn.query(
      "SELECT s.id, NOT bgexec._inserted_here(s.id) FROM (SELECT bgexec.submit($1, $2::jsonb, queue => $3,"
      " priority => $4::int, run_after => coalesce($5::timestamptz,"
      " now() + make_interval(secs => date_part('epoch', coalesce($6::interval, '0')))),"
      " max_attempts => $7::int, timeout => $8::interval, idempotency_key => $9,"
      " concurrency_key => $10, unique_key => $11) AS id OFFSET 0) s",
      p);
  const std::int64_t id = std::stoll(r.get(0, 0).value_or("0"));
  const bool existed = (p[8] || p[10]) && r.get(0, 1) == std::optional<std::string>("t");
  if (existed && p[8])
    std::cerr << "bgexec submit: job " << id << " already has idempotency key "
              << core::visible(core::utf8_cut(*p[8], 200, "...")) << ": nothing new submitted\n";
  else if (existed)
    std::cerr << "bgexec submit: job " << id << " is active with unique key "
              << core::visible(core::utf8_cut(*p[10], 200, "...")) << ": nothing new submitted\n";
  co_return co_await report_job(s, id, a, existed);
}

// What submit and run-schedule print for the job they submitted, `id`, and
// with --wait or --follow the wait for its end; returns the exit code.
asio::awaitable<int> report_job(Session& s, std::int64_t id, const core::ParsedArgs& a, bool deduplicated) {
  bool wait = a.flags.count("--wait"), follow_flag = a.flags.count("--follow");
  json id_doc = {{"id", id}};
  if (deduplicated) id_doc["deduplicated"] = true;
  if (s.json_out && !follow_flag) {
    if (!wait) std::cout << id_doc.dump() << std::endl;
  } else if (follow_flag) {
    std::cout << (s.json_out ? id_doc.dump() : "submitted job " + std::to_string(id)) << std::endl;
  } else if (!wait) {
    std::cout << id << std::endl;
  }
  try {
    check_output();  // before a wait: the id is what a script keeps
  } catch (OutputError& e) {
    e.submitted = id;
    throw;
  }
  if (!wait && !follow_flag) co_return ok;
  int code = co_await follow(s, id, 0, follow_flag);
  if (!wait || follow_flag) co_return code;
  try {
    pg::Params ip = {std::to_string(id)};
    auto st = co_await s.conn.query("SELECT status::text, result, error FROM bgexec.job WHERE id = $1", ip);
    std::string status = st.get(0, 0).value_or("?");
    if (s.json_out) {
      // result and error as stored (exact_json)
      std::cout << "{\"id\":" << id << (deduplicated ? ",\"deduplicated\":true" : "")
                << ",\"status\":" << core::dump(json(status))
                << ",\"result\":" << exact_json(st.get(0, 1)).value_or(core::dump(db_json(st.get(0, 1))))
                << ",\"error\":" << exact_json(st.get(0, 2)).value_or(core::dump(db_json(st.get(0, 2)))) << "}"
                << std::endl;
    } else {
      std::cout << id << " " << status << std::endl;
      // Why, for a job that did not complete: its error's message (it
      // took a separate status to learn of an unknown action).
      const json err = db_json(st.get(0, 2));
      const json message = member(err, "message");
      if (status != "completed" && message.is_string())
        std::cerr << "bgexec: job " << id << " " << status << ": "
                  << core::visible(core::utf8_cut(message.get<std::string>(), 2000, "...")) << "\n";
    }
    check_output();
  } catch (OutputError& e) {
    // --wait prints the id only now: lost, the error names the job (it
    // exited 6 with no id anywhere), as a plain submit's does.
    e.submitted = id;
    throw;
  }
  co_return code;
}

asio::awaitable<int> cmd_status(Session& s, const core::ParsedArgs& a) {
  if (a.positional.size() != 1) throw Usage("status takes ID");
  const std::int64_t id = parse_id(a.positional[0]);
  pg::Params p = {std::to_string(id)};
  // Times in UTC ISO 8601 (pg::utc_iso), whatever the session's DateStyle
  // and TimeZone: to the millisecond in the text form, to the microsecond
  // (the value exactly) with --json.
  std::string times;
  for (const char* t : {"created_at", "started_at", "finished_at", "run_after", "deadline"})
    times += pg::utc_iso(t, s.json_out ? pg::Time::json : pg::Time::millis) + " AS " + t + ", ";
  // The text form prints at most status_cut bytes of payload, result and
  // error (a JSON string whole): the server sends no more than
  // status_fetch characters of each, not a whole result of many MB (a 57 MB
  // one took 3 s and 343 MB to print 2 kB).  --json prints them whole.
  // _json_prefix is left(x::text, n) without the rest of the text: left()
  // had the server write all 57 MB as text first (0.3-0.6 s).
  std::string docs = "payload, result, error";
  if (!s.json_out) {
    docs.clear();
    for (const char* d : {"payload", "result", "error"})
      docs += std::string(docs.empty() ? "" : ", ") + "CASE WHEN jsonb_typeof(" + d + ") = 'string' THEN " + d +
              "::text ELSE bgexec._json_prefix(" + d + ", " + std::to_string(status_fetch) + ") END AS " + d;
  }
  auto r = co_await s.conn.query(
      "SELECT id, kind, queue, status::text AS status, priority, attempt, max_attempts, timeout::text AS timeout, owner,"
      " lease_owner AS worker, " + times + "last_seq, " + docs + " FROM bgexec.job WHERE id = $1",
      p);
  if (r.rows() == 0) {
    // As tail, stop, resume and retry report it (the extension's P0002).
    std::cerr << "bgexec status: job " << id << " does not exist (SQLSTATE P0002)\n";
    co_return not_found;
  }
  json row = r.to_json(true)[0];
  // payload, result and error as stored (exact_json), the rest from row.
  auto exact = [&](const std::string& k) {
    return k == "payload" || k == "result" || k == "error" ? exact_json(r.get(0, k)) : std::nullopt;
  };
  // In the query's order (id, kind, queue, status first), not the JSON
  // object's sorted one, which put attempt first and status near the end.
  if (s.json_out) {
    std::string out = "{";
    for (int c = 0; c < r.columns(); ++c) {
      const std::string k = r.column_name(c);
      out += (out.size() > 1 ? "," : "") + core::dump(json(k)) + ":" + exact(k).value_or(core::dump(row[k]));
    }
    std::cout << out << "}" << std::endl;
  } else {
    for (int c = 0; c < r.columns(); ++c) {
      const std::string k = r.column_name(c);
      std::string text;
      if (k == "payload" || k == "result" || k == "error") {
        const auto raw = r.get(0, k);
        if (!raw) continue;
        if (status_doc_cut(*raw)) {
          text = core::utf8_cut(compact_json_prefix(*raw), status_cut, "...");
        } else {
          const json v = db_json(raw);
          if (v.is_null()) continue;
          text = v.is_string() ? v.get<std::string>()
                               : core::utf8_cut(exact_json(raw).value_or(core::dump(v)), status_cut, "...");
        }
      } else {
        const json& v = row[k];
        if (v.is_null()) continue;
        text = v.is_string() ? v.get<std::string>() : core::utf8_cut(core::dump(v), status_cut, "...");
      }
      std::cout << k << ": " << core::visible(text) << "\n";
    }
  }
  check_output();
  if (row.value("status", "") == "queued") co_await note_unclaimed(s, id, false);
  co_return exit_for(row.value("status", ""));
}

// --status's value (core::status_list): an unknown status is a usage
// error naming them all, for jobs, stop and retry alike (jobs passed it to
// the server, which refused it as the enum's input).
core::StatusList status_list(const std::string& v) {
  auto l = core::status_list(v);
  if (!l.error.empty()) throw Usage("--status: " + l.error);
  return l;
}

// jobs [--queue Q] [--kind K] [--status S[,S...]] [--limit N] [--before ID]: the caller's
// jobs, newest first, a page at a time (a client role sees its own, a
// superuser every role's), as GET /v1/jobs pages them: through
// bgexec._list_jobs, which reads the status and queue indexes for a tenant
// too (under row-level security the status test was no index condition).  One
// line per job, or with --json {"jobs": [...], "next_before": ID|null}; the
// payload and the result are left out (status ID shows them), the error
// kept: it is what a list of failed jobs is read for.
asio::awaitable<int> cmd_jobs(Session& s, const core::ParsedArgs& a) {
  if (!a.positional.empty()) throw Usage("jobs takes no arguments");
  long long limit = 50;
  if (auto v = option(a, "--limit")) limit = int_option("--limit", *v, 1, 500);
  std::optional<std::string> before;
  if (auto v = option(a, "--before")) before = std::to_string(int_option("--before", *v, 1, INT64_MAX));
  std::optional<std::string> statuses;
  if (auto v = option(a, "--status")) statuses = status_list(*v).array();
  s.arg_names = {"--queue", "--status", "--before", "--limit", "--kind"};
  // (a job read past the page says whether there is a next one)
  pg::Params p = {option(a, "--queue"), statuses, before, std::to_string(limit + 1), option(a, "--kind")};
  std::string when = pg::utc_iso("created_at", s.time_digits()) + " AS created_at, " +
                     pg::utc_iso("finished_at", s.time_digits()) + " AS finished_at";
  if (s.json_out) when += ", " + pg::utc_iso("started_at", s.time_digits()) + " AS started_at";
  auto r = co_await s.conn.query(
      "SELECT id, status::text AS status, queue, kind, attempt, max_attempts, priority, owner, " + when +
          ", error FROM bgexec._list_jobs($1::text, $2::bgexec.job_status[], $3::bigint, $4::int, $5::text)"
          " ORDER BY id DESC",
      p);
  json rows = r.to_json(true);
  json next = nullptr;
  if (static_cast<long long>(rows.size()) > limit) {
    rows.erase(rows.end() - 1);
    next = rows.back()["id"];
  }
  if (s.json_out) {
    std::cout << core::dump(json{{"jobs", rows}, {"next_before", next}}) << std::endl;
    co_return ok;
  }
  std::cout << "id\tstatus\tqueue\tkind\tattempt\tcreated_at\tfinished_at\terror\n";
  for (auto& row : rows) {
    const json& err = row["error"];
    const json message = member(err, "message");
    std::string error = err.is_null() ? "-" : message.is_string() ? message.get<std::string>() : short_json(err);
    error = one_line(core::utf8_cut(std::move(error), 200, "..."));
    std::cout << core::dump(row["id"]) << "\t" << text_of(row["status"], "-") << "\t" << text_of(row["queue"], "-")
              << "\t" << text_of(row["kind"], "-") << "\t" << core::dump(row["attempt"]) << "/"
              << core::dump(row["max_attempts"]) << "\t" << text_of(row["created_at"], "-") << "\t"
              << text_of(row["finished_at"], "-") << "\t" << error << "\n";
  }
  if (!next.is_null()) {
    // The next page's command with this one's filters: without them it
    // listed every job, 50 at a time.  (A row matched them, so each is a
    // queue or kind name, a status or a number: nothing to quote.)
    std::string more = "bgexec jobs";
    for (const char* name : {"--queue", "--kind", "--status", "--limit"})
      if (auto v = option(a, name)) more += std::string(" ") + name + " " + *v;
    std::cout << "(more: " << more << " --before " << core::dump(next) << ")\n";
  }
  check_output();
  co_return ok;
}

asio::awaitable<int> cmd_tail(Session& s, const core::ParsedArgs& a) {
  if (a.positional.size() != 1) throw Usage("tail takes ID");
  std::optional<int> from;
  if (auto it = a.options.find("--from"); it != a.options.end() && !it->second.empty())
    from = static_cast<int>(int_option("--from", it->second.back(), 0, INT32_MAX));
  co_return co_await follow(s, parse_id(a.positional[0]), from.value_or(0), true, from.has_value());
}

void report_many(std::ostream& out, bool as_json, bool retry, long long done, long long requested,
                 long long matched) {
  if (as_json) {
    json j = retry ? json{{"retried", done}, {"matched", matched}}
                   : json{{"cancelled", done}, {"stop_requested", requested}, {"matched", matched}};
    out << j.dump() << std::endl;
  } else if (retry) {
    out << "queued again: " << done << " of " << matched << " matching jobs" << std::endl;
  } else {
    out << "cancelled: " << done << ", stop requested: " << requested << " (running), of " << matched
        << " matching jobs" << std::endl;
  }
}

// stop or retry of many: every job of the caller's (row-level security: a
// client sees its own, a superuser every role's) that matches the filters,
// oldest first, in batches of 500, each its own transaction, so a long run
// holds no lock for long and a failure (a full queue's 53400 on retry) keeps
// the batches before it.  Keyset by id: a job acted on is never met again,
// even when it fails again meanwhile.
asio::awaitable<int> cmd_many(Session& s, const std::string& cmd, const core::ParsedArgs& a) {
  const bool retry = cmd == "retry";
  const auto& allowed = core::many_statuses(retry);
  std::string statuses = core::many_default_statuses(retry);
  if (auto v = option(a, "--status")) {
    statuses = status_list(*v).list;
    std::stringstream in(statuses);
    for (std::string st; std::getline(in, st, ',');)
      if (!allowed.count(st))
        throw Usage("--status: " + cmd + " acts on " + core::many_statuses_text(retry) + " jobs, got \"" + st + "\"");
  }
  long long left = INT64_MAX;
  if (auto v = option(a, "--limit")) left = int_option("--limit", *v, 1, INT64_MAX);
  s.arg_names = {"--queue", "--kind"};
  const std::string sql = core::many_sql(retry);
  long long done = 0, requested = 0, matched = 0;
  std::string last = "0";
  try {
    while (left > 0) {
      const long long batch = std::min<long long>(left, 500);
      pg::Params p = {option(a, "--queue"), option(a, "--kind"), statuses, last, std::to_string(batch)};
      auto r = co_await s.conn.query(sql, p);
      const long long n = std::stoll(r.get(0, 2).value_or("0"));
      if (n == 0) break;
      done += std::stoll(r.get(0, 0).value_or("0"));
      requested += std::stoll(r.get(0, 1).value_or("0"));
      matched += n;
      left -= n;
      last = r.get(0, 3).value_or(last);
      if (n < batch) break;
    }
  } catch (const pg::Error&) {
    // The batches before the error stay done: say how far it got.
    if (matched > 0) {
      std::cerr << "bgexec " << cmd << ": before the error below, ";
      report_many(std::cerr, false, retry, done, requested, matched);
    }
    throw;
  }
  report_many(std::cout, s.json_out, retry, done, requested, matched);
  co_return ok;
}

// purge OLDER_THAN [--batch N] [--status S,...]: bgexec.purge(older_than,
// max_jobs, statuses) again
// and again, each call its own transaction, until one deletes fewer than N:
// a large backlog never holds all its row locks and WAL in one transaction,
// runs beside the watchdog's retention and other purges without waiting
// for them (the batches pass over rows another transaction holds), and a
// failure or an interrupt keeps the batches before it.
asio::awaitable<int> cmd_purge(Session& s, const core::ParsedArgs& a) {
  if (a.positional.size() != 1) throw Usage("purge takes OLDER_THAN (30s, 5m, 2h, or an interval: \"30 days\")");
  const std::string& given = a.positional[0];
  const auto secs = core::parse_seconds(given);
  const std::string older_than = secs ? interval_option("OLDER_THAN", *secs, given) : given;
  long long batch = 1000;
  if (auto v = option(a, "--batch")) batch = int_option("--batch", *v, 1, 100000);
  std::optional<std::string> statuses;
  if (auto v = option(a, "--status")) {
    auto l = status_list(*v);
    for (const char* live : {"queued", "running", "suspended"})
      if (("," + l.list + ",").find(std::string(",") + live + ",") != std::string::npos)
        throw Usage("--status: purge deletes only jobs that ended: completed, failed, cancelled, timed_out (got " +
                    std::string(live) + ")");
    statuses = l.array();
  }
  s.arg_names = {"OLDER_THAN"};  // (text the server cannot read as an interval: exit 2)
  long long purged = 0;
  try {
    for (;;) {
      // (a named Params: a braced list around co_await is GCC 12's coroutine bug)
      pg::Params p = {older_than, std::to_string(batch), statuses};
      auto r = co_await s.conn.query("SELECT bgexec.purge($1::interval, $2::int, $3::bgexec.job_status[])", p);
      const long long n = std::stoll(r.get(0, 0).value_or("0"));
      purged += n;
      if (n < batch) break;
    }
  } catch (const pg::Error&) {
    if (purged > 0)
      std::cerr << "bgexec purge: before the error below, purged " << purged << (purged == 1 ? " job\n" : " jobs\n");
    throw;
  }
  if (s.json_out) std::cout << json{{"purged", purged}}.dump() << std::endl;
  else std::cout << "purged " << purged << (purged == 1 ? " job" : " jobs") << std::endl;
  co_return ok;
}

// reschedule ID [--run-after TIMESTAMP|+DUR] [--priority N]: bgexec.reschedule,
// a queued job of the caller's moved; prints the run_after it now has (UTC).
// A job that is not queued is the function's 55000, naming its status.
asio::awaitable<int> cmd_reschedule(Session& s, const core::ParsedArgs& a) {
  if (a.positional.size() != 1) throw Usage("reschedule takes ID");
  std::int64_t id = parse_id(a.positional[0]);
  auto [run_after, run_in] = run_after_option(a);
  std::optional<std::string> priority;
  if (auto v = option(a, "--priority")) priority = std::to_string(int_option("--priority", *v, INT32_MIN, INT32_MAX));
  if (!run_after && !run_in && !priority) throw Usage("reschedule takes ID and --run-after, --priority or both");
  s.arg_names = {"ID", "--run-after", "--run-after", "--priority"};
  pg::Params p = {std::to_string(id), run_after, run_in, priority};
  auto r = co_await s.conn.query(
      "SELECT " +
          pg::utc_iso("bgexec.reschedule($1::bigint, run_after => coalesce($2::timestamptz,"
                      " now() + make_interval(secs => date_part('epoch', $3::interval))), priority => $4::int)",
                      s.time_digits()) +
          " AS run_after",
      p);
  std::string at = r.get(0, 0).value_or("");
  if (s.json_out) std::cout << json{{"id", id}, {"run_after", at}}.dump() << std::endl;
  else std::cout << "job " << id << ": runs after " << at << std::endl;
  co_return ok;
}

asio::awaitable<int> cmd_simple(Session& s, const std::string& cmd, const core::ParsedArgs& a) {
  if ((cmd == "stop" || cmd == "retry") && a.positional.empty() &&
      (option(a, "--queue") || option(a, "--kind") || option(a, "--status")))
    co_return co_await cmd_many(s, cmd, a);
  if ((cmd == "stop" || cmd == "retry") && !a.options.empty())
    for (auto& [name, values] : a.options)
      if (name != "--db")
        throw Usage(a.positional.empty() ? name + " goes with --queue, --kind or --status (the jobs to " + cmd + ")"
                                         : cmd + " takes an ID or --queue, --kind and --status, not both");
  if (cmd == "resume" ? (a.positional.empty() || a.positional.size() > 2) : a.positional.size() != 1)
    throw Usage(cmd + (cmd == "resume"                    ? " takes ID [JSON|@FILE]"
                       : cmd == "stop" || cmd == "retry" ? " takes an ID, or --queue, --kind or --status (the jobs to " + cmd + ")"
                                                           : " takes ID"));
  std::int64_t id = parse_id(a.positional[0]);
  pg::Params p = {std::to_string(id)};
  std::string sql;
  if (cmd == "stop") {
    sql = "SELECT bgexec.stop($1)::text";
  } else if (cmd == "retry") {
    sql = "SELECT bgexec.retry($1)::text";
  } else {
    sql = "SELECT bgexec.resume($1, $2::jsonb)::text";
    p.push_back(a.positional.size() > 1 ? json_arg(a.positional[1]) : std::optional<std::string>());
  }
  auto r = co_await s.conn.query(sql, p);
  std::string v = r.get(0, 0).value_or("");
  int code = ok;
  std::string msg;
  if (cmd == "stop") {
    // The exit code says the request was accepted (the job exists), whatever
    // the status it found: stopping a finished job is a no-op, not a failure.
    msg = v == "running" ? "stop requested (the worker ends it as cancelled)" : v;
  } else if (v == "true") {
    msg = cmd == "resume" ? "resumed" : "queued again";
  } else {
    // Refused: the job's status says why ("job 3: not suspended" left the
    // user to find it).  Read after the refusal, apart: a job that moved
    // between is shown as it is now.
    code = job_failed;
    if (!s.json_out) {
      pg::Params ip = {std::to_string(id)};
      auto st = co_await s.conn.query("SELECT status::text FROM bgexec.job WHERE id = $1", ip);
      const std::string now = st.rows() > 0 ? st.get(0, 0).value_or("gone") : "gone";
      msg = " is " + now + (cmd == "resume" ? ", not suspended: nothing to resume"
                                            : ", not failed, cancelled or timed out: nothing to retry");
    }
  }
  // stop's result is the status it found, resume's and retry's whether they did it.
  json result = cmd == "stop" ? json(v) : json(v == "true");
  if (s.json_out) std::cout << json{{"id", id}, {"result", result}, {"ok", code == ok}}.dump() << std::endl;
  else if (code != ok) std::cout << "job " << id << msg << std::endl;
  else std::cout << "job " << id << ": " << msg << std::endl;
  co_return code;
}

// A listing's text form: a line of the column names, then a line per row,
// tab-separated.  A null is "-", a string itself, an array its elements
// comma-separated (a worker's queues, as --queue takes them), anything else
// its JSON; each on one line (one_line: a worker id or a schedule's error
// holding ESC or a newline broke the table and reached the terminal).
void print_table(const json& rows, std::initializer_list<const char*> cols) {
  const char* sep = "";
  for (const char* c : cols) std::cout << std::exchange(sep, "\t") << c;
  std::cout << "\n";
  for (auto& row : rows) {
    sep = "";
    for (const char* c : cols) {
      const json& v = member(row, c);
      std::string text;
      if (v.is_array())
        for (auto& e : v) text += (text.empty() ? "" : ",") + text_of(e, "-");
      else
        text = text_of(v, "-");
      std::cout << std::exchange(sep, "\t") << one_line(std::move(text));
    }
    std::cout << "\n";
  }
  check_output();
}

asio::awaitable<int> cmd_queues(Session& s, const core::ParsedArgs& a) {
  if (!a.positional.empty()) throw Usage("queues takes no arguments");
  auto r = co_await s.conn.query("SELECT * FROM bgexec.queue_stats ORDER BY queue");
  json rows = r.to_json(true);
  if (s.json_out) {
    std::cout << core::dump(rows) << std::endl;
    co_return ok;
  }
  print_table(rows, {"queue", "paused", "queued", "running", "suspended", "completed", "failed", "cancelled",
                    "timed_out", "oldest_queued_age", "max_queued", "max_running", "max_running_per_key", "workers",
                    "rate_limit", "rate_period"});
  co_return ok;
}

// pause-queue NAME, resume-queue NAME, configure-queue NAME [caps, backoff]:
// bgexec.configure_queue (administrators only), then the queue's settings as
// the call left them.  A cap is 0 or more, or none (configure_queue's
// negative: removed); configure-queue without an option is a usage error
// (configure_queue would only create the queue's row).
asio::awaitable<int> cmd_configure_queue(Session& s, const std::string& cmd, const core::ParsedArgs& a) {
  if (a.positional.size() != 1) throw Usage(cmd + " takes NAME");
  auto cap = [&](const std::string& name) -> std::optional<std::string> {
    auto v = option(a, name);
    if (!v) return std::nullopt;
    if (*v == "none") return "-1";
    auto n = parse_integer(*v, 0, INT32_MAX);
    if (!n) throw Usage(name + ": expected none or an integer from 0 to " + std::to_string(INT32_MAX) + ", got \"" + *v + "\"");
    return std::to_string(*n);
  };
  auto duration = [&](const std::string& name) -> std::optional<std::string> {
    auto v = option(a, name);
    if (!v) return std::nullopt;
    auto secs = core::parse_seconds(*v);
    return secs ? interval_option(name, *secs, *v) : *v;
  };
  std::optional<std::string> paused;
  if (cmd == "pause-queue") paused = "true";
  if (cmd == "resume-queue") paused = "false";
  // What a job submitted without --max-attempts gets: 1 to 2147483647 (1,
  // what it gets without a default, removes the default).
  std::optional<std::string> default_max_attempts;
  if (auto v = option(a, "--default-max-attempts"))
    default_max_attempts = std::to_string(int_option("--default-max-attempts", *v, 1, INT32_MAX));
  // --default-timeout none: 0, which removes it (no job has a timeout of 0).
  auto default_timeout = option(a, "--default-timeout") == std::optional<std::string>("none")
                             ? std::optional<std::string>("0")
                             : duration("--default-timeout");
  s.arg_names = {"NAME",        cmd,          "--max-queued", "--max-running", "--max-running-per-key",
                 "--retry-base", "--retry-cap", "--rate-limit", "--rate-period", "--default-max-attempts",
                 "--default-timeout"};
  pg::Params p = {a.positional[0],         paused,
                  cap("--max-queued"),     cap("--max-running"),
                  cap("--max-running-per-key"), duration("--retry-base"),
                  duration("--retry-cap"), cap("--rate-limit"),
                  duration("--rate-period"), default_max_attempts,
                  default_timeout};
  if (cmd == "configure-queue" && std::all_of(p.begin() + 2, p.end(), [](auto& v) { return !v; }))
    throw Usage("configure-queue takes NAME and at least one of --max-queued, --max-running, "
                "--max-running-per-key, --retry-base, --retry-cap, --rate-limit, --rate-period, "
                "--default-max-attempts, --default-timeout");
  // known: whether the queue had settings or jobs before the call.  The
  // subquery reads the statement's snapshot, taken before configure_queue
  // ran, so its own insert is not seen.  A name no job uses is most often
  // a typo (pause-queue mial during an incident leaves mail running), so it
  // gets a note on stderr; the call still stands: configuring a queue
  // before its first job is legitimate.
  auto r = co_await s.conn.query(
      "SELECT q.name, q.paused, q.max_queued, q.max_running, q.max_running_per_key,"
      " q.retry_base::text AS retry_base, q.retry_cap::text AS retry_cap, q.rate_limit,"
      " CASE WHEN q.rate_limit IS NOT NULL THEN q.rate_period::text END AS rate_period,"
      " q.default_max_attempts, q.default_timeout::text AS default_timeout,"
      " EXISTS (SELECT 1 FROM bgexec.queue_stats k WHERE k.queue = $1) AS known"
      " FROM bgexec.configure_queue($1, $2::boolean, $3::int, $4::int, $5::int, $6::interval, $7::interval,"
      " $8::int, $9::interval, $10::int, $11::interval) q",
      p);
  json row = r.to_json(true).at(0);
  if (!member(row, "known").is_boolean() || !row["known"].get<bool>())
    std::cerr << "note: queue " << a.positional[0]
              << " had no settings and no jobs: this call created it (bgexec queues lists the queues)" << std::endl;
  row.erase("known");
  if (s.json_out) {
    std::cout << core::dump(row) << std::endl;
    co_return ok;
  }
  std::cout << "queue " << a.positional[0] << ":";
  for (const char* c :
       {"paused", "max_queued", "max_running", "max_running_per_key", "retry_base", "retry_cap", "rate_limit", "rate_period",
        "default_max_attempts", "default_timeout"})
    std::cout << " " << c << "=" << text_of(member(row, c), "none");
  std::cout << std::endl;
  co_return ok;
}

// workers [--all]: bgexec.worker_stats, the live workers (its alive: a
// heartbeat within the minute, or the lease when longer, or a live lease),
// or with --all every row, most recent first.
asio::awaitable<int> cmd_workers(Session& s, const core::ParsedArgs& a) {
  if (!a.positional.empty()) throw Usage("workers takes no arguments");
  const auto digits = s.time_digits();
  const std::string sql =
      "SELECT id, host, pid, pg_catalog.array_to_json(queues) AS queues, concurrency, in_flight, alive, " +
      pg::utc_iso("started_at", digits) + " AS started_at, " + pg::utc_iso("heartbeat_at", digits) +
      " AS heartbeat_at, " + pg::utc_iso("stopped_at", digits) + " AS stopped_at FROM bgexec.worker_stats w" + (a.flags.count("--all") ? "" : " WHERE w.alive") +
      " ORDER BY w.heartbeat_at DESC, w.id";
  auto r = co_await s.conn.query(sql);
  json rows = r.to_json(true);
  if (s.json_out) {
    std::cout << core::dump(rows) << std::endl;
    co_return ok;
  }
  print_table(rows, {"id", "host", "pid", "queues", "concurrency", "in_flight", "alive", "started_at", "heartbeat_at",
                    "stopped_at"});
  co_return ok;
}

asio::awaitable<int> cmd_schedule(Session& s, const core::ParsedArgs& a) {
  if (a.positional.size() < 3 || a.positional.size() > 4)
    throw Usage("schedule takes NAME CRON KIND [JSON|@FILE]");
  std::string payload = a.positional.size() > 3 ? json_arg(a.positional[3]) : "{}";
  JobOptions jo = job_options(a);
  s.arg_names = {"NAME", "CRON", "KIND", "JSON", "--queue", "--priority", "--max-attempts", "--timeout",
                 "--concurrency-key", "--time-zone", "--no-overlap"};
  pg::Params p = {a.positional[0], a.positional[1], a.positional[2], payload, jo.queue,
                  std::to_string(jo.priority), jo.max_attempts, jo.timeout,
                  jo.concurrency_key, option(a, "--time-zone").value_or("UTC"),
                  a.flags.count("--no-overlap") ? "false" : "true"};
  auto r = co_await s.conn.query(
      "SELECT " + pg::utc_iso("bgexec.schedule($1, $2, $3, $4::jsonb, queue => $5, priority => $6::int,"
                           " max_attempts => $7::int, timeout => $8::interval, concurrency_key => $9,"
                           " time_zone => $10, overlap => $11::boolean)",
                       s.time_digits()),
      p);
  std::string next = r.get(0, 0).value_or("");
  if (s.json_out) std::cout << json{{"name", a.positional[0]}, {"next_run_at", next}}.dump() << std::endl;
  else std::cout << "schedule " << a.positional[0] << ": next run " << next << std::endl;
  co_return ok;
}

asio::awaitable<int> cmd_unschedule(Session& s, const core::ParsedArgs& a) {
  if (a.positional.size() != 1) throw Usage("unschedule takes NAME");
  pg::Params p = {a.positional[0]};
  s.arg_names = {"NAME"};  // (a name that is not UTF-8: its fault, exit 2)
  auto r = co_await s.conn.query("SELECT bgexec.unschedule($1)", p);
  bool deleted = r.get(0, 0) == "t";
  if (s.json_out) std::cout << json{{"name", a.positional[0]}, {"deleted", deleted}}.dump() << std::endl;
  else if (deleted) std::cout << "schedule " << a.positional[0] << ": deleted" << std::endl;
  else std::cerr << "bgexec unschedule: schedule " << a.positional[0] << " not found\n";
  co_return deleted ? ok : not_found;
}

// pause-schedule NAME, resume-schedule NAME.
asio::awaitable<int> cmd_pause_schedule(Session& s, const std::string& cmd, const core::ParsedArgs& a) {
  if (a.positional.size() != 1) throw Usage(cmd + " takes NAME");
  const std::string& name = a.positional[0];
  bool pause = cmd == "pause-schedule";
  std::string sql = pause ? std::string("SELECT bgexec.pause_schedule($1)::text, NULL")
                          : "SELECT 'true', " + pg::utc_iso("bgexec.resume_schedule($1)", s.time_digits());
  pg::Params p = {name};
  s.arg_names = {"NAME"};
  auto r = co_await s.conn.query(sql, p);
  std::optional<std::string> next = r.get(0, 1);
  bool found = pause ? r.get(0, 0) == "true" : next.has_value();
  if (!found) {
    std::cerr << "bgexec " << cmd << ": schedule " << name << " not found\n";
    co_return not_found;
  }
  if (s.json_out) {
    json out = {{"name", name}, {"paused", pause}};
    if (next) out["next_run_at"] = *next;
    std::cout << out.dump() << std::endl;
  } else if (pause) {
    std::cout << "schedule " << name << ": paused" << std::endl;
  } else {
    std::cout << "schedule " << name << ": resumed, next run " << *next << std::endl;
  }
  co_return ok;
}

// run-schedule NAME [--wait | --follow]: the schedule's job, now.
asio::awaitable<int> cmd_run_schedule(Session& s, const core::ParsedArgs& a) {
  if (a.positional.size() != 1) throw Usage("run-schedule takes NAME");
  pg::Params p = {a.positional[0]};
  s.arg_names = {"NAME"};
  auto r = co_await s.conn.query("SELECT bgexec.run_schedule($1)", p);
  auto id = r.get(0, 0);
  if (!id) {
    std::cerr << "bgexec run-schedule: schedule " << a.positional[0] << " not found\n";
    co_return not_found;
  }
  co_return co_await report_job(s, std::stoll(*id), a);
}

asio::awaitable<int> cmd_schedules(Session& s, const core::ParsedArgs& a) {
  if (!a.positional.empty()) throw Usage("schedules takes no arguments");
  // In UTC ISO 8601 as every other command prints a time, not in the
  // session's time zone: to the second in the table, the microsecond with --json.
  const auto digits = s.time_digits();
  const std::string when = pg::utc_iso("next_run_at", digits) + " AS next_run_at, " +
                           pg::utc_iso("last_run_at", digits) + " AS last_run_at";
  auto r = co_await s.conn.query(
      "SELECT name, cron, time_zone, kind, queue, paused, " + when + ", last_job_id, last_error"
      // Yours only, as the other schedule commands act on yours only (a
      // superuser reads every role's rows, with no owner column to tell them).
      " FROM bgexec.schedule WHERE owner = current_user ORDER BY name");
  json rows = r.to_json(true);
  if (s.json_out) {
    std::cout << core::dump(rows) << std::endl;
    co_return ok;
  }
  print_table(rows, {"name", "cron", "time_zone", "kind", "queue", "paused", "next_run_at", "last_run_at",
                    "last_job_id", "last_error"});
  co_return ok;
}

}  // namespace

// The usage of one command (its lines and their continuations) and the
// common options: what an option error shows.  The whole text, 70 lines,
// scrolled the error itself out of sight.
std::string command_usage(const std::string& cmd) {
  std::istringstream in(usage_text);
  const std::string head = "  bgexec " + cmd;
  std::string line, out = "usage:\n";
  bool mine = false;
  while (std::getline(in, line)) {
    if (line.starts_with("  bgexec "))
      mine = line == head || line.starts_with(head + " ");
    else if (!line.starts_with("    "))
      mine = false;
    if (mine || line.starts_with("Common options:") || (line.starts_with("DUR:") && out.find("DUR") != out.npos))
      out += line + "\n";
  }
  return out + "(bgexec " + cmd + " --help: every command, what it does, and the exit codes)\n";
}

bool is_command(const std::string& cmd) { return command_options.count(cmd) > 0; }

int run(const std::string& cmd, const std::vector<std::string>& args,
        const std::map<std::string, std::string>& env) {
  static const std::set<std::string> valued = {
      "--db",          "--queue",      "--priority",   "--idempotency-key", "--concurrency-key",
      "--unique-key",  "--max-attempts", "--timeout",   "--run-after",  "--from",            "--time-zone",
      "--status",      "--kind",       "--limit",      "--before",          "--max-queued",
      "--max-running", "--max-running-per-key", "--retry-base", "--retry-cap", "--rate-limit",
      "--rate-period", "--batch", "--default-max-attempts", "--default-timeout"};
  // Help where an option may stand: not an option's value (--idempotency-key
  // -h), nor past "--" (submit -- -h submits the kind "-h"); those printed
  // the usage and exited 0, submitting nothing, to a script that read the
  // usage as the job's id.
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") break;
    if (args[i] == "--help" || args[i] == "-h") return core::print("bgexec " + cmd, usage_text);
    if (valued.count(args[i])) ++i;
  }
  // A misspelling of one of the command's options (edit distance 2 at
  // most) is named: "unknown option --priorty (did you mean --priority?)".
  const auto& takes = command_options.at(cmd);
  const auto did_you_mean = [&](const std::string& name) -> std::string {
    std::set<std::string> names = takes;
    names.insert({"--db", "--json", "--help"});
    auto near = core::closest_name(name, names);
    return near ? " (did you mean " + *near + "?)" : "";
  };
  core::ParsedArgs parsed;
  try {
    parsed = core::parse_args(args, valued, {"--json", "--wait", "--follow", "--no-overlap", "--all"});
  } catch (const core::UnknownOption& e) {
    std::cerr << "bgexec " << cmd << ": " << e.what() << did_you_mean(e.name) << "\n" << command_usage(cmd);
    return usage;
  } catch (const std::exception& e) {
    std::cerr << "bgexec " << cmd << ": " << e.what() << "\n" << command_usage(cmd);
    return usage;
  }
  {
    std::vector<std::string> given;
    for (auto& [name, values] : parsed.options) given.push_back(name);
    for (auto& name : parsed.flags) given.push_back(name);
    for (auto& name : given)
      if (name != "--db" && name != "--json" && !takes.count(name)) {
        std::cerr << "bgexec " << cmd << ": " << name << " is not an option of " << cmd << "\n"
                  << command_usage(cmd);
        return usage;
      }
    // One value each: of two, one would win unnoticed (submit --queue a
    // --queue b went to b), as the gateway refuses a repeated parameter;
    // a switch too, once (--json --json was taken silently).
    for (auto& name : given)
      if ((parsed.options.count(name) && parsed.options.at(name).size() > 1) || parsed.flags.count(name) > 1) {
        std::cerr << "bgexec " << cmd << ": " << name << " is given more than once\n";
        return usage;
      }
  }
  // A filter's queue or kind name is never empty (the extension's names
  // are 1 to 63 or 128 characters): stop --queue '' matched nothing and
  // exited 0 where submit --queue '' is refused.
  if (cmd == "jobs" || cmd == "stop" || cmd == "retry")
    for (const char* name : {"--queue", "--kind"})
      if (auto it = parsed.options.find(name); it != parsed.options.end() && !it->second.empty() &&
                                               it->second.back().empty()) {
        std::cerr << "bgexec " << cmd << ": " << name << ": expected a " << (name[2] == 'q' ? "queue" : "kind")
                  << " name, got \"\"\n";
        return usage;
      }
  // Every usage line offers one or the other: --follow prints what --wait hides.
  if (parsed.flags.count("--wait") && parsed.flags.count("--follow")) {
    std::cerr << "bgexec " << cmd << ": --wait and --follow cannot be used together\n";
    return usage;
  }
  std::string conninfo, conninfo_source = "--db";
  if (auto it = parsed.options.find("--db"); it != parsed.options.end() && !it->second.empty())
    conninfo = it->second.back();
  else if (auto e = env.find("BGEXEC_DB"); e != env.end())
    conninfo = e->second, conninfo_source = "BGEXEC_DB";
  // Refused before connecting: a usage error naming its source, not a database error.
  if (auto err = pg::conninfo_error(conninfo)) {
    std::cerr << "bgexec " << cmd << ": " << conninfo_source << ": invalid connection string: " << *err << "\n";
    return usage;
  }

  OutBuf out;
  struct Restore {  // std::cout's own buffer back before `out` goes
    std::streambuf* buf;
    ~Restore() { std::cout.rdbuf(buf); }
  } restore{std::cout.rdbuf(&out)};
  asio::io_context io;
  Session s{pg::Connection(io.get_executor(), conninfo, "client"), parsed.flags.count("--json") > 0, false, {}, {}};
  s.conn.set_jit_off(true);  // as the gateway's: `bgexec queues` spent 1.3 s compiling
  s.conn.set_interval_style(true);  // intervals (timeout) as the gateway shows them
  int code = db_error;
  // Ctrl-C while following a job (submit and run-schedule --wait/--follow,
  // tail) ends the follow, not the job: one line says so, exit 130 as the
  // signal's.  It ended the client silently, and the job running on looked
  // stopped.  The default action is back before the line is written: a
  // second Ctrl-C ends the client at once, whatever holds it.  Not when
  // SIGINT came ignored (nohup, a script's background job): it stays so.
  asio::signal_set interrupt(io);
  struct sigaction inherited {};
  const bool sigint_ignored = ::sigaction(SIGINT, nullptr, &inherited) == 0 && inherited.sa_handler == SIG_IGN;
  bool interrupt_armed = false;
  s.on_follow = [&](std::int64_t id) {
    boost::system::error_code ec;
    if (sigint_ignored || interrupt_armed || (interrupt.add(SIGINT, ec), ec)) return;
    interrupt_armed = true;
    interrupt.async_wait([&interrupt, id](const boost::system::error_code& e, int) {
      if (e) return;
      boost::system::error_code ignored;
      interrupt.clear(ignored);
      std::cerr << "bgexec: stopped following job " << id << "; it goes on (bgexec stop " << id << " stops it)"
                << std::endl;
      try {
        std::cout.flush();  // the events printed so far
      } catch (...) {
      }
      std::_Exit(130);
    });
  };
  auto command = [&]() -> asio::awaitable<int> {
    if (cmd == "submit") co_return co_await cmd_submit(s, parsed);
    if (cmd == "status") co_return co_await cmd_status(s, parsed);
    if (cmd == "jobs") co_return co_await cmd_jobs(s, parsed);
    if (cmd == "tail") co_return co_await cmd_tail(s, parsed);
    if (cmd == "queues") co_return co_await cmd_queues(s, parsed);
    if (cmd == "workers") co_return co_await cmd_workers(s, parsed);
    if (cmd == "pause-queue" || cmd == "resume-queue" || cmd == "configure-queue")
      co_return co_await cmd_configure_queue(s, cmd, parsed);
    if (cmd == "schedule") co_return co_await cmd_schedule(s, parsed);
    if (cmd == "unschedule") co_return co_await cmd_unschedule(s, parsed);
    if (cmd == "schedules") co_return co_await cmd_schedules(s, parsed);
    if (cmd == "run-schedule") co_return co_await cmd_run_schedule(s, parsed);
    if (cmd == "purge") co_return co_await cmd_purge(s, parsed);
    if (cmd == "reschedule") co_return co_await cmd_reschedule(s, parsed);
    if (cmd == "pause-schedule" || cmd == "resume-schedule")
      co_return co_await cmd_pause_schedule(s, cmd, parsed);
    co_return co_await cmd_simple(s, cmd, parsed);
  };
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<int> {
        int rc = co_await command();
        check_output();  // what the command printed last, all written
        co_return rc;
      },
      [&](std::exception_ptr e, int rc) {
        {
          boost::system::error_code ignored;  // (its wait would hold io.run() open)
          interrupt.clear(ignored);
          interrupt.cancel(ignored);
        }
        code = rc;
        if (!e) return;
        try {
          std::rethrow_exception(e);
        } catch (const Usage& u) {
          std::cerr << "bgexec " << cmd << ": " << u.what() << "\n";
          code = usage;
        } catch (const OutputError& o) {
          // A closed pipe ends the command quietly, with the status a
          // shell gives a process SIGPIPE killed (`| head -1` is no error).
          code = core::output_failed("bgexec " + cmd, o);
        } catch (const pg::Error& pe) {
          // The server's message, its detail and hint below it; not its
          // CONTEXT, a PL/pgSQL call stack.  A value the server could not
          // convert is the argument's fault (exit 2, as for a bad option).
          const auto& f = pe.fields();
          const std::string msg = f.primary.empty() ? pe.what() : f.primary;
          if (pe.connection_lost() && !s.conn.ever_connected()) {
            // libpq's text, less the connection's internal name ("client:
            // connect: "), and where the server's address came from.
            std::string why = msg;
            for (const std::string prefix : {"client: ", "connect: "})
              if (why.starts_with(prefix)) why.erase(0, prefix.size());
            for (std::size_t at; (at = why.find(": connect: ")) != why.npos;) why.erase(at + 2, 9);  // host lists
            std::cerr << "bgexec " << cmd << ": cannot connect to the database: " << why << " (SQLSTATE "
                      << pe.sqlstate() << ")\n  hint: "
                      << (conninfo_source == "BGEXEC_DB" ? "the server is the one BGEXEC_DB names (--db overrides it)"
                          : !conninfo.empty()            ? "the server is the one --db names"
                                                         : "no --db or BGEXEC_DB: the server is libpq's default, from "
                                                           "PGHOST, PGPORT and the other PG* variables")
                      << "\n";
            code = db_error;
          } else if (auto n = pe.failed_param(); n >= 1 && n <= s.arg_names.size()) {
            std::cerr << "bgexec " << cmd << ": " << s.arg_names[n - 1] << ": " << msg << "\n";
            code = usage;
          } else {
            std::cerr << "bgexec " << cmd << ": " << msg << " (SQLSTATE " << pe.sqlstate() << ")\n";
            if (!f.detail.empty()) std::cerr << "  detail: " << f.detail << "\n";
            if (const std::string hint = pe.hint(); !hint.empty()) std::cerr << "  hint: " << hint << "\n";
            code = pe.sqlstate() == "P0002" ? not_found : db_error;
          }
        } catch (const std::exception& ex) {
          std::cerr << "bgexec " << cmd << ": " << ex.what() << "\n";
          code = db_error;
        }
      });
  io.run();
  std::cout.flush();  // what a command that failed had printed (its code stands)
  s.conn.close();
  return code;
}

}  // namespace bgexec::client
