// The step guard (see guard.hpp).
#include "proc/guard.hpp"

#include "core/logfmt.hpp"
#include "proc/procfs.hpp"
#include "proc/spawn_attr.hpp"

#include <fcntl.h>
#include <poll.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <thread>

extern char** environ;

namespace bgexec::proc::guard {

namespace {

using Clock = std::chrono::steady_clock;

// One record: a header, then `len` bytes of payload, at most PIPE_BUF bytes
// in all.  The pipe is a byte stream with one writer: the guard takes the
// records from it whole, however the writes cut them.
//   'P' a step is about to be spawned: payload = its marker
//   'Q' that spawn failed: payload = its marker
//   'S' a step's group started: pid = its id, payload = its marker (the
//       marker's 'P', if one was sent, is settled)
//   'E' it ended (its leader reaped): pid
//   'F' a job's fence: payload = the point (steady clock nanoseconds, 8
//       bytes; both processes' steady clock is CLOCK_MONOTONIC), then the job id
//   'X' the job is over, its fence goes: payload = the job id
struct Header {
  char op;
  char pad = 0;
  std::uint16_t len = 0;
  std::int32_t pid = 0;
};
constexpr std::size_t max_marker = PIPE_BUF - sizeof(Header);
constexpr std::size_t max_job = max_marker - sizeof(std::int64_t);

// The job id a marker names (BGEXEC_JOB_ID=…, the first of marker_vars);
// empty for none.
std::string_view job_of(const std::string& marker) {
  std::string_view first(marker.c_str());
  constexpr std::string_view key = "BGEXEC_JOB_ID=";
  return first.rfind(key, 0) == 0 ? first.substr(key.size()) : std::string_view();
}

int& fd() {
  static int f = -1;
  return f;
}
pid_t& guard_pid() {
  static pid_t p = 0;
  return p;
}

// Records the guard has not taken yet.  The pipe fills only while the guard
// does not read (stopped: SIGSTOP), and the worker's loop must not block on
// it; nor may a record be lost (a lost 'E' would leave a reaped group's id
// in its list).  So what does not fit waits here, in order, for the next
// record to push it on.
std::string& pending() {
  static std::string p;
  return p;
}

// A job's fence as the worker keeps it: sent only while the job has steps
// (groups) running, so a job that runs none costs no record.
struct JobFence {
  Clock::time_point at;
  int groups = 0;
  bool sent = false;
};

// What a guard is started with, and the groups live now and the fences of
// their jobs, which a guard started again in place of one that died must be
// told.
struct Setup {
  std::string exe, worker_id;
  double grace_s = 0.5;
  std::map<pid_t, std::string> live;
  std::map<std::string, int> announced;  // markers of spawns in progress
  std::map<std::string, JobFence, std::less<>> fences;
  Clock::time_point restarted{};  // epoch: never
};
Setup& setup() {
  static Setup s;
  return s;
}

bool spawn_guard(std::string& error);

void enqueue(char op, pid_t pgid, std::string_view payload) {
  Header h{op, 0, static_cast<std::uint16_t>(payload.size()), static_cast<std::int32_t>(pgid)};
  pending().append(reinterpret_cast<const char*>(&h), sizeof h).append(payload);
}

void enqueue_fence(const std::string& job, Clock::time_point at) {
  std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
  std::string payload(reinterpret_cast<const char*>(&ns), sizeof ns);
  enqueue('F', 0, payload.append(job));
}

// Writes what is pending; false when the guard is gone (EPIPE: SIGPIPE is
// ignored), true when all of it went or the rest must wait (EAGAIN).
bool flush() {
  std::string& out = pending();
  while (!out.empty()) {
    ssize_t rc = ::write(fd(), out.data(), out.size());
    if (rc > 0) out.erase(0, static_cast<std::size_t>(rc));
    else if (rc < 0 && errno == EAGAIN) return true;
    else if (rc < 0 && errno != EINTR) return false;
  }
  return true;
}

// Closes the pipe to a guard that is gone.
void drop() {
  ::close(fd());
  fd() = -1;
  guard_pid() = 0;
  pending().clear();
}

// Starts a guard in place of one that is gone and tells it of the groups
// live now; false, with why, when it cannot be now.  Once, then at most
// every 10 s: a guard that dies as it starts is not started in a loop.
bool restart(std::string& error) {
  Setup& s = setup();
  auto now = std::chrono::steady_clock::now();
  if (s.restarted.time_since_epoch().count() != 0 && now - s.restarted < std::chrono::seconds(10)) {
    error = "the last one started died within 10 s; trying again at a step's start or end 10 s on";
    return false;
  }
  s.restarted = now;
  if (!spawn_guard(error)) return false;
  for (const auto& [pgid, marker] : s.live) enqueue('S', pgid, marker);
  for (const auto& [marker, n] : s.announced)
    for (int i = 0; i < n; ++i) enqueue('P', 0, marker);
  for (auto& [job, f] : s.fences)
    if ((f.sent = f.groups > 0)) enqueue_fence(job, f.at);
  if (flush()) return true;
  error = "the new one died at once";
  drop();
  return false;
}

void replace(const std::string& why) {
  pid_t old = guard_pid();
  drop();
  std::string error;
  if (restart(error))
    core::log("warn", "step guard gone, started another",
              {{"guard_pid", std::to_string(old)}, {"error", why}, {"new_guard_pid", std::to_string(guard_pid())},
               {"steps", std::to_string(setup().live.size())}});
  else
    core::log("warn", "step guard gone: a worker killed by SIGKILL would leave its steps running",
              {{"guard_pid", std::to_string(old)}, {"error", why}, {"not_restarted", error}});
}

// Writes the records just enqueued, which Setup already reflects.  With no
// guard (none started, released, or one gone and not replaced yet) they are
// dropped, and a guard started now is told the whole Setup instead.
void deliver() {
  if (fd() < 0) {
    pending().clear();
    std::string error;
    if (!setup().exe.empty() && restart(error))
      core::log("warn", "step guard started again",
                {{"new_guard_pid", std::to_string(guard_pid())}, {"steps", std::to_string(setup().live.size())}});
    return;
  }
  if (!flush()) replace(std::strerror(errno));
}

// The guard's work once the worker is gone: live maps each step's group id to
// its marker, announced holds the markers of steps being spawned.  What is
// the steps' is found anew in each round, as it forks and dies: every live
// (not zombie) process
//  - in a step's process group or session (a step leads both),
//  - carrying a live or announced step's marker,
//  - whose parent is one of these (a descendant that cleared its
//    environment, `env -i`, and left the group, `setsid`),
//  - in a process group or session one of these leads (`setsid` made it,
//    so every process in it is a descendant of the one that did; a member
//    whose parent has died came to init and is known by nothing else),
//  - or found in an earlier round (its parent died since: it came to init).
// Each is a descendant of a step: nothing else on the host (another
// worker's steps, another tenant's work) is ever taken for one.  An earlier
// round's process is known by its pid and start time, which no other
// process has; a group or session id is kept only while a process is in it
// (an id goes back to the pool only once its group is empty, and is not
// handed out again until the pids wrap around).
void stop_steps(const std::map<pid_t, std::string>& live, const std::set<std::string>& announced,
                double grace_s, const std::string& worker_id, const char* why) {
  std::set<std::string> markers = announced;
  std::set<std::string, std::less<>> jobs;  // for the log
  for (const auto& [pgid, marker] : live)
    if (!marker.empty()) markers.insert(marker);
  for (const auto& marker : markers)
    if (auto job = job_of(marker); !job.empty()) jobs.emplace(job);
  const pid_t self = ::getpid();
  std::map<pid_t, unsigned long long> known;  // found in the last round: pid, start time
  std::set<pid_t> groups, sessions;           // led by a process found
  auto ours = [&] {
    struct Proc {
      pid_t pid;
      ProcStat st;
    };
    std::vector<Proc> all;
    for_each_pid_entry("/proc", [&](const char* name) {
      pid_t pid = static_cast<pid_t>(std::atoi(name));
      ProcStat st;
      // A zombie is dead already; init (or the next subreaper) reaps it.
      if (pid != self && proc_stat(pid, st) && st.state != 'Z') all.push_back({pid, st});
    });
    std::multimap<pid_t, std::size_t> by_parent, by_group, by_session;
    for (std::size_t i = 0; i < all.size(); ++i) {
      by_parent.emplace(all[i].st.ppid, i);
      by_group.emplace(all[i].st.pgrp, i);
      by_session.emplace(all[i].st.session, i);
    }
    std::vector<bool> found(all.size());
    std::vector<std::size_t> todo;
    auto take = [&](std::size_t i) {
      if (!found[i]) {
        found[i] = true;
        todo.push_back(i);
      }
    };
    auto take_all = [&](const std::multimap<pid_t, std::size_t>& by, pid_t id) {
      for (auto [it, end] = by.equal_range(id); it != end; ++it) take(it->second);
    };
    // Groups and sessions no process is in any more are forgotten: their ids may be reused.
    std::erase_if(groups, [&](pid_t g) { return !by_group.count(g); });
    std::erase_if(sessions, [&](pid_t s) { return !by_session.count(s); });
    for (std::size_t i = 0; i < all.size(); ++i) {
      const auto& [pid, st] = all[i];
      auto k = known.find(pid);
      if (live.count(st.pgrp) || live.count(st.session) || groups.count(st.pgrp) || sessions.count(st.session) ||
          (k != known.end() && k->second == st.start) ||
          (!markers.empty() && markers.count(marker_of_pid(pid))))
        take(i);
    }
    // Their descendants, and the groups and sessions they lead.
    for (std::size_t n = 0; n < todo.size(); ++n) {
      const auto& [pid, st] = all[todo[n]];
      take_all(by_parent, pid);
      if (st.pgrp == pid && groups.insert(pid).second) take_all(by_group, pid);
      if (st.session == pid && sessions.insert(pid).second) take_all(by_session, pid);
    }
    known.clear();
    std::vector<pid_t> pids;
    for (std::size_t i : todo) {
      known.emplace(all[i].pid, all[i].st.start);
      pids.push_back(all[i].pid);
    }
    return pids;
  };
  // Found before any signal: a process whose parent a TERM ends comes to
  // init at once, and was known as the steps' by that parent alone.
  auto left = ours();
  // Then the groups, whole: a process forking now lands in one of them.
  for (const auto& [pgid, marker] : live) ::kill(-pgid, SIGTERM);
  std::set<pid_t> termed;
  auto term = [&](const std::vector<pid_t>& pids) {
    for (pid_t pid : pids)
      if (termed.insert(pid).second) ::kill(pid, SIGTERM);
  };
  term(left);
  auto now = Clock::now();
  auto deadline = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace_s));
  // A step spawned as the worker died carries its marker once it has
  // exec'd: looked for a moment longer, even with nothing found yet.
  auto settle = now + (announced.empty() ? Clock::duration::zero() : std::chrono::milliseconds(200));
  while ((!left.empty() && Clock::now() < deadline) || Clock::now() < settle) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    left = ours();
    term(left);
  }
  // Then KILL whatever is left, and what comes of it, for a second at most
  // (one in uninterruptible sleep dies only when it wakes).
  std::set<pid_t> killed;
  for (int round = 0; round < 100 && !left.empty(); ++round) {
    for (const auto& [pgid, marker] : live) ::kill(-pgid, SIGKILL);
    for (pid_t pgid : groups) ::kill(-pgid, SIGKILL);
    for (pid_t pid : left) ::kill(pid, SIGKILL);
    killed.insert(left.begin(), left.end());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    left = ours();
  }
  std::string job_list;
  for (const auto& j : jobs) job_list += (job_list.empty() ? "" : ",") + j;
  core::log("warn", why,
            {{"worker_id", worker_id}, {"jobs", job_list}, {"steps", std::to_string(live.size())},
             {"killed", std::to_string(killed.size())}, {"left", std::to_string(left.size())}});
}

}  // namespace

