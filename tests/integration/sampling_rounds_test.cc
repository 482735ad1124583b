// The policy thread's sampling rounds through the runtime: a sample that arms no page at all
// (every candidate a page never touched, which soft eviction has nothing to keep of) still opens
// a round that the next one collects, so sampling goes on once the pages hold data.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "remote_memd_fixture.h"
#include "runtime/core/runtime_impl.h"
#include "runtime/tiering/migrator.h"
#include "test_util.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

constexpr size_t kPage = 4096;

template <class F>
bool WaitFor(F pred, int seconds) {
  for (int i = 0; i < seconds * 100; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// Soft eviction (uffd) under an 8 MiB DRAM limit: 7 MiB allocated in DRAM and left untouched
// for 10 rounds, so each round's sample finds nothing to arm; then every page is written. The
// sample must arm pages after that (on the tree before, the first empty sample left the sampler
// mid-round, and every later Arm was refused: pages_armed stayed 0).
TEST(SamplingRounds, ASampleThatArmsNothingDoesNotEndSampling) {
  testing::MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "256M"})) << memd.Log();
  setenv("TIERMEM_SAMPLE_MODE", "uffd", 1);
  setenv("TIERMEM_SAMPLE_INTERVAL_MS", "5", 1);
  Options o;
  o.Set("dram_limit", 8 << 20);
  o.Set("remote", memd.url());
  auto rt = Runtime::Start(o);
  unsetenv("TIERMEM_SAMPLE_MODE");
  unsetenv("TIERMEM_SAMPLE_INTERVAL_MS");
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  Migrator* m = ImplOf(**rt)->migrator();
  ASSERT_NE(m, nullptr);
  if (m->stats().mode != "uffd") GTEST_SKIP() << "soft eviction is not available here: " << m->stats().mode;
  const size_t npages = 1792;  // 7 MiB: DRAM at 7/8 of its limit, so the policy samples
  auto p = (*rt)->Allocate(npages * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  char* base = static_cast<char*>(*p);
  const uint64_t r0 = m->stats().rounds;
  ASSERT_TRUE(WaitFor([&] { return m->stats().rounds >= r0 + 10; }, 30)) << "the policy thread ran no rounds";
  testing::FillPattern(base, npages * kPage, 5);
  EXPECT_TRUE(WaitFor([&] { return m->stats().pages_armed > 0; }, 30))
      << "no page armed in " << m->stats().rounds - r0 << " rounds after the pages were written";
  EXPECT_EQ(testing::CheckPattern(base, npages * kPage, 5), SIZE_MAX) << "data lost";
  EXPECT_TRUE((*rt)->Free(base).ok());
  EXPECT_TRUE((*rt)->Stop().ok());
}

}  // namespace
}  // namespace tiermem
