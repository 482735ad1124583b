// Automatic tiering end to end on this machine: the policy thread with protection sampling, and
// DRAM + the remote tier over TCP (a memd on loopback).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <random>
#include <thread>

#include "remote_memd_fixture.h"
#include "runtime/tiering/migrator.h"
#include "runtime/core/runtime_impl.h"
#include "base/os.h"
#include "test_util.h"
#include "tiermem/stats.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

constexpr size_t kPage = 4096;

using testing::WaitFor;

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
  bool sampled = WaitFor([&] { return m->counters().samples > 500; }, 30);
  // A system call into a page freed while armed must not fail (the tracker lifted it).
  auto q = (*rt)->Allocate(1 << 20, Tier::kDram);
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE((*rt)->Free(*q).ok());
  stop = true;
  t1.join();
  t2.join();
  const CounterValues st = m->counters();
  EXPECT_TRUE(sampled) << "samples " << st.samples << ", armed " << st.pages_armed;
  EXPECT_EQ(m->stats().mode, "protect");
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
  const RuntimeCounters c = (*rt)->Counters();
  EXPECT_EQ(c.policy_interval_ms, 0u);
  EXPECT_EQ(c.policy_cpu_ns, 0u);
  EXPECT_EQ(c.policy_round_time.count, 0u);
}

// The policy thread's cost: each round lands in the round-time histogram (which encloses the
// round's own timing), its CPU clock is read after each round, and Counters(), the stats block
// and both JSON forms report the same figures.
TEST(TieringTest, PolicyCostIsCountedEveryRound) {
  setenv("TIERMEM_SAMPLE_MODE", "protect", 1);
  setenv("TIERMEM_SAMPLE_INTERVAL_MS", "5", 1);
  const uint64_t t_start = os::MonotonicNanos();
  auto rt = Runtime::Start();
  unsetenv("TIERMEM_SAMPLE_MODE");
  unsetenv("TIERMEM_SAMPLE_INTERVAL_MS");
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  Migrator* m = ImplOf(**rt)->migrator();
  ASSERT_TRUE(m->running());
  const size_t bytes = 8 << 20;
  auto p = (*rt)->Allocate(bytes, Tier::kDram);
  ASSERT_TRUE(p.ok());
  testing::FillPattern(static_cast<char*>(*p), bytes, 9);  // pages for the rounds to scan and arm
  EXPECT_TRUE(WaitFor([&] { return m->counters().policy_rounds >= 20; }, 30)) << m->counters().policy_rounds << " rounds";
  m->Stop();  // no round in flight while the figures are compared
  const uint64_t lifetime_ns = os::MonotonicNanos() - t_start;
  const RuntimeCounters c = (*rt)->Counters();
  EXPECT_EQ(c.policy_interval_ms, 5u);
  EXPECT_EQ(c.policy_round_time.count, c.policy_rounds);
  EXPECT_GE(c.policy_round_time.sum_ns, c.policy_round_ns);
  ASSERT_EQ(c.policy_round_time.buckets.size(), c.policy_round_time.le_ns.size() + 1);
  uint64_t in_buckets = 0;
  for (uint64_t b : c.policy_round_time.buckets) in_buckets += b;
  EXPECT_EQ(in_buckets, c.policy_rounds);
  EXPECT_GT(c.policy_cpu_ns, 0u);
  EXPECT_LE(c.policy_cpu_ns, lifetime_ns) << "one thread cannot use more CPU time than it lived";
  EXPECT_LE(c.policy_round_time.QuantileNs(0.5), c.policy_round_time.QuantileNs(0.99));
  auto st = ReadProcessStats(getpid());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->policy_interval_ms, 5u);
  EXPECT_EQ(st->policy_cpu_ns, c.policy_cpu_ns);
  EXPECT_EQ(st->policy_round_time.count, c.policy_round_time.count);
  EXPECT_EQ(st->policy_round_time.buckets, c.policy_round_time.buckets);
  const std::string line = ProcessStatsJson(*st);
  EXPECT_NE(line.find("\"policy_cpu_ns\":" + std::to_string(c.policy_cpu_ns)), std::string::npos) << line;
  EXPECT_NE(line.find("\"policy_interval_ms\":5,"), std::string::npos) << line;
  EXPECT_NE(line.find("\"policy_round_time\":{\"count\":" + std::to_string(c.policy_rounds)), std::string::npos)
      << line;
  std::string counters;
  ASSERT_TRUE((*rt)->GetProperty("tiermem.counters.json", &counters));
  EXPECT_NE(counters.find("\"policy_round_time\":{\"count\":" + std::to_string(c.policy_rounds)), std::string::npos)
      << counters;
  EXPECT_EQ(testing::CheckPattern(static_cast<char*>(*p), bytes, 9), SIZE_MAX);
  ASSERT_TRUE((*rt)->Free(*p).ok());
  ASSERT_TRUE((*rt)->Stop().ok());
}

