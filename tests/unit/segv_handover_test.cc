// SIGSEGV's hand-over (base/os_signal.h): while the tracker's handler is installed, the actions a
// program sets through os::ProgramSigaction (the preload library's sigaction) are recorded, not
// installed; the tracker's handler stays and passes the program's own faults to them as the
// kernel would have (sa_mask, SA_NODEFER, SA_RESETHAND), also while another thread swaps them;
// a handler function of the program's own makes the tracker unusable (sampling stops).
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "base/os_signal.h"
#include "runtime/tiering/tracker.h"

namespace tiermem {
namespace {

constexpr size_t kPage = 4096;
// Under ThreadSanitizer a SIGSEGV reaches tiermem's handler through the sanitizer's own, which
// keeps its own view of the thread's mask: there the second fault's handler still saw SIGUSR1
// blocked, the first action's sa_mask. The masks are checked in the other builds only.
#if defined(__SANITIZE_THREAD__)
constexpr bool kMasksAsTheKernelSetsThem = false;
#else
constexpr bool kMasksAsTheKernelSetsThem = true;
#endif

std::atomic<int> g_first{0}, g_second{0};
std::atomic<void*> g_addr{nullptr};
std::atomic<bool> g_usr1_blocked{false}, g_segv_blocked{false};

void Lift(siginfo_t* info) {
  const auto page = reinterpret_cast<uintptr_t>(info->si_addr) & ~(kPage - 1);
  mprotect(reinterpret_cast<void*>(page), kPage, PROT_READ | PROT_WRITE);
}
void First(int, siginfo_t* info, void*) {
  g_first.fetch_add(1);
  g_addr = info->si_addr;
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  g_usr1_blocked = sigismember(&now, SIGUSR1) == 1;
  g_segv_blocked = sigismember(&now, SIGSEGV) == 1;
  Lift(info);
}
void Second(int, siginfo_t* info, void*) {
  g_second.fetch_add(1);
  Lift(info);
}

struct sigaction Action(void (*handler)(int, siginfo_t*, void*), int flags) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO | flags;
  sigemptyset(&sa.sa_mask);
  return sa;
}

char* ProtectedPage() {
  void* p = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(p, MAP_FAILED);
  EXPECT_EQ(mprotect(p, kPage, PROT_NONE), 0);
  return static_cast<char*>(p);
}

void InstallTracker() {
  ASSERT_TRUE(ProtectTracker::Get().Install().ok());
  ASSERT_TRUE(ProtectTracker::Get().HandlerInstalled());
}

TEST(SegvHandOver, ProgramActionsAreChainedToAsTheKernelWouldDeliverThem) {
  InstallTracker();
  struct sigaction first = Action(&First, 0), old, now;
  sigaddset(&first.sa_mask, SIGUSR1);
  // SIG_IGN and SIG_DFL are no handler of the program's own: sampling may go on.
  struct sigaction ignore;
  memset(&ignore, 0, sizeof(ignore));
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ASSERT_EQ(os::ProgramSigaction(SIGSEGV, &ignore, nullptr), 0);
  ignore.sa_handler = SIG_DFL;
  ASSERT_EQ(os::ProgramSigaction(SIGSEGV, &ignore, nullptr), 0);
  EXPECT_TRUE(ProtectTracker::Get().usable());
  ASSERT_EQ(os::ProgramSigaction(SIGSEGV, &first, &old), 0);
  EXPECT_FALSE(old.sa_flags & SA_SIGINFO) << "oldact is tiermem's handler";
  EXPECT_EQ(old.sa_handler, SIG_DFL);
  EXPECT_TRUE(ProtectTracker::Get().HandlerInstalled()) << "the program's action reached the kernel";
  // A handler of the program's own stops protection sampling (tracker.h says why), though
  // tiermem's handler stays installed and chains to it.
  EXPECT_FALSE(ProtectTracker::Get().usable());
  ASSERT_EQ(os::ProgramSigaction(SIGSEGV, nullptr, &now), 0);
  EXPECT_EQ(now.sa_sigaction, &First);
  EXPECT_TRUE(sigismember(&now.sa_mask, SIGUSR1));

  char* page = ProtectedPage();
  page[7] = 1;
  EXPECT_EQ(g_first.load(), 1);
  EXPECT_EQ(g_addr.load(), page + 7);
  EXPECT_TRUE(g_usr1_blocked.load()) << "sa_mask not applied";
  EXPECT_TRUE(g_segv_blocked.load());

  // SA_NODEFER: SIGSEGV not blocked in the handler.
  struct sigaction nodefer = Action(&First, SA_NODEFER);
  ASSERT_EQ(os::ProgramSigaction(SIGSEGV, &nodefer, &old), 0);
  EXPECT_EQ(old.sa_sigaction, &First);
  mprotect(page, kPage, PROT_NONE);
  page[8] = 1;
  EXPECT_EQ(g_first.load(), 2);
  if (kMasksAsTheKernelSetsThem) {
    EXPECT_FALSE(g_segv_blocked.load());
    EXPECT_FALSE(g_usr1_blocked.load());
  }

  // SA_RESETHAND: delivered once, then SIG_DFL (as the program reads it back).
  struct sigaction once = Action(&Second, SA_RESETHAND);
  ASSERT_EQ(os::ProgramSigaction(SIGSEGV, &once, nullptr), 0);
  mprotect(page, kPage, PROT_NONE);
  page[9] = 1;
  EXPECT_EQ(g_second.load(), 1);
  ASSERT_EQ(os::ProgramSigaction(SIGSEGV, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  EXPECT_TRUE(ProtectTracker::Get().HandlerInstalled());
  // Another signal goes to the kernel as it is.
  struct sigaction usr = Action(&Second, 0), usr_old;
  ASSERT_EQ(os::ProgramSigaction(SIGUSR2, &usr, &usr_old), 0);
  struct sigaction kernel;
  ASSERT_EQ(sigaction(SIGUSR2, nullptr, &kernel), 0);
  EXPECT_EQ(kernel.sa_sigaction, &Second);
  munmap(page, kPage);
}

// Threads fault on pages of their own while another swaps the program's handler between two:
// every fault reaches exactly one of them, and the swapper is always given back one of the two.
TEST(SegvHandOver, FaultsWhileTheProgramSwapsItsHandler) {
  InstallTracker();
  struct sigaction first = Action(&First, 0), second = Action(&Second, 0), old;
  ASSERT_EQ(os::ProgramSigaction(SIGSEGV, &first, nullptr), 0);
  g_first = 0;
  g_second = 0;
  constexpr int kThreads = 2, kFaults = 5000;
  std::atomic<int> running{kThreads};
  std::atomic<int> foreign_old{0}, swaps{0}, faults{0};
  std::thread swapper([&] {
    for (int i = 0; running.load() > 0; ++i) {
      os::ProgramSigaction(SIGSEGV, i % 2 ? &first : &second, &old);
      if (old.sa_sigaction != &First && old.sa_sigaction != &Second) foreign_old.fetch_add(1);
      swaps.fetch_add(1);
    }
  });
  std::vector<std::thread> faulters;
  for (int t = 0; t < kThreads; ++t) {
    faulters.emplace_back([&] {
      char* page = ProtectedPage();
      // Until the swapper has swapped a while, and at least kFaults times.
      for (int i = 0; i < kFaults || swaps.load() < 1000; ++i) {
        page[i % kPage] = 1;
        faults.fetch_add(1);
        mprotect(page, kPage, PROT_NONE);
      }
      munmap(page, kPage);
      running.fetch_sub(1);
    });
  }
  for (auto& f : faulters) f.join();
  swapper.join();
  EXPECT_EQ(foreign_old.load(), 0);
  EXPECT_EQ(g_first.load() + g_second.load(), faults.load());
  EXPECT_GT(g_first.load(), 0);
  EXPECT_GT(g_second.load(), 0);
  EXPECT_TRUE(ProtectTracker::Get().HandlerInstalled());
}

}  // namespace
}  // namespace tiermem
