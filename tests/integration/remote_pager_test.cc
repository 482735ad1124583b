// The remote tier through the public API: pages evicted to a tiermem-memd on loopback (TCP) and
// faulted back by userfaultfd, by one thread and by eight at once (and with the handler
// spinning); clean pages not rewritten; writes during eviction kept; a dead server ends the
// process with a clear line.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "runtime/paging/pager.h"
#include "runtime/core/runtime_impl.h"
#include "tests/integration/remote_memd_fixture.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

using testing::CheckPage;
using testing::FillPage;
using testing::MemdProcess;

constexpr size_t kPage = 4096;

std::unique_ptr<Runtime> StartWith(const MemdProcess& memd, const std::string& token = "") {
  return testing::StartRemoteRuntime(memd.url(), token);
}

void ExpectAllRemote(Runtime& rt, void* p, size_t bytes) {
  auto loc = rt.Locate(p, bytes);
  ASSERT_TRUE(loc.ok()) << loc.status().ToString();
  size_t remote = 0;
  for (auto& l : *loc) remote += (l.tier == Tier::kRemote && !l.resident) ? 1 : 0;
  EXPECT_EQ(remote, loc->size());
}

// 1 GiB evicted and read back; `threads` threads fault at once, each on its share in random
// order, and all of them also on one shared set of pages (concurrent faults on one page).
// `spin_us`: TIERMEM_FAULT_SPIN_US (the handler polls for replies and faults before it sleeps).
void EvictAndFaultBack(int threads, const char* spin_us = nullptr) {
  MemdProcess memd;
  const size_t kPages = MemdProcess::DataMiB() * 256;
  ASSERT_TRUE(memd.Start({"--capacity", std::to_string(MemdProcess::DataMiB() + 176) + "M", "--no-rdma"}, "tok"));
  std::unique_ptr<Runtime> rt;
  if (spin_us == nullptr) {
    rt = StartWith(memd, "tok");
  } else {
    Options o;
    o.Set("remote", memd.url());
    o.Set("token", "tok");
    o.Set("remote_timeout_ms", 3000);
    o.Set("fault_spin_us", spin_us);
    auto started = RuntimeAccess::Start(o, &SystemClock());
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    rt = std::move(*started);
  }
  ASSERT_NE(rt, nullptr);
  auto p = rt->Allocate(kPages * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto* base = static_cast<uint8_t*>(*p);
  for (size_t i = 0; i < kPages; ++i) FillPage(base + i * kPage, i);
  auto m = rt->Migrate(base, kPages * kPage, Tier::kRemote);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->pages_moved, kPages);
  ExpectAllRemote(*rt, base, kPages * kPage);

  std::atomic<size_t> bad{0}, checked{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      std::vector<size_t> order;
      for (size_t i = size_t(t); i < kPages; i += size_t(threads)) order.push_back(i);
      std::mt19937_64 rng(uint64_t(t) + 1);
      std::shuffle(order.begin(), order.end(), rng);
      // The first 512 pages are touched by every thread first, at the same time.
      std::vector<size_t> shared(std::min<size_t>(512, kPages));
      std::iota(shared.begin(), shared.end(), 0);
      std::shuffle(shared.begin(), shared.end(), rng);
      for (size_t i : shared) bad += CheckPage(base + i * kPage, i) ? 0 : 1;
      for (size_t i : order) {
        bad += CheckPage(base + i * kPage, i) ? 0 : 1;
        ++checked;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(checked.load(), kPages);
  EXPECT_EQ(bad.load(), 0u);
  const CounterValues st = ImplOf(*rt)->pager()->stats();
  // Each page fetched exactly once, however many threads asked: by its fault, or ahead of it
  // when a thread's random order happened to look like a stride to the prefetcher.
  EXPECT_EQ(st.remote_faults + st.pages_prefetched, kPages);
  EXPECT_EQ(st.pages_written, kPages);
  EXPECT_TRUE(rt->Free(base).ok());
}

TEST(RemotePager, OneGiBEvictedAndFaultedBackByOneThread) { EvictAndFaultBack(1); }
TEST(RemotePager, OneGiBEvictedAndFaultedBackByEightThreads) { EvictAndFaultBack(8); }
// The handler spinning over TCP (an option there): every reply taken while it polls, the same
// pages, each fetched once.
TEST(RemotePager, FaultedBackByEightThreadsWhileTheHandlerSpins) { EvictAndFaultBack(8, "200"); }

TEST(RemotePager, CleanPagesAreNotWrittenAgain) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}));
  auto rt = StartWith(memd);
  ASSERT_NE(rt, nullptr);
  Pager* pager = ImplOf(*rt)->pager();
  if (!pager->write_protect()) GTEST_SKIP() << "kernel lacks userfaultfd write-protect: no clean tracking";
  constexpr size_t kPages = 64;
  auto p = rt->Allocate(kPages * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok());
  auto* base = static_cast<uint8_t*>(*p);
  for (size_t i = 0; i < kPages; ++i) FillPage(base + i * kPage, i);
  ASSERT_TRUE(rt->Migrate(base, kPages * kPage, Tier::kRemote).ok());
  EXPECT_EQ(pager->stats().pages_written, kPages);
  for (size_t i = 0; i < kPages; ++i) ASSERT_TRUE(CheckPage(base + i * kPage, i));  // read faults
  ASSERT_TRUE(rt->Migrate(base, kPages * kPage, Tier::kRemote).ok());
  EXPECT_EQ(pager->stats().pages_written, kPages);  // nothing changed: nothing written
  EXPECT_EQ(pager->stats().evictions_clean, kPages);
  // Write one page: only it is written at the next eviction.
  base[5 * kPage] ^= 0xFF;
  ASSERT_TRUE(rt->Migrate(base, kPages * kPage, Tier::kRemote).ok());
  EXPECT_EQ(pager->stats().pages_written, kPages + 1);
  EXPECT_EQ(base[5 * kPage], uint8_t(~[] { uint8_t b[kPage]; FillPage(b, 5); return b[0]; }()));
  for (size_t i = 0; i < kPages; ++i) {
    if (i != 5) {
      ASSERT_TRUE(CheckPage(base + i * kPage, i)) << i;
    }
  }
}

