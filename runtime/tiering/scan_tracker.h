// The write scan: which pages of some ranges were written since the last scan, read for the price
// of a page-table walk instead of a fault per page (base/os_pagemap.h has the kernel's side).
//
// Mechanisms, the first the kernel has (ScanTracker::Choose):
// - pagemap_scan: the ranges are registered for write-protect with a userfaultfd opened with
//   UFFD_FEATURE_WP_ASYNC and protected once; the first write to a page after that is resolved
//   in the kernel (no signal, no thread), and a scan reports the written pages and protects them
//   again in the same walk. Pages scanned are re-armed one by one, so a window may move across
//   the ranges round after round.
// - soft_dirty: each scan reads bit 55 of the pagemap entries, then clears the bit of every page
//   of the process (/proc/self/clear_refs takes no range): a scan must cover every range whose
//   writes matter, each round, and a write that lands between the read and the clear is lost
//   (the kernel has no read-and-clear for it). Any other user of soft-dirty in the process
//   (CRIU) is disturbed.
// Neither sees reads: the caller samples reads where the write scan leaves a question.
//
// Adopted ranges (ScanTracker::Adopt): where another part of the process serves the ranges'
// missing faults through a userfaultfd of its own (the remote tier's pager), a range takes one
// descriptor, so the tracker registers and scans through that owner's descriptor (opened with
// WP_ASYNC: PAGEMAP_SCAN needs no descriptor, only the range registered on an asynchronous one),
// and tells it when each scan runs (ScanHost).
//
// Thread safety: one thread at a time (the policy thread). Track and Scan fail cleanly on ranges
// that were unmapped meanwhile; what was reported stays reported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/os_pagemap.h"
#include "tiermem/status.hpp"

namespace tiermem {

// The owner of the ranges an adopting tracker scans (the remote tier's pager in write-scan mode).
class ScanHost {
 public:
  virtual ~ScanHost() = default;
  // Registers [addr, addr+bytes) for write-protect (and whatever else the owner needs) on its
  // WP_ASYNC descriptor; pages count as written until their first scan protects them.
  virtual Status RegisterForScan(void* addr, size_t bytes) = 0;
  // Each Scan call is bracketed by these, the `written` callbacks included: a scan protects the
  // written pages again before the callback hears of them.
  virtual void ScanBegins() = 0;
  virtual void ScanEnds() = 0;
};

class ScanTracker {
 public:
  enum class Mechanism { kPagemapScan, kSoftDirty };
  static const char* Name(Mechanism m) { return m == Mechanism::kPagemapScan ? "pagemap_scan" : "soft_dirty"; }
  // Whether `m` works on this kernel (as `support` found it); false with the reason in *why.
  static bool Usable(Mechanism m, const os::TrackingSupport& support, std::string* why);
  // The first usable mechanism; NotSupported giving every reason when none is.
  static StatusOr<Mechanism> Choose(const os::TrackingSupport& support);

  // A tracker of its own (pagemap_scan: a WP_ASYNC userfaultfd of its own, closed with it).
  static StatusOr<std::unique_ptr<ScanTracker>> Open(Mechanism m);
  // A pagemap_scan tracker over `host`'s ranges (no descriptor of its own; `host` outlives it).
  // Register goes to the host; Track is refused (it would protect through a descriptor the
  // tracker does not hold); Untrack leaves the host's registration as it is.
  static StatusOr<std::unique_ptr<ScanTracker>> Adopt(ScanHost* host);
  ~ScanTracker();
  ScanTracker(const ScanTracker&) = delete;
  ScanTracker& operator=(const ScanTracker&) = delete;

  Mechanism mechanism() const { return mechanism_; }
  // Starts watching [addr, addr+bytes) (page aligned, mapped private anonymous): every page
  // counts as clean from here on. pagemap_scan registers the range for write-protect (missing
  // faults stay with whoever has them: nobody here) and protects it.
  Status Track(void* addr, size_t bytes);
  // Starts watching [addr, addr+bytes) without protecting it: every page resident now counts as
  // written until its first scan (which protects it). For a large, mostly unpopulated range: the
  // kernel's write-protect of a range costs by its length (64 GiB: about 0.3 s here, the address
  // space's lock held), a scan by the pages it finds. soft_dirty: nothing to do (a page faulted in
  // is soft-dirty already).
  Status Register(void* addr, size_t bytes);
  // Stops watching (unregisters; the range's pages become plain writable pages again).
  Status Untrack(void* addr, size_t bytes);

  // Called with each run of written pages, [start, end) page aligned.
  using WrittenFn = std::function<void(uintptr_t start, uintptr_t end)>;
  // One round over `n` spans (each inside tracked ranges): reports the pages written since the
  // previous scan of them and re-arms them. Returns the number of pages scanned, or the first
  // failure (spans after it are not scanned).
  StatusOr<size_t> Scan(const os::Span* spans, size_t n, const WrittenFn& written);

 private:
  ScanTracker(Mechanism m, int uffd, int pagemap_fd, ScanHost* host = nullptr);
  Status ScanWritten(const os::Span& span, const WrittenFn& written);
  Status ReadSoftDirty(const os::Span& span, const WrittenFn& written);

  Mechanism mechanism_;
  int uffd_ = -1;
  int pagemap_fd_ = -1;
  ScanHost* host_ = nullptr;  // Adopt: the ranges' owner
  std::vector<os::WrittenRange> ranges_;  // one scan call's output
  std::vector<uint64_t> entries_;         // one pagemap read (soft-dirty)
};

}  // namespace tiermem
