// Soft-eviction sampling (soft_sampler.h): arm, the fault handler's side, collect.
#include "runtime/paging/soft_sampler.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/log.h"
#include "base/os.h"
#include "runtime/pages/page_table.h"
#include "runtime/paging/pager.h"
#include "runtime/paging/pager_internal.h"

namespace tiermem {

using pager_internal::Cas;
using pager_internal::kPage;
using pager_internal::S;

namespace {
constexpr uintptr_t kChunk = uintptr_t{2} << 20;  // registration granularity
}  // namespace

UffdSampler::UffdSampler(Pager* pager) : pager_(pager) {
  int err = 0;
  copies_ = static_cast<char*>(os::Reserve(kMaxArmed * kPage, &err));
  if (copies_ == nullptr) {
    TM_LOG_WARN("tiering: the soft sampler cannot map its %zu MiB of copies: %s", kMaxArmed * kPage >> 20,
                strerror(-err));
    return;
  }
  entries_.reserve(kMaxArmed);
  free_copies_.resize(kMaxArmed);
  for (size_t i = 0; i < kMaxArmed; ++i) free_copies_[i] = static_cast<uint32_t>(kMaxArmed - 1 - i);
  nfree_ = kMaxArmed;
}

UffdSampler::~UffdSampler() {
  DisarmAll();
  if (copies_ != nullptr) os::Unmap(copies_, kMaxArmed * kPage);
}

UffdSampler::Entry* UffdSampler::Find(uintptr_t page) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), page,
                             [](const Entry& e, uintptr_t p) { return e.page < p; });
  return it != entries_.end() && it->page == page ? &*it : nullptr;
}

void UffdSampler::InstallRun(Entry* const* run, size_t n, bool write_protect) {
  char* addr = reinterpret_cast<char*>(run[0]->page);
  Status s = os::UffdCopy(pager_->uffd_, addr, CopyOf(run[0]->copy), n * kPage, write_protect);
  if (!s.ok()) {
    // The pages' bytes are in the copies only; a thread touching one would wait forever or read
    // zeros. Same contract as a lost remote page: say so and end.
    TM_LOG_ERROR("tiering: sampled pages at %p could not be put back from their copies: %s; exiting "
                 "(status %d) rather than hand the program zero pages",
                 static_cast<void*>(addr), s.message().c_str(), kRemoteLostExitCode);
    ExitRemoteLost();
  }
  for (size_t k = 0; k < n; ++k) {
    Entry& e = *run[k];
    PageRecord& rec = e.region->record(e.index);
    rec.flags.fetch_and(uint8_t(~kPageSampled), std::memory_order_relaxed);
    rec.state.store(S(PageState::kLocal), std::memory_order_release);
    FreeCopy(e.copy);
    if (e.state == kArmed) e.state = kGone;
  }
  live_ -= n;
  pager_->Wake(addr, n * kPage);
  // The bytes live on in the page: the copies' memory is returned now (adjacent copies as one
  // range, the ranges in one call: os::DiscardRanges), not at the round's end. Relief releases
  // watched pages by the thousand between two rounds to evict them, and each freed copy beside
  // its page was memory over the DRAM limit. (A fixed array: this runs on the fault handler.)
  os::Span spans[64];
  size_t ns = 0;
  for (size_t k = 0; k < n;) {
    size_t j = k + 1;
    while (j < n && run[j]->copy == run[j - 1]->copy + 1) ++j;
    spans[ns++] = {CopyOf(run[k]->copy), (j - k) * kPage};
    if (ns == 64) {
      (void)os::DiscardRanges(spans, ns);
      ns = 0;
    }
    k = j;
  }
  (void)os::DiscardRanges(spans, ns);
}

void UffdSampler::Install(Entry& e, bool write_protect) {
  Entry* one = &e;
  InstallRun(&one, 1, write_protect);
}

void UffdSampler::Forget(Entry& e) {
  PageRecord& rec = e.region->record(e.index);
  rec.flags.fetch_and(uint8_t(~kPageSampled), std::memory_order_relaxed);
  rec.state.store(S(PageState::kLocal), std::memory_order_release);
  FreeCopy(e.copy);
  (void)os::Discard(CopyOf(e.copy), kPage);  // its memory is returned at once, as in InstallRun
  --live_;
  e.state = kGone;
}

