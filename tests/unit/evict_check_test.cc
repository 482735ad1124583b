// The write scan mode's eviction check (runtime/paging/evict_check.h): a page unchanged since its
// copy is dropped, one written after its copy is put back with its bytes, a missing one is named;
// and, under a thread writing counters into the pages the whole time while another evicts them
// and a handler serves faults from what was "sent", no write is ever lost.
#include "runtime/paging/evict_check.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/os.h"
#include "base/os_pagemap.h"
#include "bench/splitmix.h"
#include "tests/unit/test_mapping.h"

namespace tiermem {
namespace {

constexpr size_t kPage = TestMapping::kPage;

// Pages and one scratch page registered (missing and write-protect faults) with one WP_ASYNC
// userfaultfd that has UFFDIO_MOVE.
struct MoveRanges {
  explicit MoveRanges(size_t pages) : data(pages, 0), scratch(1, 0) {}
  ~MoveRanges() {
    if (uffd >= 0) close(uffd);
    if (pm >= 0) close(pm);
  }
  std::string Open() {
    const os::TrackingSupport s = os::ProbeTracking();
    if (!s.uffd_move.present) return s.uffd_move.why;
    EXPECT_EQ(os::Discard(scratch.base, kPage), 0);
    StatusOr<os::Uffd> u = os::UffdOpenWpAsync();
    EXPECT_TRUE(u.ok());
    uffd = u.ok() ? u->fd : -1;
    pm = os::PagemapOpen();
    EXPECT_GE(pm, 0) << "/proc/self/pagemap";
    EXPECT_TRUE(os::UffdRegister(uffd, data.base, data.bytes, true).ok());
    EXPECT_TRUE(os::UffdRegister(uffd, scratch.base, kPage, true).ok());
    return {};
  }
  TestMapping data, scratch;
  int uffd = -1;
  int pm = -1;  // /proc/self/pagemap
};

// Whether the pagemap shows a page (present or swapped) at `p`.
bool Populated(const char* p) {
  const int pm = os::PagemapOpen();
  uint64_t e = 0;
  const bool read = pm >= 0 && os::ReadPagemap(pm, p, 1, &e);
  if (pm >= 0) close(pm);
  EXPECT_TRUE(read) << "/proc/self/pagemap";
  return os::PagemapPopulated(e);
}

TEST(TakeOutIfSent, DropsAnUnchangedPageAndPutsAWrittenOneBack) {
  MoveRanges s(4);
  if (std::string why = s.Open(); !why.empty()) GTEST_SKIP() << why;
  ASSERT_TRUE(os::UffdWriteProtect(s.uffd, s.data.base, s.data.bytes, true).ok());
  std::vector<char> sent(kPage);
  char* page = s.data.base + kPage;
  memset(page, 7, kPage);
  memcpy(sent.data(), page, kPage);
  page[100] = 8;  // after the copy: a write the server has not seen
  auto r = TakeOutIfSent(s.uffd, s.pm, page, s.scratch.base, sent.data());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, TakeOut::kChanged);
  EXPECT_EQ(page[100], 8);  // back, with its bytes (present: no fault)
  memcpy(sent.data(), page, kPage);
  r = TakeOutIfSent(s.uffd, s.pm, page, s.scratch.base, sent.data());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, TakeOut::kDropped);
  EXPECT_FALSE(Populated(page));            // gone: a touch would be a missing fault
  EXPECT_FALSE(Populated(s.scratch.base));  // and the scratch page is empty again
  r = TakeOutIfSent(s.uffd, s.pm, page, s.scratch.base, sent.data());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, TakeOut::kAbsent);
}

