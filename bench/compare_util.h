// Helpers shared by tiermem-bench's compare, gups and kv subcommands: a memd child on loopback,
// percentiles, timing, and the runtime started with TIERMEM_* settings for one measurement.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tiermem/tiermem.hpp"

namespace tiermem::bench {

// NUMA nodes of a tier as the runtime reports them (empty when the tier is absent).
inline std::vector<int> TierNodes(const Runtime& rt, Tier tier) {
  for (const TierStats& s : rt.Stats()) {
    if (s.tier == tier) return s.nodes;
  }
  return {};
}

// A decimal count ("20"); false on junk or overflow. (Sizes: tiermem::ParseSize.)
inline bool ParseUint(const char* text, uint64_t* out) {
  if (text == nullptr || *text == '\0') return false;
  uint64_t v = 0;
  for (const char* p = text; *p; ++p) {
    if (*p < '0' || *p > '9' || v > (UINT64_MAX - static_cast<uint64_t>(*p - '0')) / 10) return false;
    v = v * 10 + static_cast<uint64_t>(*p - '0');
  }
  *out = v;
  return true;
}

// The benchmarks' clock: std::chrono's steady clock (CLOCK_MONOTONIC), the same one
// base/os.h's MonotonicNanos reads for the library.
inline uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

inline double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// tiermem-memd next to this binary (build tree or install), else from PATH.
inline std::string MemdBinary() {
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

// A tiermem-memd child process on 127.0.0.1 (port chosen by the kernel); stopped on destruction.
class MemdChild {
 public:
  ~MemdChild() { Stop(); }
  // `host`: the address to listen on (127.0.0.1; an address with a verbs device for RDMA, e.g.
  // the QEMU guest's 10.9.0.2, where memd is started with --allow-no-token).
  bool Start(uint64_t capacity_bytes, const std::string& host = "127.0.0.1") {
    host_ = host;
    char tmpl[] = "/tmp/tiermem-bench-memd-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return false;
    std::string dir = tmpl, port_file = dir + "/port";
    pid_ = fork();
    if (pid_ == 0) {
      std::string cap = std::to_string(capacity_bytes >> 20) + "M";
      if (getenv("TIERMEM_BENCH_MEMD_LOG") == nullptr) {
        FILE* f = freopen("/dev/null", "w", stderr);
        (void)f;
      }
      std::string bin = MemdBinary();
      std::string listen = host + ":0";
      if (host.rfind("127.", 0) == 0) {
        execlp(bin.c_str(), bin.c_str(), "--capacity", cap.c_str(), "--listen", listen.c_str(),
               "--port-file", port_file.c_str(), static_cast<char*>(nullptr));
      } else {
        execlp(bin.c_str(), bin.c_str(), "--capacity", cap.c_str(), "--listen", listen.c_str(),
               "--port-file", port_file.c_str(), "--allow-no-token", static_cast<char*>(nullptr));
      }
      _exit(127);
    }
    for (int i = 0; i < 1000; ++i) {
      std::ifstream f(port_file);
      unsigned p = 0;
      if (f >> p && p != 0) {
        port_ = p;
        unlink(port_file.c_str());
        rmdir(dir.c_str());
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
  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  std::string Url(const std::string& scheme) const {
    return scheme + "://" + host_ + ":" + std::to_string(port_);
  }

 private:
  pid_t pid_ = -1;
  unsigned port_ = 0;
  std::string host_ = "127.0.0.1";
};

// Starts a Runtime with extra TIERMEM_* variables set only while it reads its options.
inline StatusOr<std::unique_ptr<Runtime>> StartWithEnv(
    const Options& o, const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> saved;
  for (auto& [k, v] : env) {
    if (const char* old = getenv(k.c_str())) saved[k] = old;
    setenv(k.c_str(), v.c_str(), 1);
  }
  auto rt = Runtime::Start(o);
  for (auto& [k, v] : env) {
    if (saved.count(k)) {
      setenv(k.c_str(), saved[k].c_str(), 1);
    } else {
      unsetenv(k.c_str());
    }
  }
  return rt;
}

}  // namespace tiermem::bench