bool UffdSampler::RegisterChunk(Region& region, uintptr_t page) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(region.base());
  const uintptr_t end = base + region.bytes();
  const uintptr_t lo = std::max(base, page & ~(kChunk - 1));  // regions are 2 MiB-aligned
  if (registered_.count(lo)) return true;
  const uintptr_t hi = std::min(end, lo + kChunk);
  if (!pager_->Register(reinterpret_cast<void*>(lo), hi - lo).ok()) return false;
  registered_.insert(lo);
  return true;
}

size_t UffdSampler::Arm(const std::vector<char*>& pages, const ArmFilter& armable) {
  (void)armable;  // pages are claimed below (kLocal -> kInFlight): an evictor's claim excludes it
  // io_mu_ throughout: no eviction, FetchBack, OnDiscard or OnFree of these pages meanwhile.
  // mu_ only to reserve copies and, at the end, to publish and drop at once: the fault handler
  // (which takes mu_ for every sampled fault) never waits for the copying.
  std::lock_guard<std::mutex> io_lock(pager_->io_mu_);
  pager_->DrainWrites();  // no page being written out is armed
  ArmBatch batch;
  if (!Reserve(pages, &batch)) return 0;  // Collect first
  Claim(&batch);
  // Steps 2-5 go chunk by chunk (kArmChunk pages): between its copy and its drop a page is held
  // twice, so arming thousands at once (the watch grows by the faults of a round) put as many
  // pages over the DRAM limit for a moment; a chunk bounds that to 1 MiB.
  size_t armed = 0;
  for (size_t lo = 0; lo < batch.claimed.size(); lo += kArmChunk) {
    const size_t hi = std::min(batch.claimed.size(), lo + kArmChunk);
    ProtectAndProbe(&batch, lo, hi);
    CopyClaimed(&batch, lo, hi);
    armed += Publish(&batch, hi == batch.claimed.size());
  }
  std::lock_guard<std::mutex> lock(mu_);
  while (batch.next_copy < batch.copies.size()) FreeCopy(batch.copies[batch.next_copy++]);  // none claimed at all
  counters_.armed += armed;
  return live_;
}

bool UffdSampler::Reserve(const std::vector<char*>& pages, ArmBatch* b) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (frozen_.load(std::memory_order_relaxed) || in_round_) return false;
    in_round_ = true;
    // New pages, in the caller's order of priority, up to the room left; then by address.
    for (char* p : pages) {
      if (live_ + b->fresh.size() >= kMaxArmed || b->fresh.size() >= nfree_) break;
      if (Find(reinterpret_cast<uintptr_t>(p)) != nullptr) continue;
      b->fresh.push_back(p);
    }
    // Copies in ascending order, so adjacent pages get adjacent copies (mostly: the free ones are
    // all but the carried pages'), and a run is put back with one UFFDIO_COPY.
    std::sort(free_copies_.begin(), free_copies_.begin() + static_cast<long>(nfree_), std::greater<uint32_t>());
    b->copies.resize(b->fresh.size());
    for (uint32_t& c : b->copies) c = free_copies_[--nfree_];
  }
  std::sort(b->fresh.begin(), b->fresh.end());
  b->fresh.erase(std::unique(b->fresh.begin(), b->fresh.end()), b->fresh.end());
  return true;
}

void UffdSampler::Claim(ArmBatch* b) {
  // 1. Claim: kLocal -> kInFlight (no evictor, fetcher or mover takes them now), in registered
  //    chunks. A page that is busy, free, remote or not ours is skipped.
  b->claimed.reserve(b->fresh.size());
  for (char* p : b->fresh) {
    Region* r = pager_->config_.events->RegionOf(p);
    if (r == nullptr || !RegisterChunk(*r, reinterpret_cast<uintptr_t>(p))) continue;
    const uint64_t index = r->PageIndex(p);
    if (!Cas(r->record(index), PageState::kLocal, PageState::kInFlight)) continue;
    b->claimed.push_back({p, r, index});
  }
}

