// The write scan (runtime/tiering/scan_tracker.h): PAGEMAP_SCAN with WP_ASYNC, or soft-dirty.
#include "runtime/tiering/scan_tracker.h"

#include <algorithm>

#include "base/os.h"

namespace tiermem {

namespace {
constexpr size_t kRangesPerCall = 1024;   // written runs per PAGEMAP_SCAN call
constexpr size_t kEntriesPerRead = 4096;  // pagemap entries per read (16 MiB of pages)
}  // namespace

bool ScanTracker::Usable(Mechanism m, const os::TrackingSupport& s, std::string* why) {
  if (m == Mechanism::kSoftDirty) {
    if (!s.soft_dirty.present) *why = s.soft_dirty.why;
    return s.soft_dirty.present;
  }
  if (!s.pagemap_scan.present) *why = s.pagemap_scan.why;
  else if (!s.wp_async.present) *why = s.wp_async.why;
  return s.pagemap_scan.present && s.wp_async.present;
}

StatusOr<ScanTracker::Mechanism> ScanTracker::Choose(const os::TrackingSupport& s) {
  std::string scan_why, dirty_why;
  if (Usable(Mechanism::kPagemapScan, s, &scan_why)) return Mechanism::kPagemapScan;
  if (Usable(Mechanism::kSoftDirty, s, &dirty_why)) return Mechanism::kSoftDirty;
  return NotSupported("no write scan on this kernel: pagemap_scan: " + scan_why + "; soft_dirty: " + dirty_why);
}

ScanTracker::ScanTracker(Mechanism m, int uffd, int pagemap_fd, ScanHost* host)
    : mechanism_(m), uffd_(uffd), pagemap_fd_(pagemap_fd), host_(host) {
  if (m == Mechanism::kPagemapScan) ranges_.resize(kRangesPerCall);
  else entries_.resize(kEntriesPerRead);
}

ScanTracker::~ScanTracker() {
  if (uffd_ >= 0) os::Close(uffd_);
  if (pagemap_fd_ >= 0) os::Close(pagemap_fd_);
}

StatusOr<std::unique_ptr<ScanTracker>> ScanTracker::Open(Mechanism m) {
  const int pm = os::PagemapOpen();
  if (pm < 0) return ErrnoToStatus(-pm, "/proc/self/pagemap (write scan)");
  int uffd = -1;
  if (m == Mechanism::kPagemapScan) {
    StatusOr<os::Uffd> u = os::UffdOpenWpAsync();
    if (!u.ok()) {
      os::Close(pm);
      return u.status();
    }
    uffd = u->fd;
  }
  return std::unique_ptr<ScanTracker>(new ScanTracker(m, uffd, pm));
}

StatusOr<std::unique_ptr<ScanTracker>> ScanTracker::Adopt(ScanHost* host) {
  if (host == nullptr) return InvalidArgument("ScanTracker::Adopt: no ScanHost given");
  const int pm = os::PagemapOpen();
  if (pm < 0) return ErrnoToStatus(-pm, "/proc/self/pagemap (write scan)");
  return std::unique_ptr<ScanTracker>(new ScanTracker(Mechanism::kPagemapScan, -1, pm, host));
}

Status ScanTracker::Track(void* addr, size_t bytes) {
  if (host_ != nullptr) {
    return InvalidArgument("ScanTracker::Track: an adopting tracker cannot protect its host's ranges (Register them)");
  }
  if (mechanism_ == Mechanism::kSoftDirty) {
    // Clean from here on: the whole process is cleared (the only clear the kernel has).
    const int rc = os::ClearSoftDirty();
    return rc == 0 ? Status::Ok() : ErrnoToStatus(-rc, "/proc/self/clear_refs (soft-dirty)");
  }
  TIERMEM_RETURN_IF_ERROR(os::UffdRegisterWpOnly(uffd_, addr, bytes));
  return os::UffdWriteProtect(uffd_, addr, bytes, true);
}

Status ScanTracker::Register(void* addr, size_t bytes) {
  if (mechanism_ == Mechanism::kSoftDirty) return Status::Ok();
  if (host_ != nullptr) return host_->RegisterForScan(addr, bytes);
  return os::UffdRegisterWpOnly(uffd_, addr, bytes);
}

Status ScanTracker::Untrack(void* addr, size_t bytes) {
  if (mechanism_ == Mechanism::kSoftDirty || host_ != nullptr) return Status::Ok();
  return os::UffdUnregister(uffd_, addr, bytes);
}

Status ScanTracker::ScanWritten(const os::Span& span, const WrittenFn& written) {
  char* at = static_cast<char*>(span.addr);
  char* const end = at + span.bytes;
  while (at < end) {
    uintptr_t reached = 0;
    const long n = os::PagemapScanWritten(pagemap_fd_, at, size_t(end - at), ranges_.data(), ranges_.size(),
                                          true, &reached);
    if (n < 0) return ErrnoToStatus(int(-n), "PAGEMAP_SCAN (written pages)");
    for (long i = 0; i < n; ++i) written(ranges_[size_t(i)].start, ranges_[size_t(i)].end);
    at = reinterpret_cast<char*>(reached);
  }
  return Status::Ok();
}

Status ScanTracker::ReadSoftDirty(const os::Span& span, const WrittenFn& written) {
  const size_t page = os::PageSize();
  const uintptr_t base = reinterpret_cast<uintptr_t>(span.addr);
  const size_t pages = span.bytes / page;
  for (size_t i = 0; i < pages; i += entries_.size()) {
    const size_t n = std::min(entries_.size(), pages - i);
    if (!os::ReadPagemap(pagemap_fd_, reinterpret_cast<void*>(base + i * page), n, entries_.data())) {
      return Internal("soft-dirty: /proc/self/pagemap could not be read");
    }
    // Runs of dirty pages, one call each.
    for (size_t k = 0; k < n;) {
      if (!os::PagemapSoftDirty(entries_[k])) {
        ++k;
        continue;
      }
      size_t j = k + 1;
      while (j < n && os::PagemapSoftDirty(entries_[j])) ++j;
      written(base + (i + k) * page, base + (i + j) * page);
      k = j;
    }
  }
  return Status::Ok();
}

StatusOr<size_t> ScanTracker::Scan(const os::Span* spans, size_t n, const WrittenFn& written) {
  size_t pages = 0;
  if (host_ != nullptr) host_->ScanBegins();
  Status failed;
  for (size_t i = 0; i < n && failed.ok(); ++i) {
    failed = mechanism_ == Mechanism::kPagemapScan ? ScanWritten(spans[i], written) : ReadSoftDirty(spans[i], written);
    if (failed.ok()) pages += spans[i].bytes / os::PageSize();
  }
  if (host_ != nullptr) host_->ScanEnds();
  if (!failed.ok()) return failed;
  if (mechanism_ == Mechanism::kSoftDirty) {
    const int rc = os::ClearSoftDirty();
    if (rc != 0) return ErrnoToStatus(-rc, "/proc/self/clear_refs (soft-dirty)");
  }
  return pages;
}

}  // namespace tiermem