// A DRAM budget of 2 MiB + remote, protection sampling every 10 ms: a hot set of 64 pages
// (from `hot_first`) touched all the time among `npages`, with an occasional cold access. Waits
// (at most 60 s) until DRAM holds at most 600 of the pages, at least 90% of the hot set, and
// `done` says so of the policy thread's stats; then checks every byte.
struct HotSetRun {
  size_t hot_in_dram = 0, resident = 0;
  bool settled = false;
  CounterValues stats;
};
HotSetRun RunHotSet(size_t npages, size_t hot_first, uint64_t scan_pages,
                    const std::function<bool(const CounterValues&)>& done) {
  HotSetRun out;
  testing::MemdProcess memd;
  EXPECT_TRUE(memd.Start({"--capacity", "256M"})) << memd.Log();
  setenv("TIERMEM_SAMPLE_MODE", "protect", 1);
  setenv("TIERMEM_SAMPLE_INTERVAL_MS", "10", 1);
  Options o;
  o.Set("dram_limit", 2 << 20);  // 512 pages
  o.Set("remote", memd.url());
  o.Set("scan_pages", scan_pages);
  auto rt = Runtime::Start(o);
  unsetenv("TIERMEM_SAMPLE_MODE");
  unsetenv("TIERMEM_SAMPLE_INTERVAL_MS");
  EXPECT_TRUE(rt.ok()) << rt.status().ToString();
  if (!rt.ok() || !(*rt)->HasTier(Tier::kRemote)) return out;
  auto p = (*rt)->Allocate(npages * kPage, Tier::kRemote);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) return out;
  char* base = static_cast<char*>(*p);
  testing::FillPattern(base, npages * kPage, 3);
  const size_t hot_n = 64;
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
  // Relief adds each batch to the demotion count right after the batch left (not atomically with
  // it): `done` waits for the count too, or a check between the two reads it short.
  out.settled = WaitFor([&] {
    return resident() <= 600 && hot_in_dram() >= hot_n * 9 / 10 && done(m->counters());
  }, 60);
  out.hot_in_dram = hot_in_dram();
  out.resident = resident();
  stop = true;
  t.join();
  out.stats = m->counters();
  EXPECT_EQ(testing::CheckPattern(base, npages * kPage, 3), SIZE_MAX) << "data lost";
  EXPECT_TRUE((*rt)->Free(base).ok());
  EXPECT_TRUE((*rt)->Stop().ok());
  return out;
}

// 4096 pages, every page record read each round: the hot set ends in DRAM, the rest is demoted
// to the remote tier, DRAM stays near its budget, and no byte is lost.
TEST(TieringTest, HotPagesStayInDramColdPagesGoRemote) {
  const HotSetRun r = RunHotSet(4096, 1000, 0, [](const CounterValues& s) { return s.demotions > 3000; });
  EXPECT_TRUE(r.settled) << "resident " << r.resident << ", hot in DRAM " << r.hot_in_dram
                         << ", demotions " << r.stats.demotions << ", failed " << r.stats.moves_failed;
  EXPECT_GE(r.hot_in_dram, 64u * 9 / 10);
  EXPECT_GT(r.stats.demotions, 3000u);
}

