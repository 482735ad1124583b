// `tiermem run` (run.h): checks the command line, sets up the environment (the preload library
// and the TIERMEM_* options), starts the program, passes signals on, returns its status.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "tiermem/options.hpp"
#include "tools/tiermem/run.h"

extern char** environ;

namespace tiermem::tools {
namespace {

// Signals passed on to the program. A terminal's ^C or ^\ (si_code SI_KERNEL) already reached
// the program through its process group, so those are not sent twice.
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGALRM};
volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_child_group = 0;  // the child leads a process group of its own (RunArgs::timeout_s)
volatile sig_atomic_t g_passed_on = 0;    // RunOutcome::passed_on

void Forward(int sig, siginfo_t* info, void*) {
  const pid_t child = g_child;
  if (child <= 0) return;
  if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT) g_passed_on = sig;
  if (g_child_group != 0) {
    kill(-child, sig);  // the terminal's signals reach tiermem's group only
    return;
  }
  if ((sig == SIGINT || sig == SIGQUIT) && info != nullptr && info->si_code == SI_KERNEL) return;
  kill(child, sig);
}

std::string Hex(size_t bytes) {
  std::ifstream f("/dev/urandom", std::ios::binary);
  std::string out;
  static const char kDigits[] = "0123456789abcdef";
  for (size_t i = 0; i < bytes && f; ++i) {
    const unsigned char c = static_cast<unsigned char>(f.get());
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// The options of this run, checked by the option table: the flags first, then --set (which
// may override them). Refuses a bad name or value, naming it.
bool CollectOptions(const RunArgs& a, Options* o, std::string* error) {
  if (!a.dram_limit.empty()) o->Set("dram_limit", a.dram_limit);
  if (!a.cxl_limit.empty()) o->Set("cxl_limit", a.cxl_limit);
  if (!a.stats.empty()) o->Set("stats", a.stats);
  for (const std::string& kv : a.set) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      *error = "--set " + kv + ": expected NAME=VALUE (see `tiermemctl options`)";
      return false;
    }
    o->Set(std::string_view(kv).substr(0, eq), std::string_view(kv).substr(eq + 1));
  }
  if (!o->status().ok()) {
    *error = o->status().message();
    return false;
  }
  return true;
}

std::string Remotes(const RunArgs& a, const std::map<std::string, std::string>& env, const LocalMemd* memd) {
  std::string out;
  auto add = [&out](const std::string& url) { out += (out.empty() ? "" : ",") + url; };
  auto it = env.find("TIERMEM_REMOTE");  // --set remote=... joins the --remote ones
  if (it != env.end() && !it->second.empty()) add(it->second);
  for (const std::string& r : a.remote) add(r);
  if (memd != nullptr) add(memd->url());
  return out;
}

