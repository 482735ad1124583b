#include "bench/memd_child.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace tiermem::bench {

std::string MemdBinary() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = 0;
    std::string dir(self);
    dir = dir.substr(0, dir.rfind('/'));
    for (const char* rel : {"/../tools/memd/tiermem-memd", "/tiermem-memd"}) {
      std::string p = dir + rel;
      if (access(p.c_str(), X_OK) == 0) return p;
    }
  }
  return "tiermem-memd";
}

MemdChild::~MemdChild() {
  Stop(SIGTERM);
  if (!dir_.empty()) {
    unlink((dir_ + "/port").c_str());  // left behind when memd did not come up
    if (!log_file_.empty()) unlink(log_file_.c_str());
    rmdir(dir_.c_str());
  }
}

bool MemdChild::Start(uint64_t capacity_bytes, const std::string& host) {
  MemdChildOptions o;
  o.host = host;
  o.args = {"--capacity", std::to_string(capacity_bytes >> 20) + "M"};
  return Start(o);
}

bool MemdChild::Start(const MemdChildOptions& options) {
  host_ = options.host;
  char tmpl[] = "/tmp/tiermem-memd-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return false;
  dir_ = tmpl;
  const std::string port_file = dir_ + "/port";
  if (options.log_to_file) log_file_ = dir_ + "/memd.log";
  // Everything the child needs is built before fork(): the child only redirects and execs.
  std::vector<std::string> argv = {options.binary.empty() ? MemdBinary() : options.binary, "--listen",
                                   host_ + ":" + std::to_string(options.port), "--port-file", port_file};
  if (options.allow_no_token && host_.rfind("127.", 0) != 0) argv.push_back("--allow-no-token");
  argv.insert(argv.end(), options.args.begin(), options.args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const bool quiet = !options.log_to_file && getenv("TIERMEM_BENCH_MEMD_LOG") == nullptr;
  const char* err_path = options.log_to_file ? log_file_.c_str() : quiet ? "/dev/null" : nullptr;

  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // memd ends with the thread that started it, however that ends: a test that crashes or is
    // killed by its timeout must not leave a memd holding ctest's output pipe (ctest would
    // wait for it until the test's time limit). One thread owns a MemdChild (memd_child.h).
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);  // it ended before the line above
    if (err_path != nullptr) {
      FILE* f = freopen(err_path, "w", stderr);
      (void)f;
    }
    // Nothing of this process lives on in memd: a gtest death test's child that starts a memd
    // and dies must not leave its status pipe open in memd, or gtest waits forever.
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    if (options.token.has_value()) {
      if (options.token->empty()) {
        unsetenv("TIERMEM_TOKEN");
      } else {
        setenv("TIERMEM_TOKEN", options.token->c_str(), 1);
      }
    }
    execvp(cargv[0], cargv.data());
    _exit(127);
  }
  if (pid_ < 0) return false;
  for (int i = 0; i < 1000; ++i) {  // up to 10 s to come up (sanitizer builds are slow)
    std::ifstream f(port_file);
    unsigned p = 0;
    if (f >> p && p != 0) {
      port_ = static_cast<uint16_t>(p);
      unlink(port_file.c_str());
      return true;
    }
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

int MemdChild::Stop(int sig) {
  if (pid_ <= 0) return -1;
  kill(pid_, sig);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

bool MemdChild::Alive() const { return pid_ > 0 && kill(pid_, 0) == 0; }

std::string MemdChild::Url(const std::string& scheme) const {
  return scheme + "://" + host_ + ":" + std::to_string(port_);
}

std::string MemdChild::Log() const {
  if (log_file_.empty()) return "";
  std::ifstream f(log_file_);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace tiermem::bench
