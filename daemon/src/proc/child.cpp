// Child processes (see child.hpp).
#include "proc/child.hpp"

#include "proc/guard.hpp"
#include "proc/procfs.hpp"
#include "proc/spawn_attr.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <set>
#include <string_view>
#include <system_error>
#include <thread>

namespace bgexec::proc {

namespace {

// Live (not yet reaped) children, for the SIGCHLD handler; single-threaded loop.
std::set<Child*>& registry() {
  static std::set<Child*> r;
  return r;
}

std::unique_ptr<asio::signal_set>& reaper() {
  static std::unique_ptr<asio::signal_set> s;
  return s;
}

// Whether this process is the child subreaper of its steps (init_reaper).
bool& subreaping() {
  static bool on = false;
  return on;
}

Child* registered(pid_t pid) {
  for (Child* c : registry())
    if (c->pid() == pid) return c;
  return nullptr;
}

// This process's children (procfs.hpp).
std::vector<pid_t> children() {
  std::vector<pid_t> kids;
  if (!listed_children(kids)) kids = children_by_stat(::getpid());
  return kids;
}

// Children that are no registered Child: orphans adopted as subreaper.
std::vector<pid_t> orphans() {
  std::vector<pid_t> kids = children();
  std::erase_if(kids, [](pid_t pid) { return registered(pid) != nullptr || pid == guard::pid(); });
  return kids;
}

// SIGKILLs an orphan and the process group it leads, if any (setsid made it
// lead one; a group with its pid as id can only be one it made).  Neither id
// can be reused meanwhile: the orphan is a child of this process, unreaped.
void kill_orphan(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
}

// The value of env's PATH, or nullptr when it has none.
const char* path_of(const std::vector<std::string>& env) {
  for (const auto& e : env)
    if (e.starts_with("PATH=")) return e.c_str() + 5;
  return nullptr;
}

// Looks `name` (no '/') up in the directories of `path` as execvp does:
// the first executable regular file of that name (an empty directory is the
// working directory, which the child shares).  Empty, with the error in
// `err`, when there is none: EACCES when one was found but cannot be run,
// else ENOENT.
std::string search_path(std::string_view path, const std::string& name, int& err) {
  err = ENOENT;
  for (std::size_t at = 0;;) {
    std::size_t end = std::min(path.find(':', at), path.size());
    std::string file = std::string(end > at ? path.substr(at, end - at) : ".") + "/" + name;
    struct stat st {};
    if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (::access(file.c_str(), X_OK) == 0) return file;
      err = EACCES;
    }
    if (end == path.size()) return {};
    at = end + 1;
  }
}

// Closes both ends of a pipe pair on scope exit unless released.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (pipe2(fd, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
  }
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  int take(int i) {
    int f = fd[i];
    fd[i] = -1;
    return f;
  }
};

}  // namespace

std::string Exit::describe() const {
  if (signal) return "killed by signal " + std::to_string(signal);
  return "exit status " + std::to_string(code);
}

void Child::init_reaper(asio::any_io_executor ex, bool subreaper) {
  if (reaper()) return;
#ifdef __linux__
  subreaping() = subreaper && ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
#else
  (void)subreaper;  // orphans go to init, as they always did
#endif
  reaper() = std::make_unique<asio::signal_set>(ex, SIGCHLD);
  arm_reaper();
}

void Child::arm_reaper() {
  reaper()->async_wait([](const boost::system::error_code& ec, int) {
    if (ec) return;
    // Copy: poll() unregisters exited children.
    auto live = registry();
    for (Child* c : live) c->poll();
    // Every reap of a registered Child is followed by this handler (its
    // SIGCHLD), so a step's end always reaches the cull.  A killed orphan's
    // own children are this process's before its SIGCHLD is sent: the cull
    // that follows its reap finds them.
    if (subreaping()) {
      reap_exited();
      cull_orphans();
    }
    arm_reaper();
  });
}

void Child::reap_exited() {
  for (;;) {
    siginfo_t info{};
    int rc;
    while ((rc = ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT)) != 0 && errno == EINTR) {}
    if (rc != 0 || info.si_pid == 0) return;
    // WNOWAIT: a registered Child's status is its poll()'s to take.
    if (Child* c = registered(info.si_pid)) {
      if (!c->poll()) return;  // never loop on one it did not reap
    } else {
      while ((rc = ::waitpid(info.si_pid, nullptr, 0)) < 0 && errno == EINTR) {}
      if (rc < 0) return;
      guard::exited(info.si_pid);  // the step guard died: another takes its place
    }
  }
}

void Child::cull_orphans() {
  for (pid_t pid : orphans()) {
    std::string marker = marker_of_pid(pid);
    // Unmarked, it may belong to any step: it lives while one does.  As a
    // PID namespace's init (a container's first process) every orphan of
    // the namespace comes here, a `docker exec`'s too: unmarked, not ours.
    if (marker.empty() && ::getpid() == 1) continue;
    bool step_runs = marker.empty() ? !registry().empty()
                                    : std::any_of(registry().begin(), registry().end(),
                                                  [&](const Child* c) { return c->marker_ == marker; });
    if (!step_runs) kill_orphan(pid);
  }
}

void Child::kill_all() {
  for (Child* c : registry()) ::kill(-c->pid_, SIGKILL);
  if (subreaping())
    for (pid_t pid : orphans()) kill_orphan(pid);
}

