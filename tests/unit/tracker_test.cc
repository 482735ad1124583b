// The protection-fault tracker: reads and writes of armed pages are caught once each, untouched
// pages yield nothing, protection is always lifted, faults that are not ours reach the handler
// that was there before.
#include "base/os.h"
#include "runtime/tiering/tracker.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>

#include <cstring>
#include <set>

namespace tiermem {
namespace {

constexpr size_t kPage = 4096;

std::atomic<int> g_foreign_faults{0};
void ForeignHandler(int, siginfo_t* info, void*) {
  // A fault that is not the tracker's: make the page accessible so the access can complete.
  g_foreign_faults.fetch_add(1);
  auto page = reinterpret_cast<uintptr_t>(info->si_addr) & ~(kPage - 1);
  mprotect(reinterpret_cast<void*>(page), kPage, PROT_READ | PROT_WRITE);
}

char* MapPages(size_t n) {
  void* p = mmap(nullptr, n * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(p, MAP_FAILED);
  memset(p, 1, n * kPage);
  return static_cast<char*>(p);
}

TEST(TrackerTest, CatchesReadsAndWritesOncePerRoundAndChainsForeignFaults) {
  // The program's own SIGSEGV handler, installed before tiermem's.
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = &ForeignHandler;
  sa.sa_flags = SA_SIGINFO;
  ASSERT_EQ(sigaction(SIGSEGV, &sa, nullptr), 0);

  ProtectTracker& t = ProtectTracker::Get();
  ASSERT_TRUE(t.Install().ok());
  EXPECT_TRUE(t.HandlerInstalled());

  char* base = MapPages(64);
  std::vector<char*> pages;
  for (int i = 0; i < 64; i += 2) pages.push_back(base + i * kPage);
  EXPECT_EQ(t.Arm(pages), pages.size());

  volatile char sink = 0;
  sink = sink + base[0];       // read of an armed page
  base[2 * kPage + 5] = 7;     // write of an armed page
  base[2 * kPage + 6] = 8;     // second write: no second fault needed
  base[1 * kPage] = 3;         // a page that is not armed: no fault at all
  sink = sink + base[4 * kPage + 100];

  std::vector<AccessSample> samples;
  t.Collect(123, &samples);
  std::set<uint64_t> seen;
  for (auto& s : samples) {
    seen.insert(s.page);
    EXPECT_EQ(s.time_ns, 123u);
    if (s.page == reinterpret_cast<uintptr_t>(base + 2 * kPage) >> 12) {
      EXPECT_TRUE(s.write);
    }
    if (s.page == reinterpret_cast<uintptr_t>(base) >> 12) {
      EXPECT_FALSE(s.write);
    }
  }
  EXPECT_EQ(seen, (std::set<uint64_t>{reinterpret_cast<uintptr_t>(base) >> 12,
                                      reinterpret_cast<uintptr_t>(base + 2 * kPage) >> 12,
                                      reinterpret_cast<uintptr_t>(base + 4 * kPage) >> 12}));
  // Every page is accessible again and the data is intact.
  for (int i = 0; i < 64; ++i) {
    char expect = i == 2 ? 1 : (i == 1 ? 3 : 1);
    EXPECT_EQ(base[i * kPage], expect) << "page " << i;
  }
  EXPECT_EQ(base[2 * kPage + 5], 7);
  EXPECT_EQ(g_foreign_faults.load(), 0);

  // A protection fault on memory the tracker never armed goes to the previous handler.
  char* other = MapPages(1);
  ASSERT_EQ(mprotect(other, kPage, PROT_NONE), 0);
  other[10] = 5;
  EXPECT_EQ(g_foreign_faults.load(), 1);
  EXPECT_EQ(other[10], 5);

  // Release lifts protection without a fault and forgets the page.
  EXPECT_EQ(t.Arm(pages), pages.size());
  t.Release(base, 8 * kPage);
  base[0] = 9;  // released: no fault, no sample
  base[10 * kPage] = 9;  // still armed: sampled
  samples.clear();
  t.Collect(1, &samples);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].page, reinterpret_cast<uintptr_t>(base + 10 * kPage) >> 12);
  EXPECT_EQ(g_foreign_faults.load(), 1);
  munmap(base, 64 * kPage);
  munmap(other, kPage);
}

TEST(TrackerTest, KeptPagesStayArmedAcrossRoundsUntilTouchedOrReleased) {
  ProtectTracker& t = ProtectTracker::Get();
  ASSERT_TRUE(t.Install().ok());
  char* base = MapPages(16);
  auto key = [&](int i) { return reinterpret_cast<uintptr_t>(base + i * kPage) >> 12; };
  std::vector<char*> pages;
  for (int i = 0; i < 8; ++i) pages.push_back(base + i * kPage);
  ASSERT_EQ(t.Arm(pages), 8u);
  base[1 * kPage] = 2;  // touched in the first round: reported, not carried
  std::vector<AccessSample> samples;
  std::vector<uint64_t> untouched;
  // Pages 0-5 are kept when untouched; 6 and 7 are not (lifted as before).
  t.Collect(1, &samples, &untouched, [&](uint64_t k) { return k < key(6); });
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].page, key(1));
  EXPECT_EQ(untouched.size(), 7u);  // 0, 2-5 kept, 6-7 lifted: all untouched
  EXPECT_EQ(t.carried(), 5u);
  base[7 * kPage] = 2;  // lifted: no fault, no sample later
  base[3 * kPage] = 2;  // carried: caught between the rounds, reported after the next
  t.Release(base + 5 * kPage, kPage);  // released while carried: lifted, forgotten
  base[5 * kPage] = 2;
  // The next round: carried pages first, plus a new one; 0, 2 and 4 are still protected.
  EXPECT_EQ(t.Arm({base + 10 * kPage}), 4u + 1u);
  volatile char sink = base[4 * kPage + 9];  // a read of a carried page
  (void)sink;
  base[10 * kPage] = 2;
  samples.clear();
  untouched.clear();
  t.Collect(2, &samples, &untouched);  // nothing kept: everything lifted
  std::set<uint64_t> seen;
  for (auto& s : samples) seen.insert(s.page);
  EXPECT_EQ(seen, (std::set<uint64_t>{key(3), key(4), key(10)}));
  EXPECT_EQ(std::set<uint64_t>(untouched.begin(), untouched.end()), (std::set<uint64_t>{key(0), key(2)}));
  EXPECT_EQ(t.carried(), 0u);
  base[0] = 3;  // lifted: plain accesses again, data intact
  EXPECT_EQ(base[2 * kPage], 1);
  EXPECT_EQ(base[3 * kPage], 2);
  munmap(base, 16 * kPage);
}

