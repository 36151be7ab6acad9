// Child processes (see child.hpp).
#include "proc/child.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <system_error>

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

void Child::init_reaper(asio::any_io_executor ex) {
  if (reaper()) return;
  reaper() = std::make_unique<asio::signal_set>(ex, SIGCHLD);
  arm_reaper();
}

void Child::arm_reaper() {
  reaper()->async_wait([](const boost::system::error_code& ec, int) {
    if (ec) return;
    // Copy: poll() unregisters exited children.
    auto live = registry();
    for (Child* c : live) c->poll();
    arm_reaper();
  });
}

void Child::kill_all() {
  for (Child* c : registry()) ::kill(-c->pid_, SIGKILL);
}

Child::Child(asio::any_io_executor ex, pid_t pid, int in, int out, int err)
    : pid_(pid), in_(ex, in), out_(ex, out), err_(ex, err),
      done_(ex, asio::steady_timer::time_point::max()), kill_timer_(ex) {
  registry().insert(this);
}

Child::~Child() {
  if (!exited_) {
    // Never leave a process behind: kill the group and reap synchronously.
    ::kill(-pid_, SIGKILL);
    int st;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {}
  }
  registry().erase(this);
}

std::shared_ptr<Child> Child::spawn(asio::any_io_executor ex, const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env) {
  if (argv.empty()) throw std::system_error(EINVAL, std::generic_category(), "empty argv");
  Pipe in, out, err;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in.fd[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err.fd[1], 2);
  // Nothing else of the worker's reaches a step: a descriptor opened without
  // O_CLOEXEC (libpq's cancel socket, on its thread) would be inherited.
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> av, ev;
  for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  for (const auto& e : env) ev.push_back(const_cast<char*>(e.c_str()));
  ev.push_back(nullptr);
  pid_t pid = -1;
  int rc = argv[0].find('/') == std::string::npos
               ? posix_spawnp(&pid, av[0], &fa, &attr, av.data(), ev.data())
               : posix_spawn(&pid, av[0], &fa, &attr, av.data(), ev.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "spawn " + argv[0]);
  int pin = in.take(1), pout = out.take(0), perr = err.take(0);
  for (int f : {pin, pout, perr}) ::fcntl(f, F_SETFL, ::fcntl(f, F_GETFL) | O_NONBLOCK);
  auto c = std::shared_ptr<Child>(new Child(ex, pid, pin, pout, perr));  // private ctor
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

void Child::terminate(double grace_s) {
  if (exited_) return;
  signal_group(SIGTERM);
  kill_timer_.expires_after(std::chrono::milliseconds(static_cast<long>(grace_s * 1000)));
  // A weak reference: the timer's handler may already be queued when the
  // leader is reaped and the last owner lets the Child go.
  kill_timer_.async_wait([self = weak_from_this()](const boost::system::error_code& ec) {
    if (auto child = self.lock(); child && !ec) child->signal_group(SIGKILL);
  });
}

}  // namespace bgexec::proc
