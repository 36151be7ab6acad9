// The step guard (daemon/src/proc/guard.hpp) against real processes: the
// real `bgexec __guard` is told of process groups as the worker tells it,
// and its pipe is closed as a worker killed by SIGKILL leaves it.
#include "proc/guard.hpp"
#include "proc/procfs.hpp"

#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace guard = bgexec::proc::guard;

namespace {

// Starts argv in a process group of its own (as a step's leader is), with
// env; in a session of its own too with `session` (as Child::spawn has it).
pid_t start(std::vector<std::string> argv, std::vector<std::string> env = {}, bool session = false) {
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, session ? POSIX_SPAWN_SETSID : POSIX_SPAWN_SETPGROUP);
  std::vector<char*> av, ev;
  for (auto& a : argv) av.push_back(a.data());
  av.push_back(nullptr);
  env.push_back("PATH=/usr/bin:/bin");
  for (auto& e : env) ev.push_back(e.data());
  ev.push_back(nullptr);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawnp(&pid, av[0], nullptr, &attr, av.data(), ev.data()), 0);
  posix_spawnattr_destroy(&attr);
  return pid;
}

// The signal that ended pid (reaped), 0 if it still runs after `wait_s`.
int ended_by(pid_t pid, double wait_s = 5) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  do {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) return WIFSIGNALED(st) ? WTERMSIG(st) : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (std::chrono::steady_clock::now() < deadline);
  return 0;
}

