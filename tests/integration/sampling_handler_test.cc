// A program that installs its own SIGSEGV handler while protection sampling runs: sampling stops
// (the protection faults would reach the program), and no page is left protected for the
// program's handler to meet.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "remote_memd_fixture.h"
#include "runtime/core/runtime_impl.h"
#include "runtime/tiering/migrator.h"
#include "test_util.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

constexpr size_t kPage = 4096;
std::atomic<int> g_program_faults{0};

// The program's handler: counts the fault and opens the page, so the test goes on to report it.
void ProgramHandler(int, siginfo_t* info, void*) {
  g_program_faults.fetch_add(1);
  void* page = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(info->si_addr) & ~(kPage - 1));
  mprotect(page, kPage, PROT_READ | PROT_WRITE);
}

template <class F>
bool WaitFor(F pred, int seconds) {
  for (int i = 0; i < seconds * 100; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// Protection sampling with the watch (a 2 MiB DRAM limit, 4096 pages, a hot set read all the
// time): once pages are under watch, the program installs its own SIGSEGV handler; after a few
// rounds (the policy thread notices and stops sampling) every page is read and written, and
// none of those accesses may reach the program's handler. On the tree before, the pages the
// watch carried stayed PROT_NONE for good.
TEST(SamplingHandler, AProgramsOwnSegvHandlerMeetsNoProtectedPage) {
  testing::MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "256M"})) << memd.Log();
  setenv("TIERMEM_SAMPLE_MODE", "protect", 1);
  setenv("TIERMEM_SAMPLE_INTERVAL_MS", "5", 1);
  Options o;
  o.Set("dram_limit", 2 << 20);
  o.Set("remote", memd.url());
  auto rt = Runtime::Start(o);
  unsetenv("TIERMEM_SAMPLE_MODE");
  unsetenv("TIERMEM_SAMPLE_INTERVAL_MS");
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
  ASSERT_TRUE(WaitFor([&] { return m->stats().pages_armed > 2000; }, 60)) << "the sample armed too little";
  stop = true;
  t.join();
  struct sigaction sa {}, old {};
  sa.sa_sigaction = ProgramHandler;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGSEGV, &sa, &old), 0);
  const uint64_t r0 = m->stats().rounds;
  EXPECT_TRUE(WaitFor([&] { return m->stats().rounds >= r0 + 5; }, 30));
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