bool start(const std::string& exe, double grace_s, const std::string& worker_id, std::string& error) {
  if (fd() >= 0) return true;
  Setup& s = setup();
  s.exe = exe;
  s.grace_s = grace_s;
  s.worker_id = worker_id;
  s.live.clear();
  s.fences.clear();
  s.restarted = {};
  return spawn_guard(error);
}

void exited(pid_t pid) {
  if (pid != 0 && pid == guard_pid()) replace("it exited");
}

namespace {

bool spawn_guard(std::string& error) {
  const Setup& s = setup();
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    error = std::string("pipe2: ") + std::strerror(errno);
    return false;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[0], 0);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  // A group of its own: a signal to the worker's group (a terminal's ^C, a
  // kill of the group) does not reach it.  SIGPIPE stays ignored: its log
  // line to a reader gone with the worker must not end it mid-stop.
  SpawnAttr sa(Detach::group, SIGPIPE);
  char grace[32];
  std::snprintf(grace, sizeof grace, "%g", s.grace_s);
  std::string id = s.worker_id;
  char arg0[] = "bgexec", arg1[] = "__guard";
  char* argv[] = {arg0, arg1, grace, id.data(), nullptr};
  // The worker's environment without its secrets.
  std::vector<char*> env;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "BGEXEC_SECRET_", 14) != 0) env.push_back(*e);
  env.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, s.exe.c_str(), &fa, &sa.attr, argv, env.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(p[0]);
  if (rc != 0) {
    ::close(p[1]);
    error = "spawn " + s.exe + ": " + std::strerror(rc);
    return false;
  }
  // Non-blocking (the read end, the guard's stdin, is not: its own open
  // file description).
  ::fcntl(p[1], F_SETFL, ::fcntl(p[1], F_GETFL) | O_NONBLOCK);
  fd() = p[1];
  guard_pid() = pid;
  return true;
}

}  // namespace

