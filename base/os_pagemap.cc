// Write tracking's kernel primitives (base/os_pagemap.h): PAGEMAP_SCAN with re-arming, soft-dirty,
// and the run-time probe of each. The userfaultfd side (UffdOpenWpAsync) is in os_uffd.cc.
#include "base/os_pagemap.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

// UAPI newer than the build host's kernel headers (Linux 6.1): the values are the kernel's ABI
// (include/uapi/linux/fs.h of 6.7).
#ifndef PAGEMAP_SCAN
namespace {
struct page_region {
  uint64_t start, end, categories;
};
struct pm_scan_arg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted,
      category_mask, category_anyof_mask, return_mask;
};
}  // namespace
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#define PM_SCAN_WP_MATCHING (1 << 0)
#define PM_SCAN_CHECK_WPASYNC (1 << 1)
#define PAGE_IS_WRITTEN (1 << 1)
#define PAGE_IS_PRESENT (1 << 3)
#define PAGE_IS_SWAPPED (1 << 4)
#endif

namespace tiermem::os {

namespace {

// Regions of one scan call, at most this many at a time (on the stack: the scan allocates
// nothing); a caller's larger `out` is filled by several calls.
constexpr size_t kScanBatch = 256;

// Pages in every category of `category` and, when `anyof` is not 0, in at least one of `anyof`.
long ScanOnce(int pagemap_fd, uintptr_t start, uintptr_t end, page_region* vec, size_t vec_len,
              uint64_t flags, uint64_t category, uint64_t anyof, uintptr_t* walk_end) {
  pm_scan_arg a{};
  a.size = sizeof a;
  a.flags = flags;
  a.start = start;
  a.end = end;
  a.vec = reinterpret_cast<uintptr_t>(vec);
  a.vec_len = vec_len;
  a.category_mask = category;
  a.category_anyof_mask = anyof;
  a.return_mask = category;
  const long rc = ioctl(pagemap_fd, PAGEMAP_SCAN, &a);
  *walk_end = uintptr_t(a.walk_end);
  return rc < 0 ? -errno : rc;
}

Mechanism Present() { return Mechanism{true, {}}; }
Mechanism Absent(std::string why) { return Mechanism{false, std::move(why)}; }

// PAGEMAP_SCAN of one present page of our own: 1 region back where the ioctl exists.
Mechanism ProbePagemapScan(int pagemap_fd, char* page) {
  page_region r{};
  uintptr_t end = 0;
  const uintptr_t p = reinterpret_cast<uintptr_t>(page);
  const long rc = ScanOnce(pagemap_fd, p, p + PageSize(), &r, 1, 0, PAGE_IS_PRESENT, 0, &end);
  if (rc == 1) return Present();
  if (rc == -ENOTTY || rc == -EINVAL) {
    return Absent("PAGEMAP_SCAN: the kernel has no such pagemap ioctl (Linux 6.7+)");
  }
  return Absent(rc < 0 ? std::string("PAGEMAP_SCAN: ") + strerror(int(-rc))
                       : "PAGEMAP_SCAN: a present page was not reported");
}

Mechanism ProbeSoftDirty(int pagemap_fd, char* page) {
  uint64_t entry = 0;
  if (!ReadPagemap(pagemap_fd, page, 1, &entry)) return Absent("soft-dirty: /proc/self/pagemap unreadable");
  if (!PagemapSoftDirty(entry)) {
    return Absent("soft-dirty: a freshly written page shows no bit 55 in /proc/self/pagemap "
                  "(kernel built without CONFIG_MEM_SOFT_DIRTY)");
  }
  return Present();
}

}  // namespace

TrackingSupport ProbeTracking() {
  TrackingSupport s;
  StatusOr<Uffd> u = UffdOpenWpAsync();
  if (u.ok()) {
    s.wp_async = Present();
    s.uffd_move = u->move ? Present() : Absent("UFFDIO_MOVE: the kernel offers no UFFD_FEATURE_MOVE (Linux 6.8+)");
    close(u->fd);
  } else {
    s.wp_async = Absent(u.status().message());
    s.uffd_move = Absent("UFFDIO_MOVE: " + u.status().message());
  }
  const int pm = PagemapOpen();
  void* m = mmap(nullptr, PageSize(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pm < 0 || m == MAP_FAILED) {
    const std::string why = std::string(pm < 0 ? "/proc/self/pagemap: " : "mmap: ") + strerror(pm < 0 ? -pm : errno);
    s.pagemap_scan = Absent(why);
    s.soft_dirty = Absent(why);
  } else {
    char* page = static_cast<char*>(m);
    page[0] = 1;
    s.pagemap_scan = ProbePagemapScan(pm, page);
    s.soft_dirty = ProbeSoftDirty(pm, page);
  }
  if (m != MAP_FAILED) munmap(m, PageSize());
  if (pm >= 0) close(pm);
  return s;
}

long PagemapScanWritten(int pagemap_fd, void* addr, size_t bytes, WrittenRange* out, size_t max,
                        bool rearm, uintptr_t* walk_end) {
  uintptr_t at = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t end = at + bytes;
  const uint64_t flags = rearm ? (PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC) : 0;
  page_region vec[kScanBatch];
  size_t n = 0;
  while (at < end && n < max) {
    const size_t want = max - n < kScanBatch ? max - n : kScanBatch;
    uintptr_t reached = at;
    // Written pages with contents only: the kernel shows an empty entry (never touched, or
    // dropped) as written too, and a scan that matched it would protect it with a marker. Such a
    // page holds no data, so it is no write sample: reported, each page the heap drops came back
    // as one (heat entries for pages nobody uses, the policy thread's memory counted against the
    // DRAM limit). Left unmatched it stays empty, and the page that fills it later shows written.
    const long rc = ScanOnce(pagemap_fd, at, end, vec, want, flags, PAGE_IS_WRITTEN, PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
                             &reached);
    if (rc < 0) {
      *walk_end = at;
      return rc;
    }
    for (long i = 0; i < rc; ++i) out[n++] = WrittenRange{uintptr_t(vec[i].start), uintptr_t(vec[i].end)};
    // A walk that filled its vector stops there (walk_end); one that did not covered the range.
    at = size_t(rc) < want ? end : reached;
  }
  *walk_end = at;
  return long(n);
}

int ClearSoftDirty() {
  const int fd = ProcSelfFile(ProcSelf::kClearRefs);  // kept open: base/os_fd.cc says why
  return fd < 0 ? fd : WriteAll(fd, "4", 1);
}

}  // namespace tiermem::os
