// The memory server of one `tiermem run` (run.h).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "tools/tiermem/run.h"

namespace tiermem::tools {
namespace {

constexpr auto kStartBound = std::chrono::seconds(20);  // sanitizer builds start slowly
constexpr auto kStopBound = std::chrono::seconds(10);

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Waits for `pid` up to `bound`; true once it was reaped.
bool ReapWithin(pid_t pid, std::chrono::steady_clock::duration bound) {
  const auto end = std::chrono::steady_clock::now() + bound;
  for (;;) {
    const pid_t r = waitpid(pid, nullptr, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

LocalMemd::~LocalMemd() { Stop(); }

bool LocalMemd::Start(const std::string& binary, const std::string& capacity, const std::string& token,
                      std::string* error) {
  char tmpl[] = "/tmp/tiermem-run-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    *error = std::string("cannot make a scratch folder: ") + strerror(errno);
    return false;
  }
  dir_ = tmpl;
  const std::string port_file = dir_ + "/port", log_file = dir_ + "/memd.log";
  std::vector<std::string> argv = {binary, "--listen", "127.0.0.1:0", "--port-file", port_file,
                                   "--capacity", capacity, "--no-rdma"};
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // Ends with tiermem, even a tiermem killed with SIGKILL; checked after the prctl so a parent
    // that died before it is seen too.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    setpgid(0, 0);
    const int log = open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (log >= 0) dup2(log, STDERR_FILENO);
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, STDIN_FILENO);
      dup2(null, STDOUT_FILENO);
    }
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    setenv("TIERMEM_TOKEN", token.c_str(), 1);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  if (pid_ < 0) {
    *error = std::string("fork: ") + strerror(errno);
    return false;
  }
  const auto end = std::chrono::steady_clock::now() + kStartBound;
  while (std::chrono::steady_clock::now() < end) {
    std::ifstream f(port_file);
    if (f >> port_ && port_ != 0) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      *error = binary + " exited before it listened" +
               (WIFEXITED(status) && WEXITSTATUS(status) == 127 ? " (cannot execute it)" : "") + ": " +
               ReadAll(log_file);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  *error = binary + " did not listen within 20 s: " + ReadAll(log_file);
  Stop();
  return false;
}

void LocalMemd::Stop() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    if (!ReapWithin(pid_, kStopBound)) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
  }
  if (!dir_.empty()) {
    unlink((dir_ + "/port").c_str());
    unlink((dir_ + "/memd.log").c_str());
    rmdir(dir_.c_str());
    dir_.clear();
  }
}

}  // namespace tiermem::tools
