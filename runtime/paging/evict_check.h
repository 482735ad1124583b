// The last step of an eviction when write faults are not reported (a userfaultfd opened with
// UFFD_FEATURE_WP_ASYNC, which the write scan needs: runtime/tiering/scan_tracker.h): a write
// during the send is resolved in the kernel and nobody is told, so write-protecting the page
// before the send no longer keeps its bytes still. Instead the page is copied, the copy is sent,
// and then the page is taken out of the address space in one step (UFFDIO_MOVE into a scratch
// page registered with the same userfaultfd) and compared with the copy:
// - the same: nothing was written after the copy; the page is dropped (what the server holds is
//   its contents);
// - different: a write landed between the copy and the move; the page is moved back, bytes and
//   all, and stays local (its eviction is called off, as a write fault calls it off today).
// While the page is out, a touch is a missing fault: the pager's handler must make it wait on
// the page's state (kInFlight) until the caller has decided, then the caller wakes it.
//
// The UFFDIO_MOVE keeps no write-protect bit (measured on 6.18: the moved page arrives
// unprotected), so the bytes, not the bit, decide. A page shared with a forked child (copy on
// write) cannot be moved (EBUSY) until this process writes it again.
//
// Thread safety: one caller per page and per scratch page at a time; any thread may write the
// page meanwhile.
#pragma once

#include "tiermem/status.hpp"

namespace tiermem {

enum class TakeOut {
  kDropped,  // taken out, unchanged since the copy: gone from the process
  kChanged,  // written after the copy: put back where it was, its bytes kept
  kShared,   // shared with a forked child (EBUSY): left where it is, untouched
  kAbsent,   // no page there (ENOENT): nothing to take out
};

// Takes `page` out into `scratch` (a page-aligned page of a range registered with `uffd`, empty:
// it is empty again on return; one left holding anything is emptied first) and compares it with
// `sent` (the bytes that were sent, one page). `pagemap_fd` (/proc/self/pagemap) tells where the
// page is after a move that reported a failure: the kernel has reported EEXIST for a page out in
// swap that it had moved.
// Wakes nobody: the caller publishes the page's new state first, then wakes the page's waiters.
// An error other than the ones above is returned as it is, the page left in place or put back
// (Internal when it could be neither: the page's bytes are then in `scratch`).
StatusOr<TakeOut> TakeOutIfSent(int uffd, int pagemap_fd, char* page, char* scratch, const char* sent);

}  // namespace tiermem
