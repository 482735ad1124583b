// Automatic tiering end to end on this machine: the policy thread with protection sampling, and
// DRAM + the remote tier over TCP (a memd on loopback).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <random>
#include <thread>

#include "remote_memd_fixture.h"
#include "runtime/tiering/migrator.h"
#include "runtime/core/runtime_impl.h"
#include "test_util.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

constexpr size_t kPage = 4096;

// Waits (bounded) until `pred` holds; the test then asserts on state, never on time.
template <class F>
bool WaitFor(F pred, int seconds) {
  for (int i = 0; i < seconds * 100; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

TEST(TieringTest, SamplingKeepsDataIntactAndSeesAccesses) {
  setenv("TIERMEM_SAMPLE_MODE", "protect", 1);
  setenv("TIERMEM_SAMPLE_INTERVAL_MS", "5", 1);
  auto rt = Runtime::Start();
  unsetenv("TIERMEM_SAMPLE_MODE");
  unsetenv("TIERMEM_SAMPLE_INTERVAL_MS");
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  Migrator* m = ImplOf(**rt)->migrator();
  ASSERT_NE(m, nullptr);
  const size_t bytes = 16 << 20;
  auto p = (*rt)->Allocate(bytes, Tier::kDram);
  ASSERT_TRUE(p.ok());
  char* base = static_cast<char*>(*p);
  testing::FillPattern(base, bytes, 7);
  // Two threads read and write every page while the tracker protects rotating samples.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0};
  auto worker = [&](int id) {
    std::mt19937_64 rng(id);
    auto* w = reinterpret_cast<uint64_t*>(base);
    while (!stop.load()) {
      size_t i = rng() % (bytes / 8);
      // Both threads may hit the same word: relaxed atomics keep that race-free (and TSan quiet).
      std::atomic_ref<uint64_t> word(w[i]);
      uint64_t v = word.load(std::memory_order_relaxed);
      if (v != ((i * 0x9E3779B97F4A7C15ull) ^ 7)) bad.fetch_add(1);
      word.store(v, std::memory_order_relaxed);  // rewrite the same value: a write fault too
    }
  };
  std::thread t1(worker, 1), t2(worker, 2);
  bool sampled = WaitFor([&] { return m->stats().samples > 500; }, 30);
  // A system call into a page freed while armed must not fail (the tracker lifted it).
  auto q = (*rt)->Allocate(1 << 20, Tier::kDram);
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE((*rt)->Free(*q).ok());
  stop = true;
  t1.join();
  t2.join();
  MigratorStats st = m->stats();
  EXPECT_TRUE(sampled) << "samples " << st.samples << ", armed " << st.pages_armed;
  EXPECT_EQ(st.mode, "protect");
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(testing::CheckPattern(base, bytes, 7), SIZE_MAX);
  ASSERT_TRUE((*rt)->Free(base).ok());
  ASSERT_TRUE((*rt)->Stop().ok());
}

// The VmFlags line of /proc/self/smaps for the mapping that holds `p` ("" when not found).
std::string VmFlagsOf(const void* p) {
  FILE* f = fopen("/proc/self/smaps", "r");
  if (f == nullptr) return "";
  char line[512];
  bool in = false;
  std::string flags;
  const auto a = reinterpret_cast<uintptr_t>(p);
  while (fgets(line, sizeof line, f) != nullptr) {
    unsigned long lo = 0, hi = 0;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      in = a >= lo && a < hi;
    } else if (in && strncmp(line, "VmFlags:", 8) == 0) {
      flags = line + 8;
      break;
    }
  }
  fclose(f);
  return flags;
}

// The policy moves 4 KiB pages; a transparent huge page would move as a whole (512 pages for one
// victim): while the policy thread runs, region data is MADV_NOHUGEPAGE ("nh"), and only then.
TEST(TieringTest, RegionsGetSmallPagesWhileThePolicyRuns) {
  {
    auto plain = Runtime::Start();
    ASSERT_TRUE(plain.ok());
    auto p = (*plain)->Allocate(1 << 20, Tier::kDram);
    ASSERT_TRUE(p.ok());
    const std::string flags = VmFlagsOf(*p);
    ASSERT_FALSE(flags.empty());
    EXPECT_EQ(flags.find(" nh"), std::string::npos) << "no tiering, yet no huge pages: " << flags;
  }
  setenv("TIERMEM_SAMPLE_MODE", "protect", 1);
  auto rt = Runtime::Start();
  unsetenv("TIERMEM_SAMPLE_MODE");
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  ASSERT_TRUE(ImplOf(**rt)->migrator()->running());
  auto p = (*rt)->Allocate(1 << 20, Tier::kDram);
  ASSERT_TRUE(p.ok());
  EXPECT_NE(VmFlagsOf(*p).find(" nh"), std::string::npos) << VmFlagsOf(*p);
  // A region added later (an allocation larger than the first region) gets it too.
  auto big = (*rt)->Allocate(size_t{96} << 30, Tier::kDram);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_NE(ImplOf(**rt)->RegionOf(*big), ImplOf(**rt)->RegionOf(*p));
  EXPECT_NE(VmFlagsOf(*big).find(" nh"), std::string::npos) << VmFlagsOf(*big);
  ASSERT_TRUE((*rt)->Free(*big).ok());
  ASSERT_TRUE((*rt)->Free(*p).ok());
}

TEST(TieringTest, NoBudgetMeansNoPolicyThread) {
  auto rt = Runtime::Start();
  ASSERT_TRUE(rt.ok());
  EXPECT_FALSE(ImplOf(**rt)->migrator()->running());
  EXPECT_EQ(ImplOf(**rt)->migrator()->stats().mode, "off");
}

// DRAM budget of 2 MiB + remote: a hot set of 64 pages touched all the time ends in DRAM, the
// rest is demoted to the remote tier, DRAM stays near its budget, and no byte is lost.
TEST(TieringTest, HotPagesStayInDramColdPagesGoRemote) {
  testing::MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "256M"})) << memd.Log();
  setenv("TIERMEM_SAMPLE_MODE", "protect", 1);
  setenv("TIERMEM_SAMPLE_INTERVAL_MS", "10", 1);
  Options o;
  o.Set("dram_limit", 2 << 20);  // 512 pages
  o.Set("remote", memd.url());
  auto rt = Runtime::Start(o);
  unsetenv("TIERMEM_SAMPLE_MODE");
  unsetenv("TIERMEM_SAMPLE_INTERVAL_MS");
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  if (!(*rt)->HasTier(Tier::kRemote)) GTEST_SKIP() << "remote tier not available";
  const size_t npages = 4096;  // 16 MiB
  auto p = (*rt)->Allocate(npages * kPage, Tier::kRemote);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  char* base = static_cast<char*>(*p);
  testing::FillPattern(base, npages * kPage, 3);
  const size_t hot_first = 1000, hot_n = 64;
  std::atomic<bool> stop{false};
  std::thread t([&] {
    std::mt19937_64 rng(5);
    volatile uint64_t sink = 0;
    while (!stop.load()) {
      for (size_t k = 0; k < 200; ++k) {
        size_t pg = hot_first + rng() % hot_n;
        sink = sink + *reinterpret_cast<uint64_t*>(base + pg * kPage + (rng() % 512) * 8);
      }
      size_t pg = rng() % npages;  // an occasional cold access
      sink = sink + *reinterpret_cast<uint64_t*>(base + pg * kPage);
    }
  });
  Migrator* m = ImplOf(**rt)->migrator();
  auto hot_in_dram = [&] {
    auto loc = (*rt)->Locate(base + hot_first * kPage, hot_n * kPage);
    if (!loc.ok()) return size_t{0};
    size_t n = 0;
    for (auto& l : *loc) n += l.tier == Tier::kDram && l.resident;
    return n;
  };
  auto resident = [&] {
    auto loc = (*rt)->Locate(base, npages * kPage);
    size_t n = 0;
    for (auto& l : *loc) n += l.resident;
    return n;
  };
  // Let the policy settle: DRAM within its budget (plus one round of faults) and hot pages home.
  bool settled = WaitFor([&] { return resident() <= 600 && hot_in_dram() >= hot_n * 9 / 10; }, 60);
  size_t hot = hot_in_dram(), res = resident();
  stop = true;
  t.join();
  MigratorStats st = m->stats();
  EXPECT_TRUE(settled) << "resident " << res << ", hot in DRAM " << hot << "/" << hot_n
                       << ", demotions " << st.demotions << ", failed " << st.failed;
  EXPECT_GE(hot, hot_n * 9 / 10);
  EXPECT_GT(st.demotions, 3000u);
  EXPECT_EQ(testing::CheckPattern(base, npages * kPage, 3), SIZE_MAX) << "data lost";
  ASSERT_TRUE((*rt)->Free(base).ok());
  ASSERT_TRUE((*rt)->Stop().ok());
  memd.Stop();
}

