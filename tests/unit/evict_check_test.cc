// The write scan mode's eviction check (runtime/paging/evict_check.h): a page unchanged since its
// copy is dropped, one written after its copy is put back with its bytes, a missing one is named;
// and, under a thread writing counters into the pages the whole time while another evicts them
// and a handler serves faults from what was "sent", no write is ever lost.
#include "runtime/paging/evict_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
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
  }
  std::string Open() {
    const os::TrackingSupport s = os::ProbeTracking();
    if (!s.uffd_move.present) return s.uffd_move.why;
    EXPECT_EQ(os::Discard(scratch.base, kPage), 0);
    StatusOr<os::Uffd> u = os::UffdOpenWpAsync();
    EXPECT_TRUE(u.ok());
    uffd = u.ok() ? u->fd : -1;
    EXPECT_TRUE(os::UffdRegister(uffd, data.base, data.bytes, true).ok());
    EXPECT_TRUE(os::UffdRegister(uffd, scratch.base, kPage, true).ok());
    return {};
  }
  TestMapping data, scratch;
  int uffd = -1;
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
  auto r = TakeOutIfSent(s.uffd, page, s.scratch.base, sent.data());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, TakeOut::kChanged);
  EXPECT_EQ(page[100], 8);  // back, with its bytes (present: no fault)
  memcpy(sent.data(), page, kPage);
  r = TakeOutIfSent(s.uffd, page, s.scratch.base, sent.data());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, TakeOut::kDropped);
  EXPECT_FALSE(Populated(page));            // gone: a touch would be a missing fault
  EXPECT_FALSE(Populated(s.scratch.base));  // and the scratch page is empty again
  r = TakeOutIfSent(s.uffd, page, s.scratch.base, sent.data());
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
  auto r = TakeOutIfSent(s.uffd, page, s.scratch.base, sent.data());
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
    for (size_t k = 0; dropped.load() + changed.load() < evictions; ++k) {
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
        memcpy(sent.data(), page, kPage);
        memcpy(remote.data() + p * kPage, sent.data(), kPage);
        auto r = TakeOutIfSent(s->uffd, page, s->scratch.base, sent.data());
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        ASSERT_TRUE(*r == TakeOut::kDropped || *r == TakeOut::kChanged);
        (*r == TakeOut::kDropped ? dropped : changed)++;
        state[p].store(*r == TakeOut::kDropped ? kRemote : kLocal);
        os::UffdWake(s->uffd, page, kPage);
      }
    }
  }
  MoveRanges* s;
  int stop = -1;
  std::vector<std::atomic<int>> state;
  std::vector<char> remote;
  std::vector<uint64_t> expected;
  std::atomic<bool> done{false};
  std::atomic<size_t> dropped{0}, changed{0};
};

TEST(TakeOutIfSent, NoWriteIsLostWhilePagesAreEvictedUnderAWriter) {
  MoveRanges s(Race::kPages);
  if (std::string why = s.Open(); !why.empty()) GTEST_SKIP() << why;
  Race race(&s);
  auto stop = os::EventFd();
  ASSERT_TRUE(stop.ok());
  race.stop = *stop;
  std::thread handler([&] { race.Handler(); });
  std::thread writer([&] { race.Writer(20000, 300); });
  race.Evictor();
  writer.join();
  size_t wrong = 0;
  for (size_t p = 0; p < Race::kPages; ++p) {  // remote pages fault back in through the handler
    uint64_t sum = 0;
    for (size_t k = 0; k < 8; ++k) sum += *reinterpret_cast<volatile uint64_t*>(s.data.base + p * kPage + k * 512);
    wrong += sum != race.expected[p];
  }
  os::EventFdSignal(race.stop);
  handler.join();
  os::Close(race.stop);
  EXPECT_EQ(wrong, 0u);
  EXPECT_GE(race.dropped + race.changed, 20000u);
  fprintf(stderr, "evictions: %zu dropped, %zu called off by a write after the copy\n", race.dropped.load(),
          race.changed.load());
}

}  // namespace
}  // namespace tiermem