// The same where a round reads a window of the page records (TIERMEM_SCAN_PAGES at its least,
// 1024, against 16384 pages): the hot set still ends up in DRAM and the limit holds, and no
// round lists more of its window than the option allows.
TEST(TieringTest, ARoundReadingAWindowOfThePagesKeepsTheHotSetAndTheLimit) {
  const HotSetRun r = RunHotSet(16384, 9000, 1024, [](const CounterValues& s) { return s.policy_window_rounds > 20; });
  EXPECT_TRUE(r.settled) << "resident " << r.resident << ", hot in DRAM " << r.hot_in_dram
                         << ", window rounds " << r.stats.policy_window_rounds << " of " << r.stats.policy_rounds;
  EXPECT_GE(r.hot_in_dram, 64u * 9 / 10);
  EXPECT_GT(r.stats.policy_window_rounds, 20u) << "the rounds read every page record";
  EXPECT_LE(r.stats.policy_window_listed_max, 1024u) << "a round listed more than its window";
}

// Pages the prefetcher fetched ahead and nobody touched are budget relief's first victims: a
// sequential read through remote memory four times the DRAM limit (prefetched in windows) does
// not push out the pages faulted in before it, which first in, first out would take first.
TEST(TieringTest, PrefetchedPagesNobodyTouchedLeaveBeforePagesThatWereUsed) {
  testing::MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "256M"})) << memd.Log();
  setenv("TIERMEM_SAMPLE_MODE", "faults", 1);
  Options o;
  const size_t limit_pages = 2048;  // 8 MiB
  o.Set("dram_limit", limit_pages * kPage);
  o.Set("remote", memd.url());
  o.Set("prefetch", "auto");
  auto rt = Runtime::Start(o);
  unsetenv("TIERMEM_SAMPLE_MODE");
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  if (!(*rt)->HasTier(Tier::kRemote)) GTEST_SKIP() << "remote tier not available";
  const size_t npages = 16384;  // 64 MiB
  auto p = (*rt)->Allocate(npages * kPage, Tier::kRemote);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  char* base = static_cast<char*>(*p);
  testing::FillPattern(base, npages * kPage, 11);  // most of it goes to memd as it is written
  // The used set: 512 pages (a quarter of the limit) written in random order, so no stream is
  // seen and each comes back by its own fault. The read's own faults (where it outruns its
  // windows: 150-200 here, more on a loaded machine) are pages used after the used set, which
  // relief rightly takes after it: the used set and they must fit below relief's target (the
  // limit less half the slack, 1536 pages), whatever the number of them, so the used set leaves
  // room for 1024 of them.
  const size_t used_n = 512;
  std::vector<size_t> order(used_n);
  for (size_t i = 0; i < used_n; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(3));
  for (size_t pg : order) {
    volatile uint64_t* w = reinterpret_cast<uint64_t*>(base + pg * kPage);
    *w = *w;
  }
  const uint64_t prefetched_before = (*rt)->Counters().pages_prefetched;
  const uint64_t faults_before = (*rt)->Counters().remote_faults;
  // A read of one word per page through 8192 other pages, in order.
  volatile uint64_t sink = 0;
  for (size_t pg = 4096; pg < 4096 + 8192; ++pg) sink = sink + *reinterpret_cast<uint64_t*>(base + pg * kPage);
  const RuntimeCounters c = (*rt)->Counters();
  auto loc = (*rt)->Locate(base, used_n * kPage);
  ASSERT_TRUE(loc.ok()) << loc.status().ToString();
  size_t kept = 0;
  for (auto& l : *loc) kept += l.tier == Tier::kDram && l.resident;
  EXPECT_GT(c.pages_prefetched - prefetched_before, 4096u) << "the read was fetched ahead";
  EXPECT_GT(c.budget_relief_pages, 0u);
  // Relief's order: pages fetched ahead and never touched, then the oldest. The used set is
  // older than the pages the read faulted in itself, so beyond 1024 of those (a machine where
  // the pager runs slowly against the read: a sanitizer's, or a loaded one) the excess comes
  // out of the used set, rightly; what relief keeps of it is checked against what is left.
  const uint64_t read_faults = c.remote_faults - faults_before;
  const size_t room = read_faults >= 1536 ? 0 : std::min<size_t>(used_n, 1536 - read_faults);
  EXPECT_GE(kept, room * 9 / 10) << "of the " << used_n << " pages used before the read, " << kept
                                   << " are still in DRAM; relief " << c.budget_relief_pages
                                   << " pages; the read faulted " << c.remote_faults - faults_before
                                   << " pages in itself";
  EXPECT_EQ(testing::CheckPattern(base, npages * kPage, 11), SIZE_MAX) << "data lost";
  ASSERT_TRUE((*rt)->Free(base).ok());
  ASSERT_TRUE((*rt)->Stop().ok());
  memd.Stop();
}