pid_t pid() { return guard_pid(); }

namespace {

// A step of the marker's job starts (or is being spawned): the job's fence
// counts it, and goes to the guard with it.
void count_group(const std::string& marker) {
  auto job = job_of(marker);
  auto& fences = setup().fences;
  if (auto f = fences.find(job); !job.empty() && f != fences.end()) {
    ++f->second.groups;
    f->second.sent = true;
    enqueue_fence(f->first, f->second.at);
  }
}

// Settles a marker spawning() announced: false when it was not.
bool settle_announced(const std::string& marker) {
  auto& announced = setup().announced;
  auto it = announced.find(marker);
  if (it == announced.end()) return false;
  if (--it->second == 0) announced.erase(it);
  return true;
}

}  // namespace

void started(pid_t pgid, const std::string& marker) {
  // A marker too long for one record guards the group alone.
  std::string m(marker.size() > max_marker ? std::string_view() : marker);
  Setup& s = setup();
  s.live[pgid] = m;
  enqueue('S', pgid, m);
  // Announced, its job's fence counted it already.
  if (!settle_announced(m)) count_group(m);
  deliver();
}

void spawning(const std::string& marker) {
  if (marker.empty() || marker.size() > max_marker) return;
  Setup& s = setup();
  ++s.announced[marker];
  enqueue('P', 0, marker);
  count_group(marker);
  deliver();
}