// The filter is asked under the tracker's lock, page by page: a page it refuses is neither
// protected nor counted (the policy thread refuses pages an eviction has claimed).
TEST(TrackerTest, ArmSkipsThePagesItsFilterRefuses) {
  ProtectTracker& t = ProtectTracker::Get();
  ASSERT_TRUE(t.Install().ok());
  t.DisarmAll();
  char* base = MapPages(8);
  std::vector<char*> pages;
  for (int i = 0; i < 8; ++i) pages.push_back(base + i * kPage);
  std::vector<const char*> asked;
  const size_t armed = t.Arm(pages, [&](const char* p) {
    asked.push_back(p);
    return (p - base) / kPage % 2 == 0;  // even pages only
  });
  EXPECT_EQ(armed, 4u);
  EXPECT_EQ(asked.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(os::CanRead(base + i * kPage, kPage), i % 2 == 1) << "page " << i;
  t.DisarmAll();
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(os::CanRead(base + i * kPage, kPage)) << "page " << i;
  munmap(base, 8 * kPage);
}

TEST(TrackerTest, ReportsWhetherPreciseSamplingExists) {
  std::string reason;
  bool pebs = DetectPebs(&reason);
  EXPECT_FALSE(reason.empty());
  std::printf("PEBS: %s (%s)\n", pebs ? "yes" : "no", reason.c_str());
}

}  // namespace
}  // namespace tiermem
