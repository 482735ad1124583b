// TIERMEM_POLICY_CPU through the runtime: the policy thread's rounds are paced by its share of a
// CPU (runtime/tiering/round_pacer.h; the pacer's arithmetic is in tests/unit/round_pacer_test.cc).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "remote_memd_fixture.h"
#include "sampled_runtime.h"
#include "runtime/core/runtime_impl.h"
#include "runtime/tiering/migrator.h"
#include "test_util.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

constexpr size_t kPage = 4096;

struct PacedRun {
  bool ran = false;
  bool reached = false;  // `done` held within the bound
  CounterValues stats;
  uint64_t elapsed_ns = 0;  // from the reader's start to `done`
};

// 16384 pages placed remote under an 8 MiB DRAM limit, protection sampling every 5 ms, each
// round reading every page record; a thread reads random pages until the policy's stats satisfy
// `done` (at most 120 s), then every byte is checked.
template <class Done>
PacedRun RunWithShare(uint64_t share_percent, Done done) {
  PacedRun out;
  testing::MemdProcess memd;
  EXPECT_TRUE(memd.Start({"--capacity", "256M"})) << memd.Log();
  auto rt = testing::StartSampled(memd, "protect", 8 << 20, share_percent);
  EXPECT_TRUE(rt.ok()) << rt.status().ToString();
  if (!rt.ok() || !(*rt)->HasTier(Tier::kRemote)) return out;
  const size_t npages = 16384;
  auto p = (*rt)->Allocate(npages * kPage, Tier::kRemote);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) return out;
  char* base = static_cast<char*>(*p);
  testing::FillPattern(base, npages * kPage, 7);
  std::atomic<bool> stop{false};
  const auto start = std::chrono::steady_clock::now();
  std::thread t([&] {
    std::mt19937_64 rng(11);
    volatile uint64_t sink = 0;
    while (!stop.load()) sink = sink + *reinterpret_cast<uint64_t*>(base + (rng() % npages) * kPage);
  });
  Migrator* m = ImplOf(**rt)->migrator();
  out.reached = testing::WaitFor([&] { return done(m->counters()); }, 120);
  out.elapsed_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  stop = true;
  t.join();
  out.stats = m->counters();
  EXPECT_EQ(testing::CheckPattern(base, npages * kPage, 7), SIZE_MAX) << "data lost";
  EXPECT_TRUE((*rt)->Free(base).ok());
  EXPECT_TRUE((*rt)->Stop().ok());
  out.ran = true;
  return out;
}

// Unbounded, the rounds keep their 5 ms interval and none is paced; at 1% of a CPU each round
// (a whole scan of 16384 records, a plan, a sample) overdraws the share and the next waits, so
// most of the run is spent waiting past the interval. No byte is lost either way. (The two runs'
// round counts are not compared: unpaced rounds go by wall time, paced ones by CPU time, and a
// loaded machine moves the first, not the second.) Each run lasts until it has the rounds it
// needs, however slow the machine.
TEST(PolicyCpu, ASmallShareSpacesTheRoundsOut) {
  const PacedRun free_run = RunWithShare(0, [](const CounterValues& s) { return s.policy_rounds >= 50; });
  const PacedRun paced = RunWithShare(1, [](const CounterValues& s) { return s.policy_paced_rounds >= 4; });
  ASSERT_TRUE(free_run.ran && paced.ran);
  EXPECT_TRUE(free_run.reached) << "the unbounded policy ran " << free_run.stats.policy_rounds << " rounds in 120 s";
  EXPECT_TRUE(paced.reached) << "at 1%, " << paced.stats.policy_paced_rounds << " rounds were paced in 120 s";
  EXPECT_EQ(free_run.stats.policy_paced_rounds, 0u);
  EXPECT_EQ(free_run.stats.policy_paced_ns, 0u);
  printf("rounds: unbounded %llu, paced %llu (%llu of them later than their interval, by %.0f of %.0f ms)\n",
         static_cast<unsigned long long>(free_run.stats.policy_rounds), static_cast<unsigned long long>(paced.stats.policy_rounds),
         static_cast<unsigned long long>(paced.stats.policy_paced_rounds), static_cast<double>(paced.stats.policy_paced_ns) / 1e6,
         static_cast<double>(paced.elapsed_ns) / 1e6);
  EXPECT_GT(paced.stats.policy_paced_ns, paced.elapsed_ns / 2) << "less than half of the paced run waited for the share";
}

}  // namespace
}  // namespace tiermem
