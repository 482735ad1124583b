#include "bench/child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench/compare_util.h"

extern char** environ;

namespace tiermem::bench {

std::string SelfDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  const std::string s(buf);
  return s.substr(0, s.rfind('/'));
}

std::string FirstExisting(std::initializer_list<std::string> paths) {
  for (const auto& p : paths) {
    if (!p.empty() && access(p.c_str(), R_OK) == 0) return p;
  }
  return "";
}

std::string OnPath(const std::string& name) {
  const char* env = getenv("PATH");
  const std::string path = env != nullptr ? env : "/usr/local/bin:/usr/bin:/bin";
  for (size_t at = 0; at <= path.size();) {
    const size_t colon = std::min(path.find(':', at), path.size());
    const std::string p = path.substr(at, colon - at) + "/" + name;
    if (colon > at && access(p.c_str(), X_OK) == 0) return p;
    at = colon + 1;
  }
  return "";
}

std::string PreloadLibrary() {
  const std::string dir = SelfDir();
  return FirstExisting({dir + "/../allocator/preload/libtiermem-preload.so", dir + "/../lib/libtiermem-preload.so",
                        dir + "/../lib/x86_64-linux-gnu/libtiermem-preload.so"});
}

Child::~Child() {
  Stop(SIGKILL);
  if (out_fd_ >= 0) close(out_fd_);
}

bool Child::Start(const ChildOptions& options, std::string* error) {
  // Everything the child needs is built before fork(): after it, the child makes system calls only.
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv(*e);
    const std::string key = kv.substr(0, kv.find('='));
    if (key != "LD_PRELOAD" && options.env.count(key) == 0) env.push_back(kv);
  }
  for (const auto& [k, v] : options.env) env.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  char out_path[] = "/tmp/tiermem-bench-out-XXXXXX";
  out_fd_ = mkostemp(out_path, O_CLOEXEC);  // the child gets it as its stdout only
  if (out_fd_ < 0) {
    *error = std::string("mkostemp: ") + strerror(errno);
    return false;
  }
  unlink(out_path);
  const int null_fd = options.quiet_stderr ? open("/dev/null", O_WRONLY | O_CLOEXEC) : -1;
  const int in_fd = options.stdin_path.empty() ? -1 : open(options.stdin_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (!options.stdin_path.empty() && in_fd < 0) {
    *error = "cannot open " + options.stdin_path + ": " + strerror(errno);
    if (null_fd >= 0) close(null_fd);
    return false;
  }
  int gate[2];  // the child execs once the parent has placed it (closed write end: go)
  if (pipe2(gate, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + strerror(errno);
    return false;
  }
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(out_fd_, 1);
    if (null_fd >= 0) dup2(null_fd, 2);
    if (in_fd >= 0) dup2(in_fd, 0);
    close(gate[1]);
    char c;
    while (read(gate[0], &c, 1) < 0 && errno == EINTR) {
    }
    execvpe(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  const int fork_errno = errno;
  close(gate[0]);
  if (null_fd >= 0) close(null_fd);
  if (in_fd >= 0) close(in_fd);
  if (pid_ < 0) {
    close(gate[1]);
    *error = std::string("fork: ") + strerror(fork_errno);
    return false;
  }
  if (!options.cgroup_procs.empty()) {
    std::ofstream procs(options.cgroup_procs);
    procs << pid_ << "\n";
    procs.flush();
    if (!procs) {
      close(gate[1]);
      Stop(SIGKILL);
      *error = "cannot move the child into " + options.cgroup_procs;
      return false;
    }
  }
  close(gate[1]);
  return true;
}

Child::Event Child::Wait(uint64_t deadline_ns) {
  if (exited_) return Event::kExited;
  for (;;) {
    int st = 0;
    rusage ru{};
    const pid_t r = wait4(pid_, &st, WNOHANG | WUNTRACED, &ru);
    if (r == pid_ && WIFSTOPPED(st)) return Event::kStopped;
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      exited_ = true;
      status_ = st;
      usage_ = ru;
      return Event::kExited;
    }
    if (NowNs() >= deadline_ns) return Event::kTimedOut;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void Child::Continue() {
  if (!exited_ && pid_ > 0) kill(pid_, SIGCONT);
}

void Child::Stop(int sig) {
  if (exited_ || pid_ <= 0) return;
  kill(pid_, sig);
  kill(pid_, SIGCONT);  // a stopped child acts on a SIGTERM only once continued
  if (Wait(NowNs() + 10'000'000'000ull) != Event::kExited) {
    kill(pid_, SIGKILL);
    while (Wait(NowNs() + 1'000'000'000ull) != Event::kExited) {
    }
  }
}

std::string Child::Stdout() const {
  std::string out;
  char buf[4096];
  ssize_t n;
  for (off_t at = 0; (n = pread(out_fd_, buf, sizeof(buf), at)) > 0; at += n) out.append(buf, static_cast<size_t>(n));
  return out;
}

std::string Child::Describe() const {
  if (!exited_) return pid_ > 0 ? "running" : "not started";
  if (WIFEXITED(status_)) return "exit " + std::to_string(WEXITSTATUS(status_));
  if (WIFSIGNALED(status_)) return "killed by signal " + std::to_string(WTERMSIG(status_));
  return "status " + std::to_string(status_);
}

std::optional<uint64_t> ProcStatusBytes(pid_t pid, const char* field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  const std::string want = std::string(field) + ":";
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(want, 0) == 0) return std::strtoull(line.c_str() + want.size(), nullptr, 10) * 1024;
  }
  return std::nullopt;
}

namespace {

// Field `n` of /proc/PID/stat as numbered in proc(5) (n >= 3). comm (field 2) may hold spaces
// and parentheses, so fields are counted from the last ')'.
std::optional<uint64_t> ProcStatField(pid_t pid, int n) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(f, stat)) return std::nullopt;
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream is(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= n; ++i) {
    if (!(is >> field)) return std::nullopt;
  }
  return std::strtoull(field.c_str(), nullptr, 10);
}

}  // namespace

std::optional<uint64_t> ProcMajorFaults(pid_t pid) { return ProcStatField(pid, 12); }  // majflt

std::optional<double> ProcCpuSeconds(pid_t pid) {
  const std::optional<uint64_t> utime = ProcStatField(pid, 14), stime = ProcStatField(pid, 15);
  if (!utime || !stime) return std::nullopt;
  return static_cast<double>(*utime + *stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace tiermem::bench
