// The eviction check of the write scan's mode (runtime/paging/evict_check.h).
#include "runtime/paging/evict_check.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "base/os.h"
#include "base/os_pagemap.h"

namespace tiermem {

StatusOr<TakeOut> TakeOutIfSent(int uffd, char* page, char* scratch, const char* sent) {
  const size_t bytes = os::PageSize();
  int out = os::UffdMove(uffd, scratch, page, bytes);
  if (out == -EEXIST && os::Discard(scratch, bytes) == 0) {
    // The scratch page was not empty (UFFDIO_MOVE fills only an empty entry): what is there is
    // no page's bytes any more (a drop below that failed, or a marker), so it is emptied.
    out = os::UffdMove(uffd, scratch, page, bytes);
  }
  if (out == -EBUSY) return TakeOut::kShared;
  if (out == -ENOENT) return TakeOut::kAbsent;
  if (out != 0) return ErrnoToStatus(-out, "UFFDIO_MOVE (taking a page out to evict it)");
  if (memcmp(scratch, sent, bytes) == 0) {
    // Out of the address space, its bytes the server's: dropped, whether or not the scratch page
    // empties now (a failure here is cleared by the next take-out, above). Reported as an error,
    // the caller would keep the page local with nothing at its address.
    (void)os::Discard(scratch, bytes);
    return TakeOut::kDropped;
  }
  // Nobody can have filled the hole meanwhile: a touch there waits on the page's state.
  const int back = os::UffdMove(uffd, page, scratch, bytes);
  if (back != 0) {
    return Internal("UFFDIO_MOVE could not put a written page back (" + std::string(strerror(-back)) +
                    "): its bytes are in the scratch page");
  }
  return TakeOut::kChanged;
}

}  // namespace tiermem