void spawn_failed(const std::string& marker) {
  if (!settle_announced(marker)) return;
  Setup& s = setup();
  if (auto f = s.fences.find(job_of(marker)); f != s.fences.end() && f->second.groups > 0) --f->second.groups;
  enqueue('Q', 0, marker);
  deliver();
}

void ended(pid_t pgid) {
  Setup& s = setup();
  if (auto it = s.live.find(pgid); it != s.live.end()) {
    if (auto f = s.fences.find(job_of(it->second)); f != s.fences.end() && f->second.groups > 0)
      --f->second.groups;
    s.live.erase(it);
  }
  enqueue('E', pgid, {});
  deliver();
}

void fence(const std::string& job, Clock::time_point at) {
  if (job.empty() || job.size() > max_job || setup().exe.empty()) return;
  JobFence& f = setup().fences[job];
  f.at = at;
  if (f.groups == 0) return;  // told with the job's next step
  f.sent = true;
  enqueue_fence(job, at);
  deliver();
}

void forget(const std::string& job) {
  auto& fences = setup().fences;
  auto it = fences.find(job);
  if (it == fences.end()) return;
  bool sent = it->second.sent;
  fences.erase(it);
  if (!sent) return;
  enqueue('X', 0, job);
  deliver();
}

void release() {
  setup().live.clear();
  setup().announced.clear();
  setup().fences.clear();
  setup().exe.clear();  // none started again
  if (fd() >= 0) drop();
}

