#pragma once
// Child processes for step runners: posix_spawn into a new session (and so a
// new process group), with non-blocking pipes wrapped in Asio descriptors and
// exit observed via SIGCHLD.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace bgexec::proc {

namespace asio = boost::asio;

struct Exit {
  int code = -1;    // exit status, -1 when killed by a signal
  int signal = 0;   // terminating signal, 0 when exited normally
  bool ok() const { return code == 0 && signal == 0; }
  std::string describe() const;
};

// Why `program` cannot be started now, as Child::spawn would run it (a
// name without '/' looked up on the worker's PATH): "No such file or
// directory", "Permission denied", "not a regular file"; empty when it can.
// The worker says so at its start, for each --action, rather than only in
// the errors of those jobs.
std::string unrunnable(const std::string& program);

// One spawned process, leader of its own session and process group (no
// controlling terminal: spawn_attr.hpp, Detach::session).  The group is
// SIGKILLed once the leader exits, so no stray descendant outlives a step;
// one that left the group is found as an orphan (see init_reaper).
class Child : public std::enable_shared_from_this<Child> {
 public:
  // Spawns argv with env (argv[0] without '/' looked up on env's PATH, or,
  // when env has none, on the worker's); throws std::system_error.  env's marker_vars (procfs.hpp: BGEXEC_JOB_ID,
  // BGEXEC_STEP_ID, BGEXEC_ATTEMPT, BGEXEC_WORKER_INSTANCE) are the step's
  // marker, which its descendants inherit.
  static std::shared_ptr<Child> spawn(asio::any_io_executor ex, const std::vector<std::string>& argv,
                                      const std::vector<std::string>& env);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  bool exited() const { return exited_; }
  asio::posix::stream_descriptor& in() { return in_; }
  asio::posix::stream_descriptor& out() { return out_; }
  asio::posix::stream_descriptor& err() { return err_; }
  // Waits until the leader has exited and been reaped.
  asio::awaitable<Exit> wait();
  // Sends sig to the whole process group (no-op once reaped).
  void signal_group(int sig);
  // Sends SIGTERM to the group, then SIGKILL after grace_s if the leader
  // still runs; false when the leader had already exited (nothing sent).
  bool terminate(double grace_s);

  // Installs the SIGCHLD handler on ex; call once before the first spawn.
  // With `subreaper` (Linux; the worker only) this process becomes the child
  // subreaper of its steps: a descendant that left its step's group comes to
  // it when its parent dies, not to init, and the handler reaps such orphans
  // and SIGKILLs each one (with its group) whose step has ended: it carries
  // the marker of no live Child, or none at all while no Child is live.
  static void init_reaper(asio::any_io_executor ex, bool subreaper);
  // SIGKILLs every live child's group and every orphan (second signal, fatal exit).
  static void kill_all();
  // SIGKILLs every orphan, and those that come to this process as they die,
  // until none is left and every child is reaped, for a second at most (the
  // worker's exit, once its jobs have ended; after kill_all, at a second
  // signal, what left a killed group comes here once its parent dies).
  static void kill_orphans();

 private:
  Child(asio::any_io_executor ex, pid_t pid, int in, int out, int err, std::string marker);
  // Checks (without reaping first) whether the leader exited; kills the group, then reaps.
  bool poll();
  static void arm_reaper();
  // Subreaper: reaps every exited child, a registered one through its poll().
  static void reap_exited();
  // Subreaper: SIGKILLs the orphans whose step has ended.
  static void cull_orphans();

  pid_t pid_;
  std::string marker_;  // empty: env carried none
  asio::posix::stream_descriptor in_, out_, err_;
  asio::steady_timer done_;
  asio::steady_timer kill_timer_;
  bool kill_armed_ = false;  // terminate() set kill_timer_
  bool exited_ = false;
  Exit exit_;
};

}  // namespace bgexec::proc
