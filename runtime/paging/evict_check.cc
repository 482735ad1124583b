// The eviction check of the write scan's mode (runtime/paging/evict_check.h).
#include "runtime/paging/evict_check.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "base/os.h"
#include "base/os_pagemap.h"

namespace tiermem {

namespace {

// Where one page is after a UFFDIO_MOVE of it from `src` to `dst` that reported `rc`: 0 when it
// is at `dst` (moved), else `rc`. The kernel can report a failure for a move it made: a page out
// in swap was seen moved into the scratch page while the call said EEXIST (its own second look
// found the destination it had just filled). Taken for "not moved", that page's bytes were
// emptied with the scratch page and the page dropped with the older copy on the server, writes
// lost. So a failure is judged by the page tables, which only the caller changes for these two
// pages (the page is claimed: a touch waits; a write or a swap-out keeps it populated). Where
// the pagemap cannot be read, `rc` stands.
int MoveOutcome(int pagemap_fd, char* dst, char* src, int rc) {
  uint64_t at_src = 0, at_dst = 0;
  if (rc == 0 || !os::ReadPagemap(pagemap_fd, src, 1, &at_src) || !os::ReadPagemap(pagemap_fd, dst, 1, &at_dst)) {
    return rc;
  }
  return !os::PagemapPopulated(at_src) && os::PagemapPopulated(at_dst) ? 0 : rc;
}

}  // namespace

StatusOr<TakeOut> TakeOutIfSent(int uffd, int pagemap_fd, char* page, char* scratch, const char* sent) {
  const size_t bytes = os::PageSize();
  // Anything left in the scratch page is no page's bytes: every take-out below empties it, or
  // puts the page back, or (Internal) leaves the page's bytes for the caller to install again
  // and empty it. Left by a drop whose discard failed, it is emptied here, before the move
  // (UFFDIO_MOVE fills only an empty entry), never after a failed move: the page may be there.
  uint64_t at = 0;
  if (os::ReadPagemap(pagemap_fd, scratch, 1, &at) && os::PagemapPopulated(at)) {
    if (const int rc = os::Discard(scratch, bytes); rc != 0) {
      return ErrnoToStatus(-rc, "emptying the eviction check's scratch page");
    }
  }
  const int out = MoveOutcome(pagemap_fd, scratch, page, os::UffdMove(uffd, scratch, page, bytes));
  if (out == -EBUSY) return TakeOut::kShared;
  if (out == -ENOENT) return TakeOut::kAbsent;
  if (out != 0) return ErrnoToStatus(-out, "UFFDIO_MOVE (taking a page out to evict it)");
  if (memcmp(scratch, sent, bytes) == 0) {
    // Out of the address space, its bytes the server's: dropped, whether or not the scratch page
    // empties now (what a failure leaves is emptied by the next take-out, above). Reported as an
    // error, the caller would keep the page local with nothing at its address.
    (void)os::Discard(scratch, bytes);
    return TakeOut::kDropped;
  }
  // Nobody can have filled the hole meanwhile: a touch there waits on the page's state.
  const int back = MoveOutcome(pagemap_fd, page, scratch, os::UffdMove(uffd, page, scratch, bytes));
  if (back != 0) {
    return Internal("UFFDIO_MOVE could not put a written page back (" + std::string(strerror(-back)) +
                    "): its bytes are in the scratch page");
  }
  return TakeOut::kChanged;
}

}  // namespace tiermem