void kill_and_reap(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// Starts the guard with `grace_s`; its pid.
pid_t start_guard(double grace_s) {
  std::string error;
  EXPECT_TRUE(guard::start(BGEXEC_BINARY, grace_s, "unit", error)) << error;
  return guard::pid();
}

// Closes the guard's pipe and waits for it to exit.
void release_and_wait(pid_t g) {
  guard::release();
  int st = 0;
  ASSERT_EQ(::waitpid(g, &st, 0), g);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

// A marker no real step has (a job id is a number), so the guard started
// here can never take a process of this host's workers for one of its own.
// A `sleep 30` the guard is told of, as a step's leader.
pid_t guarded_sleep() {
  pid_t p = start({"sleep", "30"});
  guard::started(p, "");
  return p;
}

// Kills the guard as the OOM killer would, and reaps it.
void kill_guard(pid_t g) {
  ::kill(g, SIGKILL);
  ASSERT_EQ(::waitpid(g, nullptr, 0), g);
}

// The job id of a job the tests name `job`, its step's environment marker
// (as Child::spawn sets it) and that marker as the guard is told of it.
std::string job_id(const std::string& job) { return "unit-" + std::to_string(::getpid()) + "-" + job; }
std::vector<std::string> marker_env(const std::string& job, const std::string& instance = "unit") {
  return {"BGEXEC_JOB_ID=" + job_id(job), "BGEXEC_STEP_ID=s", "BGEXEC_ATTEMPT=1", "BGEXEC_WORKER_INSTANCE=" + instance};
}
std::string marker(const std::string& job) {
  std::string m;
  for (auto& e : marker_env(job)) m += e + '\0';
  return m;
}
// A `sleep 30` of the job's step, the guard told of it.
pid_t job_step(const std::string& job) {
  pid_t p = start({"sleep", "30"}, marker_env(job));
  guard::started(p, marker(job));
  return p;
}
std::chrono::steady_clock::time_point in_ms(int ms) {
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
}
// A `sh -c "trap '' TERM; sleep 30 & wait"` ignores TERM once its sleep
// runs (started after the trap): waits for that child, up to 10 s.
bool trap_set(pid_t sh) {
  for (int i = 0; i < 1000; ++i) {
    if (!bgexec::proc::children_by_stat(sh).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Whether pid runs no more: no such process, or a zombie (a process whose
// parent died is init's to reap, not the test's).
bool gone(pid_t pid) {
  bgexec::proc::ProcStat st;
  return !bgexec::proc::proc_stat(pid, st) || st.state == 'Z';
}
bool gone_within(pid_t pid, double wait_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  while (!gone(pid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// The pids a step's shell wrote to `file`, one a line, once there are `n`
// and each has exec'd `comm` (a process that cleared its environment shows
// none only then); up to 10 s.
std::vector<pid_t> pids_in(const std::string& file, std::size_t n, const std::string& comm) {
  for (int i = 0; i < 1000; ++i) {
    std::vector<pid_t> pids;
    std::string text;
    if (bgexec::proc::read_proc(file, text))
      for (std::size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1)
        pids.push_back(static_cast<pid_t>(std::atoi(text.c_str() + at)));
    std::string seen;
    if (pids.size() == n && std::all_of(pids.begin(), pids.end(), [&](pid_t p) {
          return bgexec::proc::read_proc("/proc/" + std::to_string(p) + "/comm", seen) && seen == comm + "\n";
        }))
      return pids;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return {};
}

// A file of this test process's own, for a step's shell to write pids to.
std::string pid_file(const std::string& name) {
  std::string path = "/tmp/bgexec-guard-test-" + std::to_string(::getpid()) + "-" + name;
  ::unlink(path.c_str());
  return path;
}

}  // namespace

TEST(Guard, StopsLiveGroupsAndLeavesEndedOnesAlone) {
  pid_t g = start_guard(0.2);
  pid_t live = start({"sleep", "30"});
  pid_t ended = start({"sleep", "30"});
  guard::started(live, "");
  guard::started(ended, "");
  guard::ended(ended);  // as if reaped: its id is no longer the guard's to kill
  release_and_wait(g);
  EXPECT_EQ(ended_by(live), SIGTERM);
  EXPECT_EQ(ended_by(ended, 0.3), 0) << "the guard killed a group it was told had ended";
  kill_and_reap(ended);
}

TEST(Guard, StopsWhatCarriesALiveStepsMarker) {
  pid_t g = start_guard(0.2);
  pid_t leader = start({"sleep", "30"}, marker_env("7"));
  pid_t escaped = start({"sleep", "30"}, marker_env("7"));  // its own group: as after setsid
  pid_t other = start({"sleep", "30"}, marker_env("8"));    // another step's, not live here
  guard::started(leader, marker("7"));
  release_and_wait(g);
  EXPECT_EQ(ended_by(leader), SIGTERM);
  EXPECT_EQ(ended_by(escaped), SIGTERM);
  EXPECT_EQ(ended_by(other, 0.3), 0) << "the guard killed a process of a step it was not told of";
  kill_and_reap(other);
}

// Another worker on the host (another database's: the same job ids) runs
// the same job, step and attempt: its process is not this worker's step.
TEST(Guard, LeavesTheSameStepOfAnotherWorkerAlone) {
  pid_t g = start_guard(0.2);
  pid_t leader = start({"sleep", "30"}, marker_env("9"));
  pid_t escaped = start({"sleep", "30"}, marker_env("9"));                  // its own group: as after setsid
  pid_t theirs = start({"sleep", "30"}, marker_env("9", "another-worker"));  // its own group too
  guard::started(leader, marker("9"));
  release_and_wait(g);
  EXPECT_EQ(ended_by(leader), SIGTERM);
  EXPECT_EQ(ended_by(escaped), SIGTERM);
  EXPECT_EQ(ended_by(theirs, 0.3), 0) << "the guard killed another worker's step of the same job, step and attempt";
  kill_and_reap(theirs);
}

// A step's descendant that cleared its environment (env -i) and left the
// step's group (setsid) carries nothing the guard knew: killed by SIGKILL,
// the worker left it running with init as its parent.  Its parent is the
// step's: the guard finds it by that, before its TERM ends the parent.
TEST(Guard, StopsAnUnmarkedDescendantInASessionOfItsOwn) {
  std::string file = pid_file("unmarked");
  pid_t g = start_guard(0.2);
  pid_t leader = start({"sh", "-c", "env -i setsid sleep 30 & echo $! >> " + file + "; exec sleep 30"},
                       marker_env("21"));
  pid_t other = start({"sleep", "30"});  // the worker's child, not a step's
  std::vector<pid_t> left = pids_in(file, 1, "sleep");
  ASSERT_EQ(left.size(), 1u) << "the step did not start its detached sleep";
  guard::started(leader, marker("21"));
  release_and_wait(g);
  EXPECT_EQ(ended_by(leader), SIGTERM);
  EXPECT_TRUE(gone_within(left[0], 5)) << "an unmarked descendant in a session of its own outlived its worker";
  EXPECT_EQ(ended_by(other, 0.3), 0) << "the guard killed a process that is no step's";
  ::kill(left[0], SIGKILL);
  kill_and_reap(other);
  ::unlink(file.c_str());
}

// The same one level down, its parent gone before the worker: a marked
// descendant made a session of its own (setsid) and left in it a process
// without the marker, whose parent (a subshell) has exited.  Its group and
// session are the marked one's, which leads them.
TEST(Guard, StopsWhatIsInAGroupAMarkedDescendantLeads) {
  std::string led = pid_file("led"), unmarked = pid_file("led-unmarked");
  pid_t g = start_guard(0.2);
  pid_t leader = start({"sh", "-c",
                        "setsid sh -c '(env -i sleep 30 & echo $! >> " + unmarked + "); exec sleep 30' & echo $! >> " +
                            led + "; exec sleep 30"},
                       marker_env("22"));
  std::vector<pid_t> b = pids_in(led, 1, "sleep"), c = pids_in(unmarked, 1, "sleep");
  ASSERT_EQ(b.size(), 1u) << "the step did not start its detached shell";
  ASSERT_EQ(c.size(), 1u) << "the detached shell did not start its sleep";
  bgexec::proc::ProcStat st;
  ASSERT_TRUE(bgexec::proc::proc_stat(c[0], st));
  ASSERT_EQ(st.pgrp, b[0]) << "the unmarked sleep is in the group the marked one leads";
  ASSERT_NE(st.ppid, b[0]) << "the unmarked sleep's parent, a subshell, has exited";
  guard::started(leader, marker("22"));
  release_and_wait(g);
  EXPECT_EQ(ended_by(leader), SIGTERM);
  EXPECT_TRUE(gone_within(b[0], 5)) << "the marked group leader outlived its worker";
  EXPECT_TRUE(gone_within(c[0], 5)) << "an unmarked process in a marked descendant's group outlived its worker";
  ::kill(b[0], SIGKILL);
  ::kill(c[0], SIGKILL);
  ::unlink(led.c_str());
  ::unlink(unmarked.c_str());
}

// A step leads a session of its own: what it started there in a group of
// its own (setpgid, a shell's job control), without the marker and its
// parent gone, is the step's too, even once the leader has exited (a
// worker killed before it reaped it: the guard still has it live).
TEST(Guard, StopsWhatIsInAStepsSession) {
  std::string file = pid_file("session");
  pid_t g = start_guard(0.2);
  pid_t leader = start({"sh", "-c", "(env -i perl -e 'setpgrp(0, 0); exec q(sleep), 30' & echo $! >> " + file + ")"},
                       marker_env("23"), true);
  std::vector<pid_t> left = pids_in(file, 1, "sleep");
  ASSERT_EQ(left.size(), 1u) << "the step did not start its sleep";
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, leader, &info, WEXITED | WNOWAIT), 0) << "the leader did not exit";
  bgexec::proc::ProcStat st;
  ASSERT_TRUE(bgexec::proc::proc_stat(left[0], st));
  ASSERT_EQ(st.session, leader) << "the sleep is in the step's session";
  ASSERT_EQ(st.pgrp, left[0]) << "the sleep leads a group of its own";
  guard::started(leader, marker("23"));  // exited, not reaped: the worker was killed first
  release_and_wait(g);
  EXPECT_TRUE(gone_within(left[0], 5)) << "a process in a step's session outlived its worker";
  ::kill(left[0], SIGKILL);
  ::waitpid(leader, nullptr, 0);
  ::unlink(file.c_str());
}

TEST(Guard, StopsAStepWhoseWorkerDiedAsItSpawnedIt) {
  // The worker announces a step's marker before the spawn; killed between
  // the spawn and its started(), it left the step running, unknown to the
  // guard, beside the job's next attempt (e2e 29-chaos).
  pid_t g = start_guard(0.2);
  guard::spawning(marker("9"));
  pid_t step = start({"sleep", "30"}, marker_env("9"));  // spawned, never reported
  release_and_wait(g);
  EXPECT_EQ(ended_by(step), SIGTERM) << "a step spawned as its worker died ran on";
}

TEST(Guard, AFailedSpawnWithdrawsItsMarker) {
  pid_t g = start_guard(0.2);
  guard::spawning(marker("11"));
  guard::spawn_failed(marker("11"));
  pid_t other = start({"sleep", "30"}, marker_env("11"));  // not the worker's step
  release_and_wait(g);
  EXPECT_EQ(ended_by(other, 0.3), 0) << "the guard stopped a process of a spawn that failed";
  kill_and_reap(other);
}

TEST(Guard, KillsWhatIgnoresTermAfterTheGrace) {
  pid_t g = start_guard(0.2);
  // SIG_IGN is inherited across exec: both the shell and its sleep ignore TERM.
  pid_t stubborn = start({"sh", "-c", "trap '' TERM; sleep 30 & wait"});
  ASSERT_TRUE(trap_set(stubborn)) << "the shell did not start its sleep";
  guard::started(stubborn, "");
  auto t0 = std::chrono::steady_clock::now();
  release_and_wait(g);
  EXPECT_EQ(ended_by(stubborn), SIGKILL);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200)) << "KILL before the grace";
}

TEST(Guard, NothingLiveNothingDone) {
  pid_t g = start_guard(0.2);
  pid_t p = start({"sleep", "30"});
  guard::started(p, "");
  guard::ended(p);
  auto t0 = std::chrono::steady_clock::now();
  release_and_wait(g);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  EXPECT_EQ(ended_by(p, 0.2), 0);
  kill_and_reap(p);
}

TEST(Guard, AStoppedGuardNeitherBlocksTheWorkerNorLosesARecord) {
  pid_t g = start_guard(0.2);
  pid_t ended = start({"sleep", "30"});
  pid_t live = start({"sleep", "30"});
  ::kill(g, SIGSTOP);
  // Should a write block, the guard is woken after 5 s, so that the test
  // fails (below) rather than hangs.
  std::mutex m;
  std::condition_variable_any cv;
  std::jthread waker([&](std::stop_token stop) {
    std::unique_lock lock(m);
    cv.wait_for(lock, stop, std::chrono::seconds(5), [] { return false; });
    if (!stop.stop_requested()) ::kill(g, SIGCONT);
  });
  // Far more than a pipe holds (64 KiB): what does not fit waits in the worker.
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20000; ++i) {
    guard::started(ended, "");
    guard::ended(ended);
  }
  guard::started(live, "");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << "blocked on a stopped guard";
  waker.request_stop();
  waker.join();
  ::kill(g, SIGCONT);
  // The next records push the rest on as the guard reads.
  pid_t last = start({"sleep", "30"});
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    guard::started(last, "");
    guard::ended(last);
  }
  release_and_wait(g);
  EXPECT_EQ(ended_by(live), SIGTERM) << "a record was lost";
  EXPECT_EQ(ended_by(ended, 0.3), 0) << "a record was lost";
  EXPECT_EQ(ended_by(last, 0.1), 0);
  kill_and_reap(ended);
  kill_and_reap(last);
}

TEST(Guard, AGuardThatDiesIsReplacedAndToldOfTheLiveGroups) {
  pid_t g = start_guard(0.2);
  pid_t before = guarded_sleep();
  kill_guard(g);
  guard::exited(g);  // the worker's SIGCHLD handler says so
  pid_t replacement = guard::pid();
  ASSERT_NE(replacement, 0);
  ASSERT_NE(replacement, g);
  pid_t after = guarded_sleep();
  release_and_wait(replacement);
  EXPECT_EQ(ended_by(before), SIGTERM) << "the new guard was not told of a group live before it";
  EXPECT_EQ(ended_by(after), SIGTERM);
}

TEST(Guard, ADeadGuardFoundByAWriteIsReplacedToo) {
  ::signal(SIGPIPE, SIG_IGN);  // as bgexec's main() has it: a write to the dead guard's pipe fails with EPIPE
  pid_t g = start_guard(0.2);
  pid_t before = guarded_sleep();
  kill_guard(g);
  pid_t after = guarded_sleep();  // EPIPE: replaced here
  pid_t replacement = guard::pid();
  ASSERT_NE(replacement, 0);
  ASSERT_NE(replacement, g);
  release_and_wait(replacement);
  EXPECT_EQ(ended_by(before), SIGTERM);
  EXPECT_EQ(ended_by(after), SIGTERM);
}

TEST(Guard, AGuardThatKeepsDyingIsStartedAgainOnlyTenSecondsOn) {
  pid_t g = start_guard(0.2);
  pid_t live = guarded_sleep();
  kill_guard(g);
  guard::exited(g);
  pid_t second = guard::pid();
  ASSERT_NE(second, 0);
  kill_guard(second);
  guard::exited(second);
  EXPECT_EQ(guard::pid(), 0) << "started again within 10 s of the last start";
  std::this_thread::sleep_for(std::chrono::milliseconds(10100));
  pid_t later = guarded_sleep();  // the next step: 10 s on, a guard again
  pid_t third = guard::pid();
  ASSERT_NE(third, 0);
  release_and_wait(third);
  EXPECT_EQ(ended_by(live), SIGTERM) << "the third guard was not told of a group live before it";
  EXPECT_EQ(ended_by(later), SIGTERM);
}


// The worker alive but not renewing (stopped by SIGSTOP, frozen): the pipe
// stays open, and the guard stops the steps of the job whose fence passed,
// those of that job alone.
TEST(GuardFence, StopsAJobsStepsOnceItsFenceHasPassed) {
  pid_t g = start_guard(0.2);
  auto t0 = std::chrono::steady_clock::now();  // (before the fence: it is 300 ms from here at least)
  guard::fence(job_id("f1"), in_ms(300));
  guard::fence(job_id("f2"), in_ms(60000));
  pid_t fenced = job_step("f1");
  pid_t other = job_step("f2");
  EXPECT_EQ(ended_by(fenced), SIGTERM) << "the steps of a job past its fence run on";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(250)) << "stopped before its fence";
  EXPECT_EQ(ended_by(other, 0.3), 0) << "the guard stopped a job whose fence has not passed";
  guard::ended(fenced);
  release_and_wait(g);  // the guard carried on: the last live group is stopped at the end
  EXPECT_EQ(ended_by(other), SIGTERM);
}

TEST(GuardFence, ARenewedFenceKeepsTheStepsRunning) {
  pid_t g = start_guard(0.2);
  // Three seconds of renewals, each 2 s ahead: the first fence (2 s) passes
  // during them, and a late renewal (a stalled test thread) has 1.9 s.
  guard::fence(job_id("r"), in_ms(2000));
  pid_t step = job_step("r");
  for (int i = 0; i < 30; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    guard::fence(job_id("r"), in_ms(2000));
  }
  EXPECT_EQ(ended_by(step, 0.05), 0) << "stopped although its fence was renewed";
  EXPECT_EQ(ended_by(step, 10), SIGTERM) << "not stopped once the renewals stopped";
  guard::ended(step);
  release_and_wait(g);
}

TEST(GuardFence, AFenceToldBeforeTheStepStartsCounts) {
  // The worker sends a job's fence with the job's first step: a fence set
  // while the job had none reaches the guard then.
  pid_t g = start_guard(0.2);
  guard::fence(job_id("b"), in_ms(200));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  pid_t step = job_step("b");  // started after its fence: stopped at once
  EXPECT_EQ(ended_by(step, 5), SIGTERM);
  guard::ended(step);
  release_and_wait(g);
}

TEST(GuardFence, AStepBeingSpawnedIsStoppedAtItsJobsFence) {
  // The worker stopped (SIGSTOP) between the spawn and its started(): the
  // fence sent with the announcement covers the step.
  pid_t g = start_guard(0.2);
  guard::fence(job_id("sp"), in_ms(300));
  guard::spawning(marker("sp"));
  pid_t step = start({"sleep", "30"}, marker_env("sp"));
  EXPECT_EQ(ended_by(step), SIGTERM) << "a step whose worker stopped as it spawned it ran past its fence";
  release_and_wait(g);
}

TEST(GuardFence, AForgottenJobsStepsAreLeftToTheEnd) {
  pid_t g = start_guard(0.2);
  guard::fence(job_id("x"), in_ms(1000));  // (the spawn and the forget within a second)
  pid_t step = job_step("x");
  guard::forget(job_id("x"));
  EXPECT_EQ(ended_by(step, 1.5), 0) << "stopped by the fence of a job that is over";
  release_and_wait(g);
  EXPECT_EQ(ended_by(step), SIGTERM);
}

TEST(GuardFence, AReplacementGuardIsToldTheFences) {
  pid_t g = start_guard(0.2);
  guard::fence(job_id("n"), in_ms(700));
  pid_t step = job_step("n");
  kill_guard(g);
  guard::exited(g);
  pid_t replacement = guard::pid();
  ASSERT_NE(replacement, 0);
  EXPECT_EQ(ended_by(step, 5), SIGTERM) << "the new guard was not told of the fence";
  guard::ended(step);
  release_and_wait(replacement);
}

// A stop takes up to the kill grace (here 5 s, for a step that ignores
// TERM): a fence that passes meanwhile is kept on time (0.4 s), not after it
// (5.2 s at least).
TEST(GuardFence, AFenceIsKeptWhileAnotherJobIsBeingStopped) {
  pid_t g = start_guard(5.0);
  // SIG_IGN is inherited across exec: both the shell and its sleep ignore TERM.
  pid_t slow = start({"sh", "-c", "trap '' TERM; sleep 30 & wait"}, marker_env("slow"));
  ASSERT_TRUE(trap_set(slow)) << "the shell did not start its sleep";
  auto t0 = std::chrono::steady_clock::now();
  guard::fence(job_id("slow"), in_ms(200));
  guard::fence(job_id("next"), in_ms(400));
  guard::started(slow, marker("slow"));
  pid_t next = job_step("next");
  EXPECT_EQ(ended_by(next, 10), SIGTERM);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(3000))
      << "the second fence waited for the first job's stop (the kill grace)";
  EXPECT_EQ(ended_by(slow, 10), SIGKILL);
  guard::ended(slow);
  guard::ended(next);
  release_and_wait(g);
}

// The two ways the worker lists its children (to find orphans it adopted as
// subreaper): the kernel's per-thread lists, and every process's parent in
// /proc/PID/stat, used where the kernel has no such lists.  Both must find a
// child forked by a thread that has since exited (the kernel moves it to a
// live thread's list), and neither a grandchild.
TEST(ProcFs, BothWaysOfListingChildrenFindTheSameOnes) {
  std::vector<pid_t> want = {start({"sleep", "30"}), start({"sh", "-c", "sleep 30 & wait"})};
  std::thread([&] { want.push_back(start({"sleep", "30"})); }).join();
  // the shell's sleep, once the shell has started it
  pid_t grandchild = 0;
  for (int i = 0; i < 500 && grandchild == 0; ++i) {
    for (pid_t p : bgexec::proc::children_by_stat(want[1])) grandchild = p;
    if (grandchild == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NE(grandchild, 0) << "the shell did not start its sleep";
  auto sorted = [](std::vector<pid_t> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  auto check = [&](const std::vector<pid_t>& kids, const char* how) {
    for (pid_t p : want) EXPECT_NE(std::find(kids.begin(), kids.end(), p), kids.end()) << how << " missed " << p;
    EXPECT_EQ(std::find(kids.begin(), kids.end(), grandchild), kids.end()) << how << " listed a grandchild";
  };
  std::vector<pid_t> by_stat = bgexec::proc::children_by_stat(::getpid());
  check(by_stat, "children_by_stat");
  if (std::vector<pid_t> listed; bgexec::proc::listed_children(listed)) {
    check(listed, "listed_children");
    EXPECT_EQ(sorted(listed), sorted(by_stat));
  }
  for (pid_t p : want) kill_and_reap(p);
}