void UffdSampler::ProtectAndProbe(ArmBatch* b, size_t lo, size_t hi) {
  // 2. Write-protect, so the copy is the page as it is dropped (a write meanwhile waits in the
  //    handler, which leaves a claimed page alone, and is woken below to fault on the copy).
  // 3. Which have contents? A never-touched page has nothing to keep: not sampled.
  //    Runs of adjacent claimed pages of one region: one system call each.
  const std::vector<Claimed>& claimed = b->claimed;
  b->ok.assign(hi - lo, 1);
  b->pm.assign(hi - lo, 0);
  for (size_t i = lo; i < hi;) {
    size_t j = i + 1;
    while (j < hi && claimed[j].region == claimed[i].region && claimed[j].addr == claimed[j - 1].addr + kPage) ++j;
    bool good = os::UffdWriteProtect(pager_->uffd_, claimed[i].addr, (j - i) * kPage, true).ok();
    good = good && os::ReadPagemap(pager_->pagemap_fd_, claimed[i].addr, j - i, b->pm.data() + (i - lo));
    for (size_t k = i; k < j; ++k) b->ok[k - lo] = good && os::PagemapPopulated(b->pm[k - lo]);
    i = j;
  }
}

void UffdSampler::CopyClaimed(ArmBatch* b, size_t lo, size_t hi) {
  // 4. Copy.
  b->added.clear();
  for (size_t k = lo; k < hi; ++k) {
    const Claimed& c = b->claimed[k];
    PageRecord& rec = c.region->record(c.index);
    if (!b->ok[k - lo]) {
      // Left as it was: write-protection of a clean page stays (it was there), of a dirty one
      // is lifted, and waiters retry.
      if (!(rec.flags.load(std::memory_order_relaxed) & kPageRemoteClean)) {
        (void)os::UffdWriteProtect(pager_->uffd_, c.addr, kPage, false);
      }
      rec.state.store(S(PageState::kLocal), std::memory_order_release);
      pager_->Wake(c.addr, kPage);
      continue;
    }
    const uint32_t copy = b->copies[b->next_copy++];
    memcpy(CopyOf(copy), c.addr, kPage);
    const bool clean = (rec.flags.load(std::memory_order_relaxed) & kPageRemoteClean) != 0;
    b->added.push_back({reinterpret_cast<uintptr_t>(c.addr), c.region, c.index, copy, kArmed, clean});
  }
}

size_t UffdSampler::Publish(ArmBatch* b, bool last) {
  // 5. Publish, flag and drop together, then wake the writers that waited.
  std::lock_guard<std::mutex> lock(mu_);
  if (last) {
    while (b->next_copy < b->copies.size()) FreeCopy(b->copies[b->next_copy++]);  // not needed after all
  }
  const std::vector<Entry>& added = b->added;
  for (const Entry& e : added) e.region->record(e.index).flags.fetch_or(kPageSampled, std::memory_order_relaxed);
  const size_t before = entries_.size();
  entries_.insert(entries_.end(), added.begin(), added.end());
  std::inplace_merge(entries_.begin(), entries_.begin() + static_cast<long>(before), entries_.end(),
                     [](const Entry& x, const Entry& y) { return x.page < y.page; });
  live_ += added.size();
  // The runs dropped in one call where the kernel can (one TLB flush for the chunk instead of
  // one per run: os::DiscardRanges), then their waiters woken.
  std::vector<os::Span>& spans = b->spans;
  spans.clear();
  for (size_t i = 0; i < added.size();) {
    size_t j = i + 1;
    while (j < added.size() && added[j].page == added[j - 1].page + kPage) ++j;
    spans.push_back({reinterpret_cast<void*>(added[i].page), (j - i) * kPage});
    i = j;
  }
  (void)os::DiscardRanges(spans.data(), spans.size());
  for (const os::Span& s : spans) pager_->Wake(s.addr, s.bytes);
  return added.size();
}

