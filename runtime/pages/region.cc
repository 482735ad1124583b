#include "runtime/pages/region.h"

#include <cstring>
#include <new>

#include "base/os.h"
#include "base/own_memory.h"

namespace tiermem {

Region::~Region() { Release(); }

Status Region::Init(size_t bytes) {
  if (base_ != nullptr) return Internal("Region::Init called twice");
  page_size_ = os::PageSize();
  uint64_t npages = (bytes + page_size_ - 1) / page_size_;
  if (npages == 0 || npages >= kNil) {
    return InvalidArgument("region size must be between one page and 16 TiB");
  }
  // The data starts and ends on a 2 MiB boundary and the metadata never gets huge pages: with
  // transparent huge pages on ("always"), a huge page may not straddle the region's edge, where
  // a fault in a neighbouring mapping (the metadata's last page, say) would bring in the
  // region's first pages on the wrong node before an allocation binds them.
  const uint64_t huge_pages = (kHugePageBytes / page_size_);
  npages = (npages + huge_pages - 1) / huge_pages * huge_pages;
  if (npages >= kNil) return InvalidArgument("region size must be below 16 TiB");
  int err = 0;
  void* base = os::ReserveAligned(npages * page_size_, kHugePageBytes, &err);
  if (base == nullptr) return ErrnoToStatus(-err, "mmap(managed region)");
  const uint64_t quiet_words = ((npages + kChunkPages - 1) / kChunkPages + 63) / 64;
  size_t meta = npages * (sizeof(PageRecord) + sizeof(Link)) + quiet_words * sizeof(uint64_t);
  meta = (meta + page_size_ - 1) / page_size_ * page_size_;
  void* m = os::Reserve(meta, &err);
  if (m == nullptr) {
    (void)os::Unmap(base, npages * page_size_);
    return ErrnoToStatus(-err, "mmap(region metadata)");
  }
  (void)os::NoHugePages(m, meta);  // EINVAL without THP support: nothing to prevent then
  base_ = static_cast<char*>(base);
  npages_ = npages;
  meta_ = m;
  meta_bytes_ = meta;
  // Zeroed anonymous memory is a valid all-free PageRecord array (std::atomic<uint8_t> of 0).
  records_ = static_cast<PageRecord*>(m);
  links_ = reinterpret_cast<Link*>(records_ + npages);
  // After the links (12 bytes each: npages is a multiple of 512, so the words are aligned).
  quiet_ = reinterpret_cast<std::atomic<uint64_t>*>(links_ + npages);
  for (uint32_t& h : heads_) h = kNil;
  free_pages_ = 0;
  high_water_.store(0, std::memory_order_relaxed);
  PushFree(0, npages_);
  // Its resident part is the runtime's own DRAM (own_memory.h), measured: records are written
  // for every page handed out, but a large run's links only at its ends.
  meta_watch_ = WatchRange(m, meta);
  return Status::Ok();
}

void Region::Release() {
  if (base_ == nullptr) return;
  (void)os::Unmap(base_, npages_ * page_size_);
  UnwatchRange(meta_watch_);
  meta_watch_ = -1;
  (void)os::Unmap(meta_, meta_bytes_);
  base_ = nullptr;
  meta_ = nullptr;
  npages_ = 0;
}

int Region::Bucket(uint64_t npages) {
  int b = 63 - __builtin_clzll(npages);
  return b < kBuckets ? b : kBuckets - 1;
}

void Region::SetFreeTags(uint64_t first, uint64_t len) {
  links_[first].tag = static_cast<uint32_t>(len);
  links_[first + len - 1].tag = static_cast<uint32_t>(len);
}

void Region::PushFree(uint64_t first, uint64_t len) {
  SetFreeTags(first, len);
  int b = Bucket(len);
  links_[first].next = heads_[b];
  links_[first].prev = kNil;
  if (heads_[b] != kNil) links_[heads_[b]].prev = static_cast<uint32_t>(first);
  heads_[b] = static_cast<uint32_t>(first);
  free_pages_ += len;
}

void Region::RemoveFree(uint64_t first) {
  uint64_t len = links_[first].tag;
  int b = Bucket(len);
  uint32_t n = links_[first].next, p = links_[first].prev;
  if (p != kNil) {
    links_[p].next = n;
  } else {
    heads_[b] = n;
  }
  if (n != kNil) links_[n].prev = p;
  free_pages_ -= len;
}

uint64_t Region::AllocRun(uint64_t npages, PageState initial) {
  if (npages == 0 || npages >= kNil) return kNoRun;
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t found = kNoRun;
  // In the run's own bucket, first fit; any entry of a higher bucket is large enough.
  for (int b = Bucket(npages); b < kBuckets && found == kNoRun; ++b) {
    for (uint32_t i = heads_[b]; i != kNil; i = links_[i].next) {
      if (links_[i].tag >= npages) {
        found = i;
        break;
      }
    }
  }
  if (found == kNoRun) return kNoRun;
  uint64_t len = links_[found].tag;
  RemoveFree(found);
  if (len > npages) PushFree(found + npages, len - npages);
  links_[found].tag = static_cast<uint32_t>(npages);
  if (found + npages > high_water_.load(std::memory_order_relaxed)) {
    high_water_.store(found + npages, std::memory_order_release);
  }
  for (uint64_t i = found; i < found + npages; ++i) {
    PageRecord& r = records_[i];
    r.flags.store(0, std::memory_order_relaxed);
    r.stamp.store(0, std::memory_order_relaxed);
    r.remote_slot.store(0, std::memory_order_relaxed);
    // No tier counts these bytes until the caller binds the run: a migration working from a
    // stale view that exchanges the tier meanwhile finds kNoTier and moves no bytes.
    r.tier.store(kNoTier, std::memory_order_relaxed);
    r.state.store(static_cast<uint8_t>(initial), std::memory_order_release);
  }
  records_[found].flags.store(kPageRunHead, std::memory_order_release);
  ClearQuiet(found, npages);
  return found;
}

void Region::ClearQuiet(uint64_t first, uint64_t npages) {
  if (npages == 0) return;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (uint64_t c = first / kChunkPages; c <= (first + npages - 1) / kChunkPages; ++c) {
    if (Quiet(c)) UnmarkQuiet(c);
  }
}

bool Region::PageQuiet(uint64_t index) const {
  const PageRecord& r = records_[index];
  const uint8_t st = r.state.load(std::memory_order_acquire);
  if (st == static_cast<uint8_t>(PageState::kFree)) return true;
  // On the remote tier with no copy anywhere: its first touch is a zero fill (a split run's
  // tail, Runtime::Impl::Allocate), which takes the bit back (Pager::ZeroFillRun).
  if (st == static_cast<uint8_t>(PageState::kRemote)) return r.remote_slot.load(std::memory_order_relaxed) == 0;
  return st == static_cast<uint8_t>(PageState::kLocal) && r.tier.load(std::memory_order_relaxed) == kUntouchedTier &&
         (r.flags.load(std::memory_order_relaxed) & kPageHeapFree) == 0;
}

uint64_t Region::RunLength(uint64_t first) const {
  if (first >= npages_) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  const PageRecord& r = records_[first];
  if (r.state.load(std::memory_order_acquire) == static_cast<uint8_t>(PageState::kFree)) return 0;
  if ((r.flags.load(std::memory_order_acquire) & kPageRunHead) == 0) return 0;
  return links_[first].tag;
}

uint64_t Region::RunHeadOf(uint64_t index) const {
  if (index >= npages_) return kNoRun;
  for (uint64_t i = index + 1; i-- > 0;) {
    const PageRecord& r = records_[i];
    if (r.state.load(std::memory_order_acquire) == static_cast<uint8_t>(PageState::kFree)) {
      return kNoRun;
    }
    if (r.flags.load(std::memory_order_acquire) & kPageRunHead) return i;
  }
  return kNoRun;
}

uint64_t Region::DetachRun(uint64_t first) {
  if (first >= npages_) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  PageRecord& head = records_[first];
  if (head.state.load(std::memory_order_acquire) == static_cast<uint8_t>(PageState::kFree) ||
      (head.flags.load(std::memory_order_acquire) & kPageRunHead) == 0) {
    return 0;
  }
  head.flags.fetch_and(static_cast<uint8_t>(~kPageRunHead), std::memory_order_acq_rel);
  return links_[first].tag;
}

void Region::ReleaseRun(uint64_t first, uint64_t len) {
  if (len == 0 || first + len > npages_) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t i = first; i < first + len; ++i) {
    records_[i].state.store(static_cast<uint8_t>(PageState::kFree), std::memory_order_release);
    records_[i].flags.store(0, std::memory_order_relaxed);
    records_[i].remote_slot.store(0, std::memory_order_relaxed);
  }
  uint64_t start = first, total = len;
  // Coalesce with the free run just before (its last page carries its length).
  if (start > 0 &&
      records_[start - 1].state.load(std::memory_order_relaxed) ==
          static_cast<uint8_t>(PageState::kFree)) {
    uint64_t plen = links_[start - 1].tag;
    uint64_t pfirst = start - plen;
    RemoveFree(pfirst);
    start = pfirst;
    total += plen;
  }
  uint64_t after = first + len;
  if (after < npages_ && records_[after].state.load(std::memory_order_relaxed) ==
                             static_cast<uint8_t>(PageState::kFree)) {
    uint64_t nlen = links_[after].tag;
    RemoveFree(after);
    total += nlen;
  }
  PushFree(start, total);
}

uint64_t Region::FreeRun(uint64_t first) {
  uint64_t len = DetachRun(first);
  ReleaseRun(first, len);
  return len;
}

uint64_t Region::free_pages() const {
  std::lock_guard<std::mutex> lock(mu_);
  return free_pages_;
}

uint64_t Region::largest_free_run() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (int b = kBuckets - 1; b >= 0; --b) {
    uint64_t best = 0;
    for (uint32_t i = heads_[b]; i != kNil; i = links_[i].next) best = links_[i].tag > best ? links_[i].tag : best;
    if (best) return best;
  }
  return 0;
}

}  // namespace tiermem