std::vector<std::string> EnvironmentList(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

// The program's stderr through a pipe: a thread passes it on to tiermem's stderr as it comes and
// keeps its end for the tail (RunArgs::stderr_tail_lines).
class StderrTee {
 public:
  explicit StderrTee(size_t lines) : lines_(lines) {
    if (lines_ > 0 && pipe2(fds_, O_CLOEXEC) != 0) fds_[0] = fds_[1] = -1;
  }
  StderrTee(const StderrTee&) = delete;
  StderrTee& operator=(const StderrTee&) = delete;
  ~StderrTee() { (void)Finish(); }
  // The pipe's write end, for the child's fd 2; -1: the child keeps tiermem's stderr.
  int child_fd() const { return fds_[1]; }
  // In the parent, once the child has its copy: the reader starts.
  void Started() {
    if (fds_[1] < 0) return;
    close(fds_[1]);
    fds_[1] = -1;
    reader_ = std::thread([this] { Read(); });
  }
  // Once the program has ended: what it (and the descendants still writing) left in the pipe is
  // passed on, for a second at most, then the pipe closes; the last lines.
  std::string Finish() {
    if (!reader_.joinable()) {
      for (int& fd : fds_) {
        if (fd >= 0) close(fd);
        fd = -1;
      }
      return "";
    }
    ended_.store(true);
    reader_.join();
    close(fds_[0]);
    fds_[0] = -1;
    return Tail();
  }

 private:
  void Read() {
    using Clock = std::chrono::steady_clock;
    char buf[4096];
    Clock::time_point deadline = Clock::time_point::max();
    for (;;) {
      if (ended_.load() && deadline == Clock::time_point::max()) deadline = Clock::now() + std::chrono::seconds(1);
      if (Clock::now() >= deadline) return;
      pollfd p{fds_[0], POLLIN, 0};
      const int ready = poll(&p, 1, 100);
      if (ready < 0) {
        if (errno != EINTR) return;
        continue;
      }
      if (ready == 0) {
        if (ended_.load()) return;  // the program has ended and nothing more came
        continue;
      }
      const ssize_t n = read(fds_[0], buf, sizeof(buf));
      if (n == 0 || (n < 0 && errno != EINTR)) return;
      if (n < 0) continue;
      for (ssize_t done = 0; done < n;) {
        const ssize_t w = write(2, buf + done, static_cast<size_t>(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += w;
      }
      kept_.append(buf, static_cast<size_t>(n));
      if (kept_.size() > kKeep) kept_.erase(0, kept_.size() - kKeep / 2);
    }
  }
  // The last lines_ lines kept (a last line without its newline counts), without the last newline.
  std::string Tail() const {
    size_t end = kept_.size();
    if (end > 0 && kept_[end - 1] == '\n') --end;
    size_t at = end;
    for (size_t n = 0; at > 0; --at) {
      if (kept_[at - 1] == '\n' && ++n == lines_) break;
    }
    return kept_.substr(at, end - at);
  }
  static constexpr size_t kKeep = 32 << 10;  // bytes kept for the tail
  size_t lines_;
  int fds_[2] = {-1, -1};
  std::thread reader_;
  std::atomic<bool> ended_{false};
  std::string kept_;
};

// Stops the program's process group once `seconds` have passed without Ended(): SIGTERM, then
// SIGKILL 5 s later.
class Stopper {
 public:
  Stopper(pid_t group, double seconds) {
    if (seconds <= 0) return;
    thread_ = std::thread([this, group, seconds] {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return ended_; })) return;
      fired_ = true;
      kill(-group, SIGTERM);
      if (!cv_.wait_for(lock, std::chrono::seconds(5), [this] { return ended_; })) kill(-group, SIGKILL);
    });
  }
  Stopper(const Stopper&) = delete;
  Stopper& operator=(const Stopper&) = delete;
  ~Stopper() { Ended(); }
  // The program has ended (idempotent); whether it was stopped.
  bool Ended() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ended_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return fired_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool ended_ = false, fired_ = false;
  std::thread thread_;
};

// Forks and execs the program with `env`; the caller's signals are forwarded to it. `err_fd`,
// when not -1, becomes its stderr; `own_group`: it leads a process group of its own.
pid_t Spawn(const std::vector<std::string>& command, const std::vector<std::string>& env, int err_fd, bool own_group) {
  std::vector<char*> argv, envp;
  for (const auto& s : command) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  for (const auto& s : env) envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &old);  // no forward before g_child is set
  const pid_t pid = fork();
  if (pid == 0) {
    for (int sig : kForwarded) signal(sig, SIG_DFL);
    if (err_fd >= 0 && dup2(err_fd, 2) < 0) _exit(126);
    if (own_group) setpgid(0, 0);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    execvpe(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "tiermem run: %s: %s\n", argv[0], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
  }
  if (pid > 0) {
    if (own_group) setpgid(pid, pid);  // as the child does: set before any signal is passed on
    g_child_group = own_group ? 1 : 0;
    g_child = pid;
  }
  sigprocmask(SIG_SETMASK, &old, nullptr);
  return pid;
}

// Waits for the program: its exit status as a shell gives it (128+N for signal N; 1 when it
// could not be waited for), with the exit code or the signal in *out.
int WaitStatus(pid_t pid, RunOutcome* out) {
  int status = 0;
  struct rusage ru {};
  while (wait4(pid, &status, 0, &ru) < 0) {
    if (errno != EINTR) return 1;
  }
  out->peak_rss_bytes = static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // reported in KiB
  g_child = 0;
  out->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  out->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

}  // namespace

