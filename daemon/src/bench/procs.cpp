// Child processes of the benchmark (see procs.hpp).
#include "bench/procs.hpp"

#include "proc/procfs.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace bgexec::bench {

namespace {

// Pids to kill on interrupt; a fixed array so the signal handler reads it safely.
constexpr std::size_t max_tracked = 1024;
std::array<std::atomic<pid_t>, max_tracked> tracked{};

// Kills every tracked child and exits (async-signal-safe calls only).
void on_interrupt(int sig) {
  for (auto& p : tracked) {
    pid_t pid = p.load();
    if (pid > 0) ::kill(pid, SIGKILL);
  }
  ::_exit(128 + sig);
}

// argv/envp arrays for posix_spawn; the strings must outlive the call.
std::vector<char*> c_array(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string self_exe() {
  std::vector<char> buf(4096);
  ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) throw std::runtime_error("cannot resolve /proc/self/exe");
  return std::string(buf.data(), static_cast<std::size_t>(n));
}

pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
            const std::string& log_path) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  for (const auto& kv : extra_env) {
    auto name = kv.substr(0, kv.find('=') + 1);
    env.erase(std::remove_if(env.begin(), env.end(), [&](const std::string& s) { return s.rfind(name, 0) == 0; }),
              env.end());
    env.push_back(kv);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  const char* out = log_path.empty() ? "/dev/null" : log_path.c_str();
  posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  auto a = c_array(argv);
  auto e = c_array(env);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, a.data(), e.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  track(pid);
  return pid;
}

std::string run_capture(const std::vector<std::string>& argv, int& exit_code) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  auto a = c_array(argv);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, a.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  track(pid);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) out.append(buf, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  untrack(pid);
  exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

double stop_pids(const std::vector<pid_t>& pids, double grace_s) {
  double cpu = 0;
  auto reap = [&cpu](pid_t p, int options) {
    struct rusage ru {};
    int status = 0;
    pid_t r = ::wait4(p, &status, options, &ru);
    if (r == p)
      cpu += static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
             static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    return r;
  };
  for (pid_t p : pids) ::kill(p, SIGTERM);
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  std::vector<pid_t> left = pids;
  while (!left.empty()) {
    std::vector<pid_t> still;
    for (pid_t p : left) {
      if (reap(p, WNOHANG) == 0) still.push_back(p);
      else untrack(p);
    }
    left.swap(still);
    if (left.empty()) break;
    if (std::chrono::steady_clock::now() >= until) {
      for (pid_t p : left) {
        ::kill(p, SIGKILL);
        reap(p, 0);
        untrack(p);
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cpu;
}

long rss_kib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}

long private_kib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string line;
  long sum = -1;
  while (std::getline(f, line))
    if (line.rfind("Private_Clean:", 0) == 0 || line.rfind("Private_Dirty:", 0) == 0)
      sum = std::max(sum, 0L) + std::strtol(line.c_str() + line.find(':') + 1, nullptr, 10);
  return sum;
}

pid_t guard_of(pid_t worker) {
  pid_t found = 0;
  proc::for_each_pid_entry("/proc", [&](const char* name) {
    std::ifstream cmd(std::string("/proc/") + name + "/cmdline");
    std::string arg0, arg1;
    if (!std::getline(cmd, arg0, '\0') || !std::getline(cmd, arg1, '\0') || arg1 != "__guard") return;
    pid_t pid = static_cast<pid_t>(std::atoi(name));
    if (proc::ProcStat st; proc::proc_stat(pid, st) && st.ppid == worker) found = pid;
  });
  return found;
}

double cpu_seconds(pid_t pid, const std::string& comm) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return -1;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
  auto open = line.find('('), close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return -1;
  if (line.compare(open + 1, close - open - 1, comm) != 0) return -1;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  // After comm: state is field 3; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  long hz = ::sysconf(_SC_CLK_TCK);
  return hz > 0 ? static_cast<double>(utime + stime) / static_cast<double>(hz) : -1;
}

HostCpu host_cpu() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  unsigned long long v[8] = {0};  // user nice system idle iowait irq softirq steal
  f >> cpu;
  for (auto& x : v) f >> x;
  HostCpu h;
  if (cpu != "cpu") return h;
  h.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  h.total = h.busy + v[3] + v[4];
  return h;
}

void track(pid_t pid) {
  for (auto& p : tracked) {
    pid_t zero = 0;
    if (p.compare_exchange_strong(zero, pid)) return;
  }
}

void untrack(pid_t pid) {
  for (auto& p : tracked) {
    pid_t want = pid;
    if (p.compare_exchange_strong(want, 0)) return;
  }
}

void install_interrupt_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace bgexec::bench