TEST(RemotePager, AllocateOnRemoteMigrateBackAndLocate) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}));
  auto rt = StartWith(memd);
  ASSERT_NE(rt, nullptr);
  constexpr size_t kPages = 256;
  auto p = rt->Allocate(kPages * kPage, Tier::kRemote);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto* base = static_cast<uint8_t*>(*p);
  ExpectAllRemote(*rt, base, kPages * kPage);
  for (size_t i = 0; i < kPages * kPage; i += 512) ASSERT_EQ(base[i], 0);  // zero, as promised
  for (size_t i = 0; i < kPages; ++i) FillPage(base + i * kPage, i);
  ASSERT_TRUE(rt->Migrate(base, kPages * kPage, Tier::kRemote).ok());
  ExpectAllRemote(*rt, base, kPages * kPage);
  auto m = rt->Migrate(base, kPages * kPage, Tier::kDram);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto loc = rt->Locate(base, kPages * kPage);
  ASSERT_TRUE(loc.ok());
  for (auto& l : *loc) {
    EXPECT_TRUE(l.resident);
    EXPECT_EQ(l.tier, Tier::kDram);
  }
  for (size_t i = 0; i < kPages; ++i) ASSERT_TRUE(CheckPage(base + i * kPage, i)) << i;
  // Freed and reallocated memory reads zero, whatever was evicted there before.
  ASSERT_TRUE(rt->Migrate(base, kPages * kPage, Tier::kRemote).ok());
  ASSERT_TRUE(rt->Free(base).ok());
  auto q = rt->Allocate(kPages * kPage, Tier::kDram);
  ASSERT_TRUE(q.ok());
  auto* qb = static_cast<uint8_t*>(*q);
  for (size_t i = 0; i < kPages * kPage; i += 512) ASSERT_EQ(qb[i], 0);
  auto stats = rt->Stats();
  EXPECT_TRUE(stats[2].available);
}

TEST(RemotePager, WritesDuringEvictionAreKept) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}));
  auto rt = StartWith(memd);
  ASSERT_NE(rt, nullptr);
  constexpr size_t kPages = 64;
  auto p = rt->Allocate(kPages * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok());
  auto* counters = static_cast<std::atomic<uint64_t>*>(*p);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> written{0};
  std::thread writer([&] {
    // Each page's first word counts the writes made to it.
    for (uint64_t n = 0; !stop; ++n) {
      counters[(n % kPages) * (kPage / 8)].fetch_add(1);
      ++written;
    }
  });
  for (int round = 0; round < 50; ++round) {
    ASSERT_TRUE(rt->Migrate(*p, kPages * kPage, Tier::kRemote).ok());
  }
  stop = true;
  writer.join();
  uint64_t sum = 0;
  for (size_t i = 0; i < kPages; ++i) sum += counters[i * (kPage / 8)].load();
  EXPECT_EQ(sum, written.load());
}

TEST(RemotePager, UnreachableServerMakesTheTierUnavailableWithTheReason) {
  Options o;
  o.Set("remote", "tcp://127.0.0.1:1");
  o.Set("remote_timeout_ms", 1000);
  auto rt = Runtime::Start(o);
  ASSERT_TRUE(rt.ok());
  EXPECT_FALSE((*rt)->HasTier(Tier::kRemote));
  auto p = (*rt)->Allocate(4096, Tier::kRemote);
  EXPECT_EQ(p.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(p.status().message().find("tcp://127.0.0.1:1"), std::string::npos) << p.status().message();
}

TEST(RemotePagerDeathTest, ServerKilledMidRunEndsTheProcessWithAClearLine) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}));
  if (MemdProcess::Scheme() != "tcp") GTEST_SKIP() << "a dead RDMA peer is detected after the NIC's retries; TCP covers it";
  auto body = [&] {
    auto rt = StartWith(memd);
    ASSERT_NE(rt, nullptr);
    auto p = rt->Allocate(64 * kPage, Tier::kDram);
    auto* base = static_cast<uint8_t*>(*p);
    for (size_t i = 0; i < 64; ++i) FillPage(base + i * kPage, i);
    if (!rt->Migrate(base, 64 * kPage, Tier::kRemote).ok()) _exit(3);
    memd.Stop(SIGKILL);
    volatile uint8_t x = base[7 * kPage];  // must not return a zero page, must not hang
    (void)x;
    _exit(0);
  };
  EXPECT_EXIT(body(), ::testing::ExitedWithCode(kRemoteLostExitCode),
              "could not be fetched from memory server tcp://127\\.0\\.0\\.1:[0-9]+");
}

}  // namespace
}  // namespace tiermem