bool UffdSampler::OnMissing(Region& region, uint64_t index, bool write) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry* e = Find(reinterpret_cast<uintptr_t>(region.PageAddress(index)));
  if (e == nullptr || e->state != kArmed) return false;
  PageRecord& rec = region.record(index);
  // A clean page (its server copy current) read: installed write-protected, still clean. Written:
  // installed writable, and the server copy is stale from now on.
  if (e->clean && write) rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
  rec.flags.fetch_and(uint8_t(~kPageAhead), std::memory_order_relaxed);  // an access, not a prefetch
  e->state = write ? kWritten : kRead;
  Install(*e, e->clean && !write);
  ++counters_.touched;
  return true;
}

void UffdSampler::Collect(uint64_t now_ns, std::vector<AccessSample>* out, std::vector<uint64_t>* untouched,
                          const std::function<bool(uint64_t)>& keep) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t w = 0;
  std::vector<Entry*> back;  // untouched, not kept: put back (runs of adjacent pages and copies)
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    const uint64_t key = e.page / kPage;
    if (e.state == kRead || e.state == kWritten) {
      out->push_back({key, e.state == kWritten, now_ns});
      continue;
    }
    if (e.state != kArmed) continue;
    if (untouched != nullptr) untouched->push_back(key);
    if (keep && keep(key)) continue;
    back.push_back(&e);
  }
  for (size_t i = 0; i < back.size();) {
    size_t j = i + 1;
    while (j < back.size() && back[j]->page == back[j - 1]->page + kPage && back[j]->copy == back[j - 1]->copy + 1 &&
           back[j]->clean == back[i]->clean && back[j]->region == back[i]->region) {
      ++j;
    }
    InstallRun(back.data() + i, j - i, back[i]->clean);
    i = j;
  }
  for (Entry& e : entries_) {
    if (e.state == kArmed) entries_[w++] = e;  // carried: stays dropped, its copy kept
  }
  entries_.resize(w);
  in_round_ = false;
  ++counters_.rounds;
  SortFreeCopies();
}

void UffdSampler::SortFreeCopies() {
  std::sort(free_copies_.begin(), free_copies_.begin() + static_cast<long>(nfree_), std::greater<uint32_t>());
}

size_t UffdSampler::carried() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_round_ ? 0 : live_;
}

void UffdSampler::Release(const void* addr, size_t len) {
  std::lock_guard<std::mutex> lock(mu_);
  if (live_ == 0) return;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(addr) & ~(kPage - 1);
  const uintptr_t hi = reinterpret_cast<uintptr_t>(addr) + len;
  auto it = std::lower_bound(entries_.begin(), entries_.end(), lo,
                             [](const Entry& e, uintptr_t p) { return e.page < p; });
  for (; it != entries_.end() && it->page < hi; ++it) {
    if (it->state != kArmed) continue;
    Install(*it, it->clean);
  }
}

void UffdSampler::Drop(const void* addr, size_t len, bool unregistered) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const uintptr_t lo = reinterpret_cast<uintptr_t>(addr) & ~(kPage - 1);
    const uintptr_t hi = reinterpret_cast<uintptr_t>(addr) + len;
    auto it = std::lower_bound(entries_.begin(), entries_.end(), lo,
                               [](const Entry& e, uintptr_t p) { return e.page < p; });
    for (; live_ > 0 && it != entries_.end() && it->page < hi; ++it) {
      if (it->state == kArmed) Forget(*it);
    }
  }
  if (!unregistered || registered_.empty()) return;
  // io_mu_ held (OnFree): the chunks overlapping the range are registered again when next used.
  const uintptr_t lo = reinterpret_cast<uintptr_t>(addr) & ~(kChunk - 1);
  const uintptr_t hi = reinterpret_cast<uintptr_t>(addr) + len;
  for (uintptr_t c = lo; c < hi; c += kChunk) registered_.erase(c);
}

void UffdSampler::DisarmAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : entries_) {
    if (e.state != kArmed) continue;
    Install(e, e.clean);
  }
  entries_.clear();
  in_round_ = false;
  SortFreeCopies();
}

void UffdSampler::Freeze() {
  frozen_.store(true, std::memory_order_release);
  DisarmAll();
}

void UffdSampler::Thaw() { frozen_.store(false, std::memory_order_release); }

AccessSampler::Counters UffdSampler::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

}  // namespace tiermem