// A scratch page that is not empty (a drop of it that failed, or anything else left there) makes
// UFFDIO_MOVE refuse the take-out (EEXIST): it is emptied and the page taken out all the same,
// never left in place as if written (the caller would then call an eviction off for nothing).
TEST(TakeOutIfSent, AScratchPageLeftFullIsEmptiedFirst) {
  MoveRanges s(2);
  if (std::string why = s.Open(); !why.empty()) GTEST_SKIP() << why;
  std::vector<char> sent(kPage);
  char* page = s.data.base;
  memset(page, 5, kPage);
  memcpy(sent.data(), page, kPage);
  // The scratch range serves no missing faults here: filled the way a take-out fills it.
  char* other = s.data.base + kPage;
  memset(other, 6, kPage);
  ASSERT_EQ(os::UffdMove(s.uffd, s.scratch.base, other, kPage), 0);
  auto r = TakeOutIfSent(s.uffd, s.pm, page, s.scratch.base, sent.data());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, TakeOut::kDropped);
  EXPECT_FALSE(Populated(page));
  EXPECT_FALSE(Populated(s.scratch.base));
}

// A page's state, as the pager keeps it: the handler serves a fault only on a remote page; a page
// being taken out makes its faults wait until the evictor has decided and woken them.
enum : int { kLocal = 0, kOut = 1, kRemote = 2 };

struct Race {
  static constexpr size_t kPages = 32;
  explicit Race(MoveRanges* s) : s(s), state(kPages), remote(kPages * kPage), expected(kPages, 0) {}
  // Serves missing faults of remote pages from what was sent, until `stop` is signalled.
  void Handler() {
    os::UffdFault f[16];
    while (os::WaitReadableFor(s->uffd, stop, 1000) != 1) {
      auto n = os::UffdReadFaults(s->uffd, f, 16);
      for (size_t i = 0; n.ok() && i < *n; ++i) {
        const size_t p = (f[i].address - reinterpret_cast<uintptr_t>(s->data.base)) / kPage;
        if (p >= kPages || state[p].load() != kRemote) continue;  // the evictor wakes it
        char* page = s->data.base + p * kPage;
        EXPECT_TRUE(os::UffdCopy(s->uffd, page, remote.data() + p * kPage, kPage, false).ok());
        state[p].store(kLocal);
        os::UffdWake(s->uffd, page, kPage);
      }
    }
  }
  // Adds one to a counter in random pages until `evictions` pages were taken out, or `bound_s`
  // seconds passed: the bound on the test's time if evictions stall. (A count of writes is no
  // such bound: on a busy machine the writer can make any number while the evictor waits for a
  // core.)
  void Writer(size_t evictions, int bound_s) {
    uint64_t rng = 1;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(bound_s);
    for (size_t k = 0; !failed.load() && dropped.load() + changed.load() < evictions; ++k) {
      if (k % 65536 == 0 && std::chrono::steady_clock::now() > until) break;
      const size_t p = SplitMix64Next(&rng) % kPages;
      auto* c = reinterpret_cast<volatile uint64_t*>(s->data.base + p * kPage + (k % 8) * 512);
      *c = *c + 1;
      ++expected[p];
    }
    done.store(true);
  }
  // Copies, "sends" and takes out every local page, round after round, until the writer is done.
  void Evictor() {
    std::vector<char> sent(kPage);
    while (!done.load()) {
      for (size_t p = 0; p < kPages; ++p) {
        int local = kLocal;
        if (!state[p].compare_exchange_strong(local, kOut)) continue;
        char* page = s->data.base + p * kPage;
        if (count_swapped) {
          uint64_t e = 0;
          if (os::ReadPagemap(s->pm, page, 1, &e) && ((e >> 62) & 3) == 1) ++swapped;  // bit 62 alone: swapped
        }
        memcpy(sent.data(), page, kPage);
        memcpy(remote.data() + p * kPage, sent.data(), kPage);
        auto r = TakeOutIfSent(s->uffd, s->pm, page, s->scratch.base, sent.data());
        if (!r.ok() || *r == TakeOut::kShared) {
          ADD_FAILURE() << (r.ok() ? "EBUSY" : r.status().ToString());
          failed.store(true);  // the writer stops; a touch of this page is served from `sent`
          state[p].store(kRemote);
          os::UffdWake(s->uffd, page, kPage);
          return;
        }
        // Dropped, or (as the pager takes it) found with nothing there and dropped as it is:
        // either way its touches are served from what was sent.
        const bool out = *r != TakeOut::kChanged;
        (out ? dropped : changed)++;
        state[p].store(out ? kRemote : kLocal);
        os::UffdWake(s->uffd, page, kPage);
      }
    }
  }
  // Pushes the pages out to swap (MADV_PAGEOUT) over and over until the writer is done.
  void PagerOut() {
    while (!done.load()) {
      (void)madvise(s->data.base, s->data.bytes, MADV_PAGEOUT);
      std::this_thread::yield();
    }
  }
  // Checks every page's counters (remote pages fault back in through the handler); the number of
  // pages whose sum is not the writes made to them.
  size_t Wrong() {
    size_t wrong = 0;
    for (size_t p = 0; p < kPages; ++p) {
      uint64_t sum = 0;
      for (size_t k = 0; k < 8; ++k) sum += *reinterpret_cast<volatile uint64_t*>(s->data.base + p * kPage + k * 512);
      wrong += sum != expected[p];
    }
    return wrong;
  }
  MoveRanges* s;
  int stop = -1;
  std::vector<std::atomic<int>> state;
  std::vector<char> remote;
  std::vector<uint64_t> expected;
  std::atomic<bool> done{false};
  std::atomic<size_t> dropped{0}, changed{0};
  std::atomic<bool> failed{false};  // a take-out failed: the evictor stopped
  bool count_swapped = false;
  size_t swapped = 0;  // take-outs of a page found out in swap (count_swapped)
};