// Budget relief's second chance under access sampling. Each round touches a used set of 512
// pages, then 2048 pages never touched before (the whole limit, in order: a scan of new data,
// each page seen once). First in, first out kept a median of 256-320 used pages in DRAM after a
// round; relief now passes over pages the sampler catches in use. (Under remote-fault sampling
// the used pages are not seen while resident; there a page gets one more pass for each time it
// faults back soon after its eviction, and this test measured a median of 256-448 either way.)
TEST(TieringTest, PagesInUseOutlastAScanOfNewPages) {
  testing::MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "256M"})) << memd.Log();
  Options o;
  const size_t limit_pages = 2048;  // 8 MiB
  o.Set("dram_limit", limit_pages * kPage);
  o.Set("remote", memd.url());
  o.Set("sample_mode", "protect");
  // Long against a round (well under a second even on a slow machine): the used pages stay hot
  // between their touches; the scanned pages are seen once each, with heat 1.
  o.Set("sample_half_life_ms", 2000);
  o.Set("prefetch", "off");
  auto rt = Runtime::Start(o);
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  if (!(*rt)->HasTier(Tier::kRemote)) GTEST_SKIP() << "remote tier not available";
  const size_t used_n = 512, rounds = 12, scan_first = 1024;
  const size_t npages = scan_first + rounds * limit_pages;  // 100 MiB
  auto p = (*rt)->Allocate(npages * kPage, Tier::kRemote);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  char* base = static_cast<char*>(*p);
  testing::FillPattern(base, used_n * kPage, 13);
  std::mt19937_64 rng(9);
  std::vector<size_t> used(used_n);
  for (size_t i = 0; i < used_n; ++i) used[i] = i;
  std::vector<size_t> kept;  // used pages in DRAM after each round
  uint64_t nonzero = 0;
  volatile uint64_t sink = 0;
  for (size_t round = 0; round < rounds; ++round) {
    std::shuffle(used.begin(), used.end(), rng);
    for (size_t pg : used) sink = sink + *reinterpret_cast<uint64_t*>(base + pg * kPage);
    for (size_t k = 0; k < limit_pages; ++k) {
      nonzero += *reinterpret_cast<uint64_t*>(base + (scan_first + round * limit_pages + k) * kPage) != 0;
    }
    auto loc = (*rt)->Locate(base, used_n * kPage);
    ASSERT_TRUE(loc.ok()) << loc.status().ToString();
    size_t n = 0;
    for (auto& l : *loc) n += l.tier == Tier::kDram && l.resident;
    kept.push_back(n);
    // A few of the policy's rounds see this round's samples before the next (at least two
    // whole rounds begun after the touches, however long a loaded machine makes them).
    const uint64_t rounds_before = (*rt)->Counters().policy_rounds;
    ASSERT_TRUE(testing::WaitFor([&] { return (*rt)->Counters().policy_rounds >= rounds_before + 3; }, 60))
        << "the policy thread ran no rounds in 60 s";
  }
  std::string trace;
  for (size_t n : kept) trace += " " + std::to_string(n);
  // The first rounds bring the used set back by faults (no heat yet); the rest are measured.
  std::vector<size_t> late(kept.begin() + 4, kept.end());
  std::sort(late.begin(), late.end());
  EXPECT_GE(late[late.size() / 2], used_n * 9 / 10) << "used pages in DRAM after each round:" << trace;
  const RuntimeCounters c = (*rt)->Counters();
  EXPECT_GT(c.budget_relief_pages, rounds * limit_pages / 2);
  EXPECT_EQ(nonzero, 0u) << "pages never written read as zeros";
  EXPECT_EQ(testing::CheckPattern(base, used_n * kPage, 13), SIZE_MAX) << "data lost";
  ASSERT_TRUE((*rt)->Free(base).ok());
  ASSERT_TRUE((*rt)->Stop().ok());
  memd.Stop();
  std::printf("used pages in DRAM after each round:%s\n", trace.c_str());
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


