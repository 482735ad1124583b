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
  const int out = os::UffdMove(uffd, scratch, page, bytes);
  if (out == -EBUSY) return TakeOut::kShared;
  if (out == -ENOENT) return TakeOut::kAbsent;
  if (out != 0) return ErrnoToStatus(-out, "UFFDIO_MOVE (taking a page out to evict it)");
  if (memcmp(scratch, sent, bytes) == 0) {
    const int rc = os::Discard(scratch, bytes);
    if (rc != 0) return ErrnoToStatus(-rc, "dropping an evicted page's scratch copy");
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