// The policy thread's batched eviction: scattered pages (every third, and a run) go remote in one
// call; the pages between stay, all data comes back intact, and pages already remote are counted
// as such.
TEST(TieringTest, EvictPagesTakesScatteredPagesAndKeepsData) {
  testing::MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M"})) << memd.Log();
  setenv("TIERMEM_SAMPLE_MODE", "off", 1);
  Options o;
  o.Set("remote", memd.url());
  auto rt = Runtime::Start(o);
  unsetenv("TIERMEM_SAMPLE_MODE");
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  if (!(*rt)->HasTier(Tier::kRemote)) GTEST_SKIP() << "remote tier not available";
  const size_t npages = 600;  // more than one eviction window of 256 pages
  auto p = (*rt)->Allocate(npages * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  char* base = static_cast<char*>(*p);
  testing::FillPattern(base, npages * kPage, 9);
  std::vector<char*> pages;
  for (size_t i = 0; i < npages; ++i) {
    if (i % 3 == 0 || (i >= 400 && i < 420)) pages.push_back(base + i * kPage);
  }
  auto r = ImplOf(**rt)->EvictPages(pages);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pages_moved, pages.size());
  auto loc = (*rt)->Locate(base, npages * kPage);
  ASSERT_TRUE(loc.ok());
  size_t remote = 0, wrong = 0;
  for (size_t i = 0; i < npages; ++i) {
    const bool evicted = i % 3 == 0 || (i >= 400 && i < 420);
    remote += !(*loc)[i].resident;
    wrong += (*loc)[i].resident == evicted;
  }
  EXPECT_EQ(remote, pages.size());
  EXPECT_EQ(wrong, 0u);
  auto again = ImplOf(**rt)->EvictPages({base, base + 3 * kPage});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->pages_moved, 0u);
  EXPECT_EQ(again->pages_already_there, 2u);
  EXPECT_EQ(testing::CheckPattern(base, npages * kPage, 9), SIZE_MAX) << "data lost";
  ASSERT_TRUE((*rt)->Free(base).ok());
  ASSERT_TRUE((*rt)->Stop().ok());
  memd.Stop();
}

}  // namespace
}  // namespace tiermem