// Runs `race` (a writer, an evictor, a fault handler; with `pager_out`, a thread pushing the pages
// out to swap too) until 20000 pages were taken out or the writer's bound passed.
void RunRace(Race& race, bool pager_out) {
  auto stop = os::EventFd();
  ASSERT_TRUE(stop.ok());
  race.stop = *stop;
  std::thread handler([&] { race.Handler(); });
  std::thread writer([&] { race.Writer(20000, 300); });
  std::thread out([&] {
    if (pager_out) race.PagerOut();
  });
  race.Evictor();
  writer.join();
  out.join();
  if (!race.failed) {
    EXPECT_EQ(race.Wrong(), 0u);
  }
  os::EventFdSignal(race.stop);
  handler.join();
  os::Close(race.stop);
  EXPECT_GE(race.dropped + race.changed, 20000u);
  fprintf(stderr, "evictions: %zu dropped, %zu called off by a write after the copy\n", race.dropped.load(),
          race.changed.load());
}

TEST(TakeOutIfSent, NoWriteIsLostWhilePagesAreEvictedUnderAWriter) {
  MoveRanges s(Race::kPages);
  if (std::string why = s.Open(); !why.empty()) GTEST_SKIP() << why;
  Race race(&s);
  RunRace(race, false);
}

// Whether /proc/swaps lists a swap area (a header line, then one line each).
bool SwapOn() {
  std::ifstream f("/proc/swaps");
  std::string line;
  int lines = 0;
  while (std::getline(f, line)) ++lines;
  return lines > 1;
}

// The same race with the pages pushed out to swap meanwhile. The kernel has reported EEXIST for a
// swapped page that UFFDIO_MOVE had moved into the scratch page: taken for a full scratch page,
// emptied with the page's bytes in it, and the page dropped with the older copy sent (the
// counters of its writes after the copy lost).
TEST(TakeOutIfSent, NoWriteIsLostWhilePagesGoOutToSwap) {
  if (!SwapOn()) GTEST_SKIP() << "no swap area (/proc/swaps): pages cannot go out to swap";
  MoveRanges s(Race::kPages);
  if (std::string why = s.Open(); !why.empty()) GTEST_SKIP() << why;
  Race race(&s);
  race.count_swapped = true;
  RunRace(race, true);
  EXPECT_GT(race.swapped, 0u) << "no page was out in swap when taken out";
  fprintf(stderr, "take-outs of a page out in swap: %zu\n", race.swapped);
}

}  // namespace
}  // namespace tiermem
