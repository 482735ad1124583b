// The policy thread's sampling rounds through the runtime: a sample that arms no page at all
// (every candidate a page never touched, which soft eviction has nothing to keep of) still opens
// a round that the next one collects, so sampling goes on once the pages hold data; and a
// program that installs its own SIGSEGV handler while protection sampling runs stops the
// sampling without meeting a page it left protected.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>

#include <atomic>
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

using testing::WaitFor;

std::atomic<int> g_program_faults{0};

// The program's handler: counts the fault and opens the page, so the test goes on to report it.
void ProgramHandler(int, siginfo_t* info, void*) {
  g_program_faults.fetch_add(1);
  void* page = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(info->si_addr) & ~(kPage - 1));
  mprotect(page, kPage, PROT_READ | PROT_WRITE);
}

// Soft eviction (uffd) under an 8 MiB DRAM limit: 7 MiB allocated in DRAM and left untouched
// for 10 rounds, so each round's sample finds nothing to arm; then every page is written. The
// sample must arm pages after that (on the tree before, the first empty sample left the sampler
// mid-round, and every later Arm was refused: pages_armed stayed 0).
TEST(SamplingRounds, ASampleThatArmsNothingDoesNotEndSampling) {
  testing::MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "256M"})) << memd.Log();
  auto rt = testing::StartSampled(memd, "uffd", 8 << 20);
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  Migrator* m = ImplOf(**rt)->migrator();
  ASSERT_NE(m, nullptr);
  if (m->stats().mode != "uffd") GTEST_SKIP() << "soft eviction is not available here: " << m->stats().mode;
  const size_t npages = 1792;  // 7 MiB: DRAM at 7/8 of its limit, so the policy samples
  auto p = (*rt)->Allocate(npages * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  char* base = static_cast<char*>(*p);
  const uint64_t r0 = m->counters().policy_rounds;
  ASSERT_TRUE(WaitFor([&] { return m->counters().policy_rounds >= r0 + 10; }, 30)) << "the policy thread ran no rounds";
  testing::FillPattern(base, npages * kPage, 5);
  EXPECT_TRUE(WaitFor([&] { return m->counters().pages_armed > 0; }, 30))
      << "no page armed in " << m->counters().policy_rounds - r0 << " rounds after the pages were written";
  EXPECT_EQ(testing::CheckPattern(base, npages * kPage, 5), SIZE_MAX) << "data lost";
  EXPECT_TRUE((*rt)->Free(base).ok());
  EXPECT_TRUE((*rt)->Stop().ok());
}

// Protection sampling with the watch (a 2 MiB DRAM limit, 4096 pages, a hot set read all the
// time): once pages are under watch, the program installs its own SIGSEGV handler; after a few
// rounds (the policy thread notices and stops sampling) every page is read and written, and
// none of those accesses may reach the program's handler. On the tree before, the pages the
// watch carried stayed PROT_NONE for good.
TEST(SamplingRounds, AProgramsOwnSegvHandlerMeetsNoProtectedPage) {
  testing::MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "256M"})) << memd.Log();
  auto rt = testing::StartSampled(memd, "protect", 2 << 20);
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  if (!(*rt)->HasTier(Tier::kRemote)) GTEST_SKIP() << "no remote tier";
  Migrator* m = ImplOf(**rt)->migrator();
  ASSERT_NE(m, nullptr);
  const size_t npages = 4096;
  auto p = (*rt)->Allocate(npages * kPage, Tier::kRemote);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  char* base = static_cast<char*>(*p);
  testing::FillPattern(base, npages * kPage, 9);
  std::atomic<bool> stop{false};
  std::thread t([&] {
    std::mt19937_64 rng(3);
    volatile uint64_t sink = 0;
    while (!stop.load()) sink = sink + *reinterpret_cast<volatile uint64_t*>(base + (rng() % 64) * kPage);
  });
  // Wait until the watch holds pages (armed and carried), then take SIGSEGV over.
  ASSERT_TRUE(WaitFor([&] { return m->counters().pages_armed > 2000; }, 60)) << "the sample armed too little";
  stop = true;
  t.join();
  struct sigaction sa {}, old {};
  sa.sa_sigaction = ProgramHandler;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGSEGV, &sa, &old), 0);
  // The mode in effect says the samples stopped (`tiermem advise` reads it from the exit report),
  // once a round has noticed (however slow the rounds: a sanitizer's build).
  EXPECT_TRUE(WaitFor([&] { return m->stats().mode == "faults"; }, 60)) << "sampling did not stop";
  EXPECT_EQ(m->stats().mode, "faults");
  EXPECT_EQ((*rt)->Counters().sampling_mode, "faults");
  g_program_faults = 0;
  EXPECT_EQ(testing::CheckPattern(base, npages * kPage, 9), SIZE_MAX) << "data lost";
  testing::FillPattern(base, npages * kPage, 10);
  EXPECT_EQ(g_program_faults.load(), 0) << "pages were left protected after sampling stopped";
  sigaction(SIGSEGV, &old, nullptr);  // tiermem's handler back before the runtime stops
  EXPECT_TRUE((*rt)->Free(base).ok());
  EXPECT_TRUE((*rt)->Stop().ok());
}

}  // namespace
}  // namespace tiermem
