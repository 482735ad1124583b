// Write tracking's kernel primitives (base/os_pagemap.h): the pages written since the range was
// armed are reported, exactly those, and re-armed by the scan; a scan cut short by its output's
// size goes on from where it stopped; soft-dirty shows exactly the pages written after a clear.
// UFFDIO_MOVE takes a page out whole and puts it back, and refuses a page shared with a forked
// child. Each test skips, naming the reason the probe gives, where the kernel lacks the mechanism.
#include "base/os_pagemap.h"
#include "tests/unit/test_mapping.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <vector>

namespace tiermem {
namespace {

constexpr size_t kPage = TestMapping::kPage;

struct Mapping : TestMapping {
  explicit Mapping(size_t pages) : TestMapping(pages, 0x5a) {}
  size_t Index(uintptr_t a) const { return (a - reinterpret_cast<uintptr_t>(base)) / kPage; }
};

// A mapping armed for write tracking: registered with a WP_ASYNC userfaultfd, all protected.
struct Armed {
  explicit Armed(size_t pages) : m(pages) {}
  ~Armed() {
    if (uffd >= 0) close(uffd);
    if (pm >= 0) close(pm);
  }
  // Skips (through the caller's GTEST_SKIP) when the kernel lacks a mechanism: the reason.
  std::string Unsupported() const {
    const os::TrackingSupport s = os::ProbeTracking();
    if (!s.pagemap_scan.present) return s.pagemap_scan.why;
    if (!s.wp_async.present) return s.wp_async.why;
    return {};
  }
  void Arm() {
    ASSERT_NE(m.base, nullptr);
    StatusOr<os::Uffd> u = os::UffdOpenWpAsync();
    ASSERT_TRUE(u.ok()) << u.status().message();
    uffd = u->fd;
    ASSERT_TRUE(os::UffdRegisterWpOnly(uffd, m.base, m.bytes).ok());
    ASSERT_TRUE(os::UffdWriteProtect(uffd, m.base, m.bytes, true).ok());
    pm = os::PagemapOpen();
    ASSERT_GE(pm, 0);
  }
  // The pages written, from scans of at most `max` ranges each, until the range is covered.
  std::set<size_t> Written(bool rearm, size_t max = 4096) {
    std::set<size_t> pages;
    std::vector<os::WrittenRange> out(max);
    char* at = m.base;
    while (at < m.base + m.bytes) {
      uintptr_t end = 0;
      const long n = os::PagemapScanWritten(pm, at, size_t(m.base + m.bytes - at), out.data(), max, rearm, &end);
      EXPECT_GE(n, 0) << strerror(int(-n));
      if (n < 0) break;
      for (long i = 0; i < n; ++i) {
        for (uintptr_t a = out[i].start; a < out[i].end; a += kPage) pages.insert(m.Index(a));
      }
      EXPECT_GT(end, reinterpret_cast<uintptr_t>(at));  // every call makes progress
      at = reinterpret_cast<char*>(end);
    }
    return pages;
  }
  Mapping m;
  int uffd = -1;
  int pm = -1;
};

TEST(TrackingProbe, EachMechanismIsPresentOrSaysWhyNot) {
  const os::TrackingSupport s = os::ProbeTracking();
  for (const os::Mechanism* m : {&s.pagemap_scan, &s.wp_async, &s.uffd_move, &s.soft_dirty}) {
    EXPECT_EQ(m->present, m->why.empty()) << m->why;
  }
  // MOVE is asked for only on a descriptor that has WP_ASYNC: absent with it.
  if (!s.wp_async.present) {
    EXPECT_FALSE(s.uffd_move.present);
  }
}

TEST(PagemapScan, ReportsExactlyThePagesWrittenAndRearmsThem) {
  Armed a(512);
  if (std::string why = a.Unsupported(); !why.empty()) GTEST_SKIP() << why;
  a.Arm();
  EXPECT_TRUE(a.Written(true).empty());  // armed: nothing written yet
  for (size_t p : {3, 4, 5, 100, 511}) a.m.base[p * kPage + 7] = char(p);
  EXPECT_EQ(a.Written(true), (std::set<size_t>{3, 4, 5, 100, 511}));
  EXPECT_TRUE(a.Written(true).empty());  // the scan re-armed them
  a.m.base[4 * kPage] = 1;
  a.m.base[200 * kPage + 100] = 2;
  EXPECT_EQ(a.Written(true), (std::set<size_t>{4, 200}));
  // The writes went through (resolved in the kernel), and reads never count.
  EXPECT_EQ(a.m.base[100 * kPage + 7], char(100));
  volatile char sink = 0;
  for (size_t p = 0; p < 512; ++p) sink = sink + a.m.base[p * kPage];
  EXPECT_TRUE(a.Written(true).empty());
}

TEST(PagemapScan, WithoutRearmTheSamePagesStayWritten) {
  Armed a(64);
  if (std::string why = a.Unsupported(); !why.empty()) GTEST_SKIP() << why;
  a.Arm();
  a.m.base[10 * kPage] = 1;
  EXPECT_EQ(a.Written(false), (std::set<size_t>{10}));
  EXPECT_EQ(a.Written(false), (std::set<size_t>{10}));
  EXPECT_EQ(a.Written(true), (std::set<size_t>{10}));
  EXPECT_TRUE(a.Written(false).empty());
}

// 300 separate ranges read 7 at a time: each call stops where its output filled, the next goes
// on from there, and only what was reported is re-armed.
TEST(PagemapScan, AShortOutputStopsAndTheNextCallGoesOn) {
  Armed a(600);
  if (std::string why = a.Unsupported(); !why.empty()) GTEST_SKIP() << why;
  a.Arm();
  std::set<size_t> wrote;
  for (size_t p = 0; p < 600; p += 2) {
    a.m.base[p * kPage] = 3;
    wrote.insert(p);
  }
  EXPECT_EQ(a.Written(true, 7), wrote);
  EXPECT_TRUE(a.Written(true).empty());
}

// A page dropped (MADV_DONTNEED) holds no data: it is not reported (the kernel shows its empty
// entry as written; the scan asks for pages with contents), and the scan leaves no marker in its
// entry. Written again, it is reported once, like any page.
TEST(PagemapScan, ADroppedPageIsNotReportedUntilWrittenAgain) {
  Armed a(16);
  if (std::string why = a.Unsupported(); !why.empty()) GTEST_SKIP() << why;
  a.Arm();
  ASSERT_EQ(os::Discard(a.m.base + 5 * kPage, kPage), 0);
  EXPECT_TRUE(a.Written(true).empty());
  uint64_t entry = 0;
  ASSERT_TRUE(os::ReadPagemap(a.pm, a.m.base + 5 * kPage, 1, &entry));
  EXPECT_FALSE(os::PagemapMaybeMarker(entry));  // empty, not protected
  a.m.base[5 * kPage] = 9;
  EXPECT_EQ(a.Written(true), (std::set<size_t>{5}));
  EXPECT_TRUE(a.Written(true).empty());
  EXPECT_EQ(a.m.base[5 * kPage], 9);
}

TEST(PagemapScan, ARangeWithoutAsyncWriteProtectIsRefused) {
  if (!os::ProbeTracking().pagemap_scan.present) GTEST_SKIP() << os::ProbeTracking().pagemap_scan.why;
  Mapping m(8);
  ASSERT_NE(m.base, nullptr);
  const int pm = os::PagemapOpen();
  ASSERT_GE(pm, 0);
  os::WrittenRange out[8];
  uintptr_t end = 0;
  EXPECT_EQ(os::PagemapScanWritten(pm, m.base, m.bytes, out, 8, true, &end), -EPERM);
  close(pm);
}

TEST(SoftDirty, ShowsExactlyThePagesWrittenAfterAClear) {
  const os::TrackingSupport s = os::ProbeTracking();
  if (!s.soft_dirty.present) GTEST_SKIP() << s.soft_dirty.why;
  Mapping m(256);
  ASSERT_NE(m.base, nullptr);
  ASSERT_EQ(os::ClearSoftDirty(), 0);
  const std::set<size_t> wrote{0, 17, 18, 255};
  for (size_t p : wrote) m.base[p * kPage + 1] = 1;
  const int pm = os::PagemapOpen();
  ASSERT_GE(pm, 0);
  std::vector<uint64_t> e(256);
  ASSERT_TRUE(os::ReadPagemap(pm, m.base, 256, e.data()));
  std::set<size_t> dirty;
  for (size_t p = 0; p < 256; ++p) {
    if (os::PagemapSoftDirty(e[p])) dirty.insert(p);
  }
  EXPECT_EQ(dirty, wrote);
  close(pm);
}


// A range of data pages and a scratch range, both registered with one WP_ASYNC userfaultfd that
// has UFFDIO_MOVE (missing faults too: nobody serves them, so the test never touches a page that
// is not there).
struct MovePair {
  MovePair() : data(8, 0x11), scratch(8, 0) {}
  ~MovePair() {
    if (uffd >= 0) close(uffd);
    if (pm >= 0) close(pm);
  }
  void Open() {
    ASSERT_NE(data.base, nullptr);
    ASSERT_NE(scratch.base, nullptr);
    ASSERT_EQ(os::Discard(scratch.base, scratch.bytes), 0);  // empty: somewhere to move to
    StatusOr<os::Uffd> u = os::UffdOpenWpAsync();
    ASSERT_TRUE(u.ok()) << u.status().message();
    ASSERT_TRUE(u->move);
    uffd = u->fd;
    ASSERT_TRUE(os::UffdRegister(uffd, data.base, data.bytes, true).ok());
    ASSERT_TRUE(os::UffdRegister(uffd, scratch.base, scratch.bytes, true).ok());
    pm = os::PagemapOpen();
    ASSERT_GE(pm, 0);
  }
  uint64_t Entry(const char* p) const {
    uint64_t e = 0;
    EXPECT_TRUE(os::ReadPagemap(pm, p, 1, &e));
    return e;
  }
  TestMapping data, scratch;
  int uffd = -1;
  int pm = -1;
};

// The eviction check of the scan mode, in the kernel's terms: a page protected and left alone
// keeps its protection; a write clears it (resolved in the kernel); the page moves out whole and
// leaves a hole (a later touch would be a missing fault), and moves back with its bytes.
TEST(UffdMove, APageMovesOutWholeAndBackAndItsProtectionShowsAWrite) {
  const os::TrackingSupport s = os::ProbeTracking();
  if (!s.uffd_move.present) GTEST_SKIP() << s.uffd_move.why;
  MovePair p;
  p.Open();
  char* page = p.data.base + 2 * kPage;
  char* spare = p.scratch.base + 2 * kPage;
  ASSERT_TRUE(os::UffdWriteProtect(p.uffd, p.data.base, p.data.bytes, true).ok());
  EXPECT_TRUE(os::PagemapUffdWp(p.Entry(page)));
  page[5] = 0x22;  // async: goes through, and the protection is gone
  EXPECT_FALSE(os::PagemapUffdWp(p.Entry(page)));
  EXPECT_TRUE(os::PagemapUffdWp(p.Entry(page + kPage)));
  size_t moved = 0;
  ASSERT_EQ(os::UffdMove(p.uffd, spare, page, kPage, &moved), 0);
  EXPECT_EQ(moved, kPage);
  EXPECT_FALSE(os::PagemapPopulated(p.Entry(page)));
  EXPECT_EQ(spare[5], 0x22);
  EXPECT_EQ(spare[6], 0x11);
  EXPECT_EQ(os::UffdMove(p.uffd, spare, page + kPage, kPage), -EEXIST);  // spare is taken
  EXPECT_EQ(os::UffdMove(p.uffd, spare + kPage, page, kPage), -ENOENT);  // page is gone
  ASSERT_EQ(os::UffdMove(p.uffd, page, spare, kPage), 0);
  EXPECT_EQ(page[5], 0x22);
  EXPECT_FALSE(os::PagemapPopulated(p.Entry(spare)));
}

// After fork() the pages are shared with the child (copy-on-write): such a page cannot be moved,
// and says so (-EBUSY) without moving anything, until this process writes it again.
TEST(UffdMove, APageSharedWithAForkedChildIsRefused) {
  const os::TrackingSupport s = os::ProbeTracking();
  if (!s.uffd_move.present) GTEST_SKIP() << s.uffd_move.why;
  MovePair p;
  p.Open();
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // holds the shared pages until the parent closes the gate
    char c;
    close(gate[1]);
    (void)!read(gate[0], &c, 1);
    _exit(0);
  }
  close(gate[0]);
  size_t moved = 1;
  EXPECT_EQ(os::UffdMove(p.uffd, p.scratch.base, p.data.base, kPage, &moved), -EBUSY);
  EXPECT_EQ(moved, 0u);
  EXPECT_TRUE(os::PagemapPopulated(p.Entry(p.data.base)));
  close(gate[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  // The child is gone, but the page is still marked shared until this process writes it (the
  // write takes it back as its own): refused until then.
  EXPECT_EQ(os::UffdMove(p.uffd, p.scratch.base, p.data.base, kPage), -EBUSY);
  p.data.base[0] = 0x33;
  EXPECT_EQ(os::UffdMove(p.uffd, p.scratch.base, p.data.base, kPage), 0);
  EXPECT_EQ(p.scratch.base[0], 0x33);
}

}  // namespace
}  // namespace tiermem
