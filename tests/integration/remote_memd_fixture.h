// Starts a tiermem-memd on loopback (port chosen by the kernel) for one test, with its log in a
// file the test can read, and stops it at the end.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>  // callers read Stop()'s status with WIFEXITED and friends
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <memory>
#include <string>
#include <vector>

#include "backends/remote/transport.h"
#include "base/clock.h"
#include "bench/memd_child.h"
#include "runtime/core/runtime_impl.h"
#include "runtime/paging/paging_events.h"
#include "tiermem/tiermem.hpp"

#ifndef TIERMEM_MEMD_PATH
#error "TIERMEM_MEMD_PATH must name the tiermem-memd binary"
#endif

namespace tiermem::testing {

// The tests' view of bench::MemdChild: memd's log kept in a file, the binary and the address
// from the environment (QEMU guests), killed (SIGKILL) at the end of the test.
class MemdProcess {
 public:
  // Extra arguments, e.g. {"--capacity", "2G"}. `token` goes through TIERMEM_TOKEN.
  // `port` 0: the kernel picks one (a memd started again on its old port: pass port()).
  bool Start(std::vector<std::string> args, const std::string& token = "", uint16_t port = 0) {
    bench::MemdChildOptions o;
    o.port = port;
    // In a QEMU guest the build path does not exist: TIERMEM_TEST_MEMD, or memd from PATH.
    o.binary = getenv("TIERMEM_TEST_MEMD") ? getenv("TIERMEM_TEST_MEMD") : TIERMEM_MEMD_PATH;
    if (access(o.binary.c_str(), X_OK) != 0) o.binary = "tiermem-memd";
    o.host = Host();  // beyond loopback (isolated guest network): --allow-no-token
    for (auto& a : args) {
      if (a != "--no-rdma" || Scheme() == "tcp") o.args.push_back(a);
    }
    o.token = token;
    o.log_to_file = true;
    return memd_.Start(o);
  }
  uint16_t port() const { return memd_.port(); }
  std::string url() const { return memd_.Url(Scheme()); }
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
  pid_t pid() const { return memd_.pid(); }
  std::string Log() const { return memd_.Log(); }
  // Sends `sig` and returns the exit status (as from waitpid).
  int Stop(int sig = SIGTERM) { return memd_.Stop(sig); }
  bool Alive() const { return memd_.Alive(); }
  ~MemdProcess() {
    Stop(SIGKILL);
    if (getenv("TIERMEM_TEST_SHOW_MEMD_LOG") != nullptr) fprintf(stderr, "--- memd log ---\n%s", Log().c_str());
  }

 private:
  bench::MemdChild memd_;
};

// A transport connected to `memd` (a test failure unless `status` is given to take the result).
inline std::unique_ptr<remote::Transport> Connected(const MemdProcess& memd, const std::string& token = "",
                                                    Status* status = nullptr) {
  auto ep = remote::ParseEndpoint(memd.url());
  EXPECT_TRUE(ep.ok());
  auto t = remote::MakeTransport(*ep);
  EXPECT_TRUE(t.ok());
  Status s = (*t)->Connect(token, 5000);
  if (status != nullptr) {
    *status = s;
  } else {
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  return std::move(*t);
}

// The pattern of page `page` of client `client`: every 8-byte word differs.
inline void FillPage(uint8_t* p, uint64_t page, uint64_t client = 1) {
  auto* w = reinterpret_cast<uint64_t*>(p);
  for (size_t i = 0; i < 4096 / 8; ++i) w[i] = (client << 56) ^ (page * 0x9E3779B97F4A7C15ull) ^ i;
}

// Two sessions of one memd for isolation tests: each holds `slots` slots, and the first slot of
// a's holds FillPage(.., 0, 0xA). ok is false (with a test failure) when any step failed.
struct TwoSessions {
  std::unique_ptr<remote::Transport> a, b;
  remote::SlotRange ra, rb;
  bool ok = false;
};
inline TwoSessions StartTwoSessions(const MemdProcess& memd, uint64_t slots) {
  TwoSessions s;
  s.a = Connected(memd);
  s.b = Connected(memd);
  auto ra = s.a->AllocSlots(slots);
  auto rb = s.b->AllocSlots(slots);
  EXPECT_TRUE(ra.ok() && rb.ok());
  if (!ra.ok() || !rb.ok()) return s;
  s.ra = *ra;
  s.rb = *rb;
  std::vector<uint8_t> page(4096);
  FillPage(page.data(), 0, 0xA);
  Status w = remote::WritePagesSync(*s.a, s.ra, s.ra.first, page.data(), 1);
  EXPECT_TRUE(w.ok()) << w.ToString();
  s.ok = w.ok();
  return s;
}
inline bool CheckPage(const uint8_t* p, uint64_t page, uint64_t client = 1) {
  auto* w = reinterpret_cast<const uint64_t*>(p);
  for (size_t i = 0; i < 4096 / 8; ++i) {
    if (w[i] != ((client << 56) ^ (page * 0x9E3779B97F4A7C15ull) ^ i)) return false;
  }
  return true;
}

// `pages` pages allocated on DRAM by `rt`, page i filled with FillPage(.., i); null (and a test
// failure) when the allocation fails.
inline uint8_t* AllocateFilledPages(Runtime& rt, size_t pages) {
  auto p = rt.Allocate(pages * 4096, Tier::kDram);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) return nullptr;
  auto* base = static_cast<uint8_t*>(*p);
  for (size_t i = 0; i < pages; ++i) FillPage(base + i * 4096, i);
  return base;
}

// A runtime whose remote tier is `servers` (TIERMEM_REMOTE syntax), with a 3 s fault timeout.
// `prefetch` is TIERMEM_PREFETCH: tests that count one fault per page touched in order turn it off.
// `replicas` is TIERMEM_REPLICAS.
// PagingEvents of a pager with no managed regions (its start and its servers alone).
inline PagingEvents* NoRegionEvents() {
  struct NoRegions final : PagingEvents {
    Region* RegionOf(const void*) override { return nullptr; }
  };
  static NoRegions events;
  return &events;
}

// `clock`: what the runtime's waits and back-offs go by (base/clock.h); the real one when null.
inline std::unique_ptr<Runtime> StartRemoteRuntime(const std::string& servers, const std::string& token = "",
                                                   const std::string& prefetch = "auto", int replicas = 1,
                                                   Clock* clock = nullptr) {
  Options o;
  o.Set("remote", servers);
  o.Set("token", token);
  o.Set("remote_timeout_ms", 3000);
  o.Set("prefetch", prefetch);
  o.Set("replicas", replicas);
  auto rt = RuntimeAccess::Start(o, clock != nullptr ? clock : &SystemClock());
  EXPECT_TRUE(rt.ok()) << rt.status().ToString();
  if (!rt.ok()) return nullptr;
  EXPECT_TRUE((*rt)->HasTier(Tier::kRemote));
  return std::move(*rt);
}

}  // namespace tiermem::testing