int main(const std::vector<std::string>& args) {
  // It outlives the worker's drain: a ^C, a hangup or a fleet-wide
  // `pkill bgexec` that drains the worker must not take its guard first.
  // It exits by itself once the worker is gone.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::signal(sig, SIG_IGN);
  ::signal(SIGCHLD, SIG_IGN);  // the children that stop fenced jobs reap themselves
  double grace_s = args.empty() ? 0.5 : std::strtod(args[0].c_str(), nullptr);
  if (!(grace_s >= 0 && grace_s < 3600)) grace_s = 0.5;
  std::string worker_id = args.size() > 1 ? args[1] : "";
  std::map<pid_t, std::string> live;
  std::map<std::string, int> announced;  // markers of steps being spawned
  std::map<std::string, Clock::time_point, std::less<>> fences;
  auto markers_of = [](const std::map<std::string, int>& m) {
    std::set<std::string> out;
    for (const auto& [marker, n] : m) out.insert(marker);
    return out;
  };
  // The fence of the job a marker names, or fences.end().
  auto fence_of = [&](const std::string& marker) { return fences.find(job_of(marker)); };
  std::string buf;
  char chunk[PIPE_BUF * 4];
  for (;;) {
    // Until the first fence of a job with steps live, or for ever.
    int timeout_ms = -1;
    auto now = Clock::now();
    auto until = [&](const std::string& marker) {
      auto f = fence_of(marker);
      if (f == fences.end()) return;
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(f->second - now).count();
      ms = std::clamp<decltype(ms)>(ms, 0, 60000);
      if (timeout_ms < 0 || ms < timeout_ms) timeout_ms = static_cast<int>(ms);
    };
    for (const auto& [pgid, marker] : live) until(marker);
    for (const auto& [marker, n] : announced) until(marker);
    if (timeout_ms == 0) {
      // The worker has not renewed these jobs' leases in time: were it able
      // to act, its lease guard would have given them up by now.  They stay
      // in `live` until the worker reaps them (their ids cannot be reused
      // before), and are stopped again at the end should it never.  So are
      // the steps it was spawning.
      std::map<pid_t, std::string> due;
      std::set<std::string> due_announced;
      for (const auto& [pgid, marker] : live)
        if (auto f = fence_of(marker); f != fences.end() && f->second <= now) due.emplace(pgid, marker);
      for (const auto& [marker, n] : announced)
        if (auto f = fence_of(marker); f != fences.end() && f->second <= now) due_announced.insert(marker);
      for (const auto& [pgid, marker] : due) fences.erase(std::string(job_of(marker)));
      for (const auto& marker : due_announced) fences.erase(std::string(job_of(marker)));
      // In a child of its own: a stop takes up to the kill grace and a
      // second, and the fences of other jobs that pass meanwhile must be
      // kept on time.  Here, when no child can be had.
      const char* why = "worker did not renew its leases in time: their steps were stopped";
      pid_t stopper = ::fork();
      if (stopper == 0) {
        stop_steps(due, due_announced, grace_s, worker_id, why);
        std::_Exit(0);
      }
      if (stopper < 0) stop_steps(due, due_announced, grace_s, worker_id, why);
      continue;
    }
    pollfd in{0, POLLIN, 0};
    int rc = ::poll(&in, 1, timeout_ms);
    if (rc < 0 && errno != EINTR)  // ENOMEM: not the worker's end, try again
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (rc <= 0) continue;
    ssize_t n = ::read(0, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    buf.append(chunk, static_cast<std::size_t>(n));
    std::size_t at = 0;
    while (buf.size() - at >= sizeof(Header)) {
      Header h;
      std::memcpy(&h, buf.data() + at, sizeof h);
      if (buf.size() - at < sizeof h + h.len) break;
      std::string payload = buf.substr(at + sizeof h, h.len);
      if (h.op == 'P') {
        ++announced[payload];
      } else if (h.op == 'Q' || h.op == 'S') {
        if (auto a = announced.find(payload); a != announced.end() && --a->second == 0) announced.erase(a);
        if (h.op == 'S') live[h.pid] = std::move(payload);
      } else if (h.op == 'E') {
        live.erase(h.pid);
      } else if (h.op == 'F' && payload.size() > sizeof(std::int64_t)) {
        std::int64_t ns;
        std::memcpy(&ns, payload.data(), sizeof ns);
        fences[payload.substr(sizeof ns)] = Clock::time_point(std::chrono::nanoseconds(ns));
      } else if (h.op == 'X') {
        fences.erase(payload);
      }
      at += sizeof h + h.len;
    }
    buf.erase(0, at);
  }
  if (!live.empty() || !announced.empty())
    stop_steps(live, markers_of(announced), grace_s, worker_id, "worker gone: its steps were stopped");
  return 0;
}

}  // namespace bgexec::proc::guard