// A DRAM limit is a limit: memory placed on the remote tier and then touched comes into DRAM,
// and pages faulted back push others out, so DRAM's pages stay within the limit plus the
// documented slack (the larger of 4 MiB and 1/32 of the limit, and one batch of the fault
// handler: 256 pages and a zero fill of 64, when relief was slower than its wait) while a 64 MiB allocation is
// written and read back under a 16 MiB limit; every byte comes back. In every sampling mode,
// "off" included (budget relief runs without sampling), with relief waiting for its writes and
// with relief's writes in the background (TIERMEM_RELIEF_BACKGROUND=1: DRAM counted less the
// pages in flight, the held-back handler woken as windows finish).
struct DramLimitCase {
  const char* mode;
  bool relief_background;
};
class DramLimitTest : public ::testing::TestWithParam<DramLimitCase> {};

TEST_P(DramLimitTest, HoldsWhileRemoteMemoryIsTouched) {
  testing::MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "256M"})) << memd.Log();
  setenv("TIERMEM_SAMPLE_MODE", GetParam().mode, 1);
  Options o;
  const uint64_t limit = 16 << 20;
  o.Set("dram_limit", limit);
  o.Set("remote", memd.url());
  o.Set("relief_background", GetParam().relief_background);
  auto rt = Runtime::Start(o);
  unsetenv("TIERMEM_SAMPLE_MODE");
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  if (!(*rt)->HasTier(Tier::kRemote)) GTEST_SKIP() << "remote tier not available";
  const uint64_t slack = std::max<uint64_t>(4 << 20, limit / 32) + (256 + 64) * kPage;
  const size_t bytes = 64 << 20;
  auto p = (*rt)->Allocate(bytes, Tier::kRemote);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  char* base = static_cast<char*>(*p);
  uint64_t peak = 0;
  auto dram = [&] {
    for (const TierStats& t : (*rt)->Stats()) {
      if (t.tier == Tier::kDram) return t.allocated_bytes;
    }
    return uint64_t{0};
  };
  for (size_t off = 0; off < bytes; off += 64 * kPage) {
    testing::FillPattern(base + off, 64 * kPage, 7 + off / (64 * kPage));
    peak = std::max(peak, dram());
  }
  const uint64_t after_fill = dram();
  for (size_t off = 0; off < bytes; off += 64 * kPage) {
    ASSERT_EQ(testing::CheckPattern(base + off, 64 * kPage, 7 + off / (64 * kPage)), SIZE_MAX)
        << "data lost at offset " << off;
    peak = std::max(peak, dram());
  }
  const RuntimeCounters c = (*rt)->Counters();
  EXPECT_LE(peak, limit + slack) << "DRAM peaked at " << peak << " bytes; after the fill "
                                 << after_fill << "; relief " << c.budget_relief_pages
                                 << " pages, throttle waits " << c.fault_throttle_waits << " ("
                                 << c.fault_throttle_ns / 1000000 << " ms), evicted " << c.pages_evicted;
  EXPECT_GT(c.pages_evicted, (bytes - limit - slack) / kPage) << "the excess went to memd";
  EXPECT_GT(c.remote_faults, 0u) << "the read pass faulted pages back";
  EXPECT_GT(c.budget_relief_pages, 0u);
  // First touches were zero-filled in batches: far fewer handler round trips than pages.
  EXPECT_GE(c.zero_fills, bytes / kPage / 2);
  ASSERT_TRUE((*rt)->Free(base).ok());
  ASSERT_TRUE((*rt)->Stop().ok());
  memd.Stop();
}

INSTANTIATE_TEST_SUITE_P(Modes, DramLimitTest,
                         ::testing::Values(DramLimitCase{"faults", false}, DramLimitCase{"off", false},
                                           DramLimitCase{"protect", false}, DramLimitCase{"faults", true},
                                           DramLimitCase{"off", true}, DramLimitCase{"protect", true}),
                         [](const ::testing::TestParamInfo<DramLimitCase>& i) {
                           return std::string(i.param.mode) + (i.param.relief_background ? "_background" : "");
                         });

}  // namespace
}  // namespace tiermem