void Child::kill_orphans() {
  if (!subreaping()) return;
  // A killed orphan's own children come to this process as it dies, and so
  // do those of a live child's process killed with its group (kill_all):
  // kill again until no orphan is left and every child is reaped (poll()
  // kills its group once more), for a second at most (one in
  // uninterruptible sleep dies only when it wakes).  Before the children
  // are reaped, what left their groups may still have its parent there.
  for (int round = 0; round < 100; ++round) {
    reap_exited();
    std::vector<pid_t> strays = orphans();
    if (strays.empty() && registry().empty()) return;
    for (pid_t pid : strays) kill_orphan(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Child::Child(asio::any_io_executor ex, pid_t pid, int in, int out, int err, std::string marker)
    : pid_(pid), marker_(std::move(marker)), in_(ex, in), out_(ex, out), err_(ex, err),
      done_(ex, asio::steady_timer::time_point::max()), kill_timer_(ex) {
  registry().insert(this);
}

Child::~Child() {
  if (!exited_) {
    // Never leave a process behind: kill the group and reap synchronously.
    ::kill(-pid_, SIGKILL);
    int st;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {}
    guard::ended(pid_);
  }
  registry().erase(this);
}

std::shared_ptr<Child> Child::spawn(asio::any_io_executor ex, const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env) {
  if (argv.empty()) throw std::system_error(EINVAL, std::generic_category(), "empty argv");
  // A name without '/' is looked up on the child's PATH, the step's (its
  // env's over the worker's), as its shell would: posix_spawnp searches the
  // worker's.  The worker's, as before, only when env has none.
  std::string program = argv[0];
  bool search = program.find('/') == std::string::npos;
  if (const char* path = search ? path_of(env) : nullptr) {
    int error = 0;
    program = search_path(path, argv[0], error);
    if (program.empty()) throw std::system_error(error, std::generic_category(), "spawn " + argv[0]);
    search = false;
  }
  Pipe in, out, err;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in.fd[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err.fd[1], 2);
  // Nothing else of the worker's reaches a step: a descriptor opened without
  // O_CLOEXEC (libpq's cancel socket, on its thread) would be inherited.
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  SpawnAttr sa(Detach::session);
  std::vector<char*> av, ev;
  for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  for (const auto& e : env) ev.push_back(const_cast<char*>(e.c_str()));
  ev.push_back(nullptr);
  // The guard hears of the step before it exists: a worker killed between
  // the spawn and started() would leave it running, unknown to the guard.
  std::string marker = marker_of(env);
  guard::spawning(marker);
  pid_t pid = -1;
  int rc = search ? posix_spawnp(&pid, av[0], &fa, &sa.attr, av.data(), ev.data())
                  : posix_spawn(&pid, program.c_str(), &fa, &sa.attr, av.data(), ev.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    guard::spawn_failed(marker);
    throw std::system_error(rc, std::generic_category(), "spawn " + argv[0]);
  }
  int pin = in.take(1), pout = out.take(0), perr = err.take(0);
  for (int f : {pin, pout, perr}) ::fcntl(f, F_SETFL, ::fcntl(f, F_GETFL) | O_NONBLOCK);
  auto c = std::shared_ptr<Child>(new Child(ex, pid, pin, pout, perr, std::move(marker)));  // private ctor
  guard::started(pid, c->marker_);
  c->poll();  // it may already be gone
  return c;
}

bool Child::poll() {
  if (exited_) return true;
  siginfo_t info{};
  if (::waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != pid_)
    return false;
  // The leader is a zombie, so its pid (the group id) cannot be reused yet:
  // kill whatever it left in its group, then reap it.
  ::kill(-pid_, SIGKILL);
  int st = 0;
  while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {}
  guard::ended(pid_);
  exited_ = true;
  if (WIFEXITED(st)) exit_ = {WEXITSTATUS(st), 0};
  else if (WIFSIGNALED(st)) exit_ = {-1, WTERMSIG(st)};
  registry().erase(this);
  kill_timer_.cancel();
  done_.cancel();
  return true;
}

asio::awaitable<Exit> Child::wait() {
  while (!exited_) {
    if (poll()) break;
    co_await done_.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  co_return exit_;
}

void Child::signal_group(int sig) {
  if (!exited_) ::kill(-pid_, sig);
}

bool Child::terminate(double grace_s) {
  // Reaped now if it has exited: a leader that exited before its step's
  // deadline, its output still being read, was not ended by it.
  if (poll()) return false;
  signal_group(SIGTERM);
  // A second end of the same step (a stop in a step timeout's grace, a
  // deadline, a shutdown, a lost lease) keeps the first one's KILL, or an
  // earlier one: re-armed each time, the KILL came a whole grace after the
  // last, and a step that ignores TERM outlived its promised grace.
  const auto at = asio::steady_timer::clock_type::now() +
                  std::chrono::milliseconds(static_cast<long>(grace_s * 1000));
  if (kill_armed_ && kill_timer_.expiry() <= at) return true;
  kill_armed_ = true;
  kill_timer_.expires_at(at);
  // A weak reference: the timer's handler may already be queued when the
  // leader is reaped and the last owner lets the Child go.
  kill_timer_.async_wait([self = weak_from_this()](const boost::system::error_code& ec) {
    if (auto child = self.lock(); child && !ec) child->signal_group(SIGKILL);
  });
  return true;
}

std::string unrunnable(const std::string& program) {
  int err = 0;
  if (program.find('/') == std::string::npos) {
    const char* path = std::getenv("PATH");
    if (search_path(path ? path : "/usr/bin:/bin", program, err).empty()) return std::strerror(err);
    return {};
  }
  struct stat st {};
  if (::stat(program.c_str(), &st) != 0) return std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (::access(program.c_str(), X_OK) != 0) return std::strerror(errno);
  return {};
}

}  // namespace bgexec::proc