std::string FindBeside(const std::string& name, const std::vector<std::string>& relative_dirs) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  self[n] = 0;
  std::string dir(self);
  dir = dir.substr(0, dir.rfind('/'));
  for (const std::string& rel : relative_dirs) {
    const std::string p = dir + "/" + rel + (rel.empty() ? "" : "/") + name;
    if (access(p.c_str(), R_OK) == 0) return p;
  }
  return "";
}

// Installed: bin/tiermem beside lib/ (the relative path CMake computed); in the build tree:
// build/tools/tiermem beside build/allocator/preload/ and build/tools/memd/.
std::string FindPreloadLibrary() {
  return FindBeside("libtiermem-preload.so", {TIERMEM_RUN_LIBDIR_FROM_BINDIR, "../allocator/preload"});
}

std::string FindMemd() { return FindBeside("tiermem-memd", {"", "memd"}); }

int RunCommand(const RunArgs& a, RunOutcome* out) {
  Options opts;
  std::string error;
  if (!CollectOptions(a, &opts, &error)) {
    std::fprintf(stderr, "tiermem run: %s\n", error.c_str());
    return 2;
  }
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = strchr(*e, '=');
    if (eq != nullptr) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  for (const auto& [k, v] : opts.values()) env[k] = v;
  const std::string preload = a.preload_lib.empty() ? FindPreloadLibrary() : a.preload_lib;
  if (preload.empty() || access(preload.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "tiermem run: the preload library %s is not there (--preload-lib names it)\n",
                 preload.empty() ? "libtiermem-preload.so" : preload.c_str());
    return 1;
  }
  LocalMemd memd;
  if (!a.local_memd.empty()) {
    uint64_t bytes = 0;
    if (!ParseSize(a.local_memd, &bytes) || bytes == 0) {
      std::fprintf(stderr, "tiermem run: --local-memd %s: expected a size such as 256M or 4G\n", a.local_memd.c_str());
      return 2;
    }
    if (env["TIERMEM_TOKEN"].empty()) env["TIERMEM_TOKEN"] = Hex(16);
    const std::string binary = a.memd_binary.empty() ? FindMemd() : a.memd_binary;
    if (binary.empty() || !memd.Start(binary, a.local_memd, env["TIERMEM_TOKEN"], &error)) {
      std::fprintf(stderr, "tiermem run: --local-memd: %s\n",
                   binary.empty() ? "tiermem-memd is not beside tiermem (--memd names it)" : error.c_str());
      return 1;
    }
  }
  env["TIERMEM_REMOTE"] = Remotes(a, env, a.local_memd.empty() ? nullptr : &memd);
  if (env["TIERMEM_REMOTE"].empty()) env.erase("TIERMEM_REMOTE");
  const std::string old_preload = env["LD_PRELOAD"];
  env["LD_PRELOAD"] = preload + (old_preload.empty() ? "" : ":" + old_preload);
  const bool summary = !a.quiet && env["TIERMEM_STATS"] != "stderr";
  StatsFiles stats(summary ? env["TIERMEM_STATS"] : "stderr");
  if (summary && !stats.env_value().empty()) env["TIERMEM_STATS"] = stats.env_value();

  struct sigaction sa {};
  sa.sa_sigaction = Forward;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : kForwarded) sigaction(sig, &sa, nullptr);
  StderrTee tee(a.stderr_tail_lines);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = Spawn(a.command, EnvironmentList(env), tee.child_fd(), a.timeout_s > 0);
  if (pid < 0) {
    std::fprintf(stderr, "tiermem run: fork: %s\n", strerror(errno));
    return 1;
  }
  tee.Started();
  RunOutcome o;
  o.pid = pid;
  g_passed_on = 0;
  Stopper stopper(pid, a.timeout_s);
  const int status = WaitStatus(pid, &o);
  o.timed_out = stopper.Ended();
  o.passed_on = g_passed_on;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  o.stderr_tail = tee.Finish();
  const double secs = o.seconds;
  if (out != nullptr) *out = std::move(o);
  memd.Stop();
  if (summary) PrintSummary(stats, pid, a.command[0], status, secs);
  return status;
}

}  // namespace tiermem::tools
