// Starts a tiermem-memd on loopback (port chosen by the kernel) for one test, with its log in a
// file the test can read, and stops it at the end.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tiermem/tiermem.hpp"

#ifndef TIERMEM_MEMD_PATH
#error "TIERMEM_MEMD_PATH must name the tiermem-memd binary"
#endif

namespace tiermem::testing {

class MemdProcess {
 public:
  // Extra arguments, e.g. {"--capacity", "2G"}. `token` goes through TIERMEM_TOKEN.
  bool Start(std::vector<std::string> args, const std::string& token = "") {
    char dir_tmpl[] = "/tmp/tiermem-memd-test-XXXXXX";
    dir_ = mkdtemp(dir_tmpl);
    port_file_ = dir_ + "/port";
    log_file_ = dir_ + "/memd.log";
    pid_ = fork();
    if (pid_ == 0) {
      // In a QEMU guest the build path does not exist: TIERMEM_TEST_MEMD, or memd from PATH.
      std::string bin = getenv("TIERMEM_TEST_MEMD") ? getenv("TIERMEM_TEST_MEMD") : TIERMEM_MEMD_PATH;
      if (access(bin.c_str(), X_OK) != 0) bin = "tiermem-memd";
      std::vector<std::string> argv = {bin, "--listen", Host() + ":0", "--port-file", port_file_};
      if (Host().rfind("127.", 0) != 0) argv.push_back("--allow-no-token");  // isolated guest network
      for (auto& a : args) {
        if (a != "--no-rdma" || Scheme() == "tcp") argv.push_back(a);
      }
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      FILE* f = freopen(log_file_.c_str(), "w", stderr);
      (void)f;
      // Nothing of the test process lives on in memd: a death test's child that starts a memd
      // and dies (exit 75) must not leave its status pipe open in memd, or gtest waits forever.
      for (int fd = 3; fd < 1024; ++fd) close(fd);
      if (token.empty()) {
        unsetenv("TIERMEM_TOKEN");
      } else {
        setenv("TIERMEM_TOKEN", token.c_str(), 1);
      }
      execvp(cargv[0], cargv.data());
      _exit(127);
    }
    for (int i = 0; i < 1000; ++i) {  // up to 10 s to come up (sanitizer builds are slow)
      std::ifstream f(port_file_);
      unsigned p = 0;
      if (f >> p && p != 0) {
        port_ = uint16_t(p);
        return true;
      }
      int st;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  uint16_t port() const { return port_; }
  std::string url() const { return Scheme() + "://" + Host() + ":" + std::to_string(port_); }
  // The same tests run over RDMA in the QEMU rdma topology: TIERMEM_TEST_REMOTE_SCHEME=rdma,
  // TIERMEM_TEST_REMOTE_HOST=10.9.0.2 (an address with a verbs device).
  static std::string Scheme() {
    const char* s = getenv("TIERMEM_TEST_REMOTE_SCHEME");
    return s != nullptr && *s != 0 ? s : "tcp";
  }
  static std::string Host() {
    const char* h = getenv("TIERMEM_TEST_REMOTE_HOST");
    return h != nullptr && *h != 0 ? h : "127.0.0.1";
  }
  // Size of the big data tests (1024 MiB by default; smaller in a 2 GiB guest).
  static size_t DataMiB() {
    const char* m = getenv("TIERMEM_TEST_REMOTE_MIB");
    return m != nullptr && atoi(m) > 0 ? size_t(atoi(m)) : 1024;
  }
  pid_t pid() const { return pid_; }
  std::string Log() const {
    std::ifstream f(log_file_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  // Sends `sig` and returns the exit status (as from waitpid).
  int Stop(int sig = SIGTERM) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    return st;
  }
  bool Alive() const { return pid_ > 0 && kill(pid_, 0) == 0; }
  ~MemdProcess() {
    Stop(SIGKILL);
    if (getenv("TIERMEM_TEST_SHOW_MEMD_LOG") != nullptr) fprintf(stderr, "--- memd log ---\n%s", Log().c_str());
    if (!dir_.empty()) {
      unlink(port_file_.c_str());
      unlink(log_file_.c_str());
      rmdir(dir_.c_str());
    }
  }

 private:
  std::string dir_, port_file_, log_file_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

// The pattern of page `page` of client `client`: every 8-byte word differs.
inline void FillPage(uint8_t* p, uint64_t page, uint64_t client = 1) {
  auto* w = reinterpret_cast<uint64_t*>(p);
  for (size_t i = 0; i < 4096 / 8; ++i) w[i] = (client << 56) ^ (page * 0x9E3779B97F4A7C15ull) ^ i;
}
inline bool CheckPage(const uint8_t* p, uint64_t page, uint64_t client = 1) {
  auto* w = reinterpret_cast<const uint64_t*>(p);
  for (size_t i = 0; i < 4096 / 8; ++i) {
    if (w[i] != ((client << 56) ^ (page * 0x9E3779B97F4A7C15ull) ^ i)) return false;
  }
  return true;
}

// A runtime whose remote tier is `servers` (TIERMEM_REMOTE syntax), with a 3 s fault timeout.
inline std::unique_ptr<Runtime> StartRemoteRuntime(const std::string& servers, const std::string& token = "") {
  Options o;
  o.Set("remote", servers);
  o.Set("token", token);
  o.Set("remote_timeout_ms", 3000);
  auto rt = Runtime::Start(o);
  EXPECT_TRUE(rt.ok()) << rt.status().ToString();
  if (!rt.ok()) return nullptr;
  EXPECT_TRUE((*rt)->HasTier(Tier::kRemote));
  return std::move(*rt);
}

}  // namespace tiermem::testing
