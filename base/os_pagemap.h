// Write tracking at a scan's cost: the kernel primitives that tell which pages were written since
// they were last armed, without a fault the process has to handle (base/os.h's contract: int and
// long results are 0 / a count, or a negative errno; the probe and the userfaultfd open return
// Status and may allocate, the scan and the soft-dirty calls allocate nothing).
//
// Two mechanisms:
// - PAGEMAP_SCAN (Linux 6.7+) over a range registered for write-protect with a userfaultfd opened
//   with UFFD_FEATURE_WP_ASYNC: a write to a protected page is resolved inside the kernel (the
//   protection is dropped, nobody is told), and one ioctl on /proc/self/pagemap returns the
//   ranges written since and protects them again (PM_SCAN_WP_MATCHING).
// - soft-dirty (CONFIG_MEM_SOFT_DIRTY, which Linux 6.1 distributions build): writing "4" to
//   /proc/self/clear_refs clears the bit of every page of the process, and bit 55 of a page's
//   pagemap entry is set again by its next write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/os.h"
#include "tiermem/status.hpp"

namespace tiermem::os {

// One mechanism as the running kernel has it: present, or absent with the reason.
struct Mechanism {
  bool present = false;
  std::string why;  // empty when present
};

// What the kernel offers for write tracking and for taking a page out atomically.
struct TrackingSupport {
  Mechanism pagemap_scan;  // the PAGEMAP_SCAN ioctl answers on /proc/self/pagemap
  Mechanism wp_async;      // a userfaultfd grants UFFD_FEATURE_WP_ASYNC
  Mechanism uffd_move;     // a userfaultfd grants UFFD_FEATURE_MOVE (UFFDIO_MOVE, 6.8+)
  Mechanism soft_dirty;    // a freshly written page shows bit 55 in its pagemap entry
};
// Probes each mechanism afresh: a userfaultfd opened and closed, one page mapped, written, read
// through pagemap and unmapped. Never writes clear_refs (that would clear the whole process).
TrackingSupport ProbeTracking();

// Opens a userfaultfd (as UffdOpen: close-on-exec, non-blocking, /dev/userfaultfd where the
// system call is refused) negotiating write-protect faults, UFFD_FEATURE_WP_ASYNC and the
// faulting thread's id, and UFFD_FEATURE_MOVE where the kernel offers it (Uffd::move). Every
// write-protect fault on its ranges is then resolved by the kernel: the descriptor reports
// missing faults only. NotSupported (naming the feature) where WP_ASYNC is not offered.
StatusOr<Uffd> UffdOpenWpAsync();
// Registers [addr, addr+bytes) for write-protect only (no missing faults: pages not yet there
// fill with zeros as usual), for a range nobody serves.
Status UffdRegisterWpOnly(int uffd, void* addr, size_t bytes);

// One range of written pages, [start, end), page aligned.
struct WrittenRange {
  uintptr_t start;
  uintptr_t end;
};
// PAGEMAP_SCAN of [addr, addr+bytes) (page aligned) for the pages written since they were last
// write-protected (PAGE_IS_WRITTEN: present or swapped and not write-protected; an empty entry,
// never populated or dropped since, is neither reported nor protected, so the page that fills it
// later shows written). With `rearm`, the same walk write-protects the pages it reports
// (PM_SCAN_WP_MATCHING), so the next scan shows only the writes after this one. The range must
// be registered for write-protect with a WP_ASYNC userfaultfd (PM_SCAN_CHECK_WPASYNC): -EPERM
// otherwise, and nothing is re-armed. Fills at most `max` ranges (adjacent written pages come as
// one range) and stops there: *walk_end gets the address the walk reached (addr+bytes when it
// covered the whole range), to call again from. Returns the number of ranges, or a negative errno
// (-ENOTTY: the kernel has no PAGEMAP_SCAN).
long PagemapScanWritten(int pagemap_fd, void* addr, size_t bytes, WrittenRange* out, size_t max,
                        bool rearm, uintptr_t* walk_end);

// UFFDIO_MOVE (UFFD_FEATURE_MOVE, Linux 6.8+) of [src, src+bytes) to [dst, dst+bytes), both page
// aligned in ranges registered with `uffd`: the pages themselves change place in one step, so
// from then on a touch of src is a missing fault and none of its bytes can change any more.
// Nobody is woken. Errors are returned, never retried, except EAGAIN (the mm changes: retried
// as UffdCopy does): -EEXIST (dst has a page), -ENOENT (src has none), -EBUSY (a page is shared:
// after fork(), or KSM). On a failure part way, *moved (when given) gets the bytes moved.
int UffdMove(int uffd, void* dst, void* src, size_t bytes, size_t* moved = nullptr);
// Whether a pagemap entry's page is write-protected through userfaultfd (bit 57, Linux 5.19+):
// under UFFD_FEATURE_WP_ASYNC, clear once the page was written after it was protected.
inline bool PagemapUffdWp(uint64_t entry) { return ((entry >> 57) & 1) != 0; }
// Whether an entry may stand for no page at all: not present, shown as swapped, and
// write-protected. The write scan's marker in an empty entry (PAGEMAP_SCAN protects those too)
// reads so, as does a protected page out in swap; touching either from a thread that must not
// fault (its fault would wait on itself) is not safe.
inline bool PagemapMaybeMarker(uint64_t entry) { return ((entry >> 62) & 3) == 1 && PagemapUffdWp(entry); }

// Writes "4" to /proc/self/clear_refs: every page of the process loses its soft-dirty bit (each
// page's next write then takes a minor fault, handled in the kernel). 0 or a negative errno.
int ClearSoftDirty();
// Whether a pagemap entry's page was written since the last ClearSoftDirty (bit 55).
inline bool PagemapSoftDirty(uint64_t entry) { return ((entry >> 55) & 1) != 0; }

}  // namespace tiermem::os
