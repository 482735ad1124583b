// Runtime::Impl's page placement: range checks, per-tier accounting (Retag), Migrate,
// MigrateToNode, the evictions to the remote tier and Locate. Split from runtime.cc, which keeps
// start, stop, allocation and the public wrappers.
#include <algorithm>
#include <functional>
#include <string>

#include "base/log.h"
#include "runtime/tiering/migrator.h"
#include "base/os.h"
#include "runtime/core/runtime_impl.h"

namespace tiermem {

using internal::Hex;

// Pages the access sampler armed are PROT_NONE until their next touch: kernel 6.1 (the QEMU
// guests') answers move_pages for them with -ENOENT, so a query calls them not resident and a
// move skips them, and a system call handed one (the pager's send) fails with EFAULT. Placement
// and queries lift that first; the pages' samples this round are given up.
void Runtime::Impl::ReleaseSampled(const void* addr, size_t len) const {
  // The soft sampler's pages are claimed (kInFlight) until put back: a move would skip them.
  if (pager_ != nullptr && pager_->sampler() != nullptr) pager_->sampler()->Release(addr, len);
  if (migrator_ == nullptr || !migrator_->running()) return;
  migrator_->ReleaseSampled(addr, len);
}

Status Runtime::Impl::CheckRange(const void* ptr, size_t len, Region** region, uint64_t* first,
                                 uint64_t* npages) const {
  if (!running()) return Unavailable("the tiermem runtime is stopped");
  if (len == 0) return InvalidArgument("empty range");
  Region* r = RegionOf(ptr);
  const char* end = static_cast<const char*>(ptr) + len - 1;
  if (r == nullptr || !r->Contains(end)) {
    return InvalidArgument("range " + Hex(ptr) + "+" + std::to_string(len) +
                           " is not inside tiermem's managed memory");
  }
  uint64_t a = r->PageIndex(ptr), b = r->PageIndex(end);
  for (uint64_t i = a; i <= b; ++i) {
    const uint8_t st = r->record(i).state.load(std::memory_order_acquire);
    if (st == static_cast<uint8_t>(PageState::kFree) ||
        st == static_cast<uint8_t>(PageState::kReleasing)) {
      return InvalidArgument("range " + Hex(ptr) + "+" + std::to_string(len) +
                             " includes memory that is not allocated (page at " +
                             Hex(r->PageAddress(i)) + ")");
    }
  }
  *region = r;
  *first = a;
  *npages = b - a + 1;
  return Status::Ok();
}

void Runtime::Impl::OnResident(Region& region, uint64_t first, uint64_t n, bool moved) {
  uint64_t back = 0;
  for (uint64_t i = first; i < first + n; ++i) {
    back += Retag(region.record(i), Tier::kDram) == static_cast<uint8_t>(Tier::kRemote);
  }
  if (!moved) return;  // discarded: nothing came back, nothing to queue
  CountMoves(Index(Tier::kRemote), Tier::kDram, back);
  if (Migrator* m = live_migrator_.load(std::memory_order_acquire)) m->OnResident(&region, first, n);
}

void Runtime::Impl::OnEvicted(Region& region, uint64_t index) {
  CountMoves(Retag(region.record(index), Tier::kRemote), Tier::kRemote, 1);
}

uint8_t Runtime::Impl::Retag(PageRecord& rec, Tier tier) {
  const auto to = static_cast<uint8_t>(tier);
  uint8_t old = rec.tier.load(std::memory_order_relaxed);
  do {
    if (old >= kNumTiers || old == to) return kNoTier;
  } while (!rec.tier.compare_exchange_weak(old, to, std::memory_order_relaxed));
  allocated_[old].fetch_sub(page_size_, std::memory_order_relaxed);
  allocated_[Index(tier)].fetch_add(page_size_, std::memory_order_relaxed);
  return old;
}

StatusOr<MigrateResult> Runtime::Impl::MoveRangeTo(void* ptr, size_t len, Tier tier,
                                                   const std::vector<int>& nodes) {
  Region* region;
  uint64_t first, npages;
  TIERMEM_RETURN_IF_ERROR(CheckRange(ptr, len, &region, &first, &npages));
  for (uint64_t i = first; i < first + npages; ++i) {
    if (region->record(i).state.load(std::memory_order_acquire) !=
        static_cast<uint8_t>(PageState::kLocal)) {
      if (!pager_) {
        return NotSupported("range includes pages on the remote tier, which is not connected");
      }
      // Remote pages come back first (read from memd, installed), then move like the rest.
      // (Counted as moves into DRAM, where they land, by OnResident; then as DRAM -> CXL below.)
      TIERMEM_RETURN_IF_ERROR(pager_->FetchBack(*region, first, npages).status());
      break;
    }
  }
  // The tier limit counts the pages that change tier.
  uint64_t incoming = 0;
  for (uint64_t i = first; i < first + npages; ++i) {
    if (region->record(i).tier.load(std::memory_order_relaxed) != static_cast<uint8_t>(tier)) {
      incoming += page_size_;
    }
  }
  uint64_t limit = tier_limit_[Index(tier)];
  if (limit != 0 && allocated_[Index(tier)].load() + incoming > limit) {
    return ResourceExhausted("tier " + std::string(TierName(tier)) + " is full: limit " +
                             std::to_string(limit) + " bytes, " +
                             std::to_string(allocated_[Index(tier)].load()) +
                             " allocated, migration would add " + std::to_string(incoming));
  }
  char* start = region->PageAddress(first);
  ReleaseSampled(start, npages * page_size_);
  TIERMEM_ASSIGN_OR_RETURN(MoveStats ms,
                           NumaBackend::MoveRange(start, npages * page_size_, nodes));
  for (uint64_t i = first; i < first + npages; ++i) Retag(region->record(i), tier);
  MigrateResult r;
  r.pages_moved = ms.moved;
  r.pages_already_there = ms.already_there;
  r.pages_not_resident = ms.not_resident;
  r.pages_failed = ms.failed;
  // MoveRange only moves pages that were off the target nodes; with two NUMA tiers, those were
  // on the other tier (a page on a node outside both tiers, reachable only by MigrateToNode,
  // is counted there too).
  if (tier == Tier::kDram || tier == Tier::kCxl) {
    CountMoves(Index(tier == Tier::kDram ? Tier::kCxl : Tier::kDram), tier, ms.moved);
  }
  if (ms.failed > 0) {
    TM_LOG_WARN("migrate to %s: the kernel refused to move %llu of %llu pages after %d tries",
                std::string(TierName(tier)).c_str(), static_cast<unsigned long long>(ms.failed),
                static_cast<unsigned long long>(npages), NumaBackend::kRetries + 1);
  }
  return r;
}

StatusOr<MigrateResult> Runtime::Impl::Migrate(void* ptr, size_t len, Tier tier) {
  if (tier == Tier::kAuto) return InvalidArgument("Migrate: name a tier (dram, cxl or remote)");
  if (static_cast<int>(tier) >= kNumTiers) return InvalidArgument("Migrate: invalid tier value");
  if (!HasTier(tier)) {
    return Unavailable("Migrate: tier " + std::string(TierName(tier)) +
                       " is not available: " + tier_absent_[Index(tier)]);
  }
  if (tier == Tier::kRemote) return EvictRange(ptr, len);
  return MoveRangeTo(ptr, len, tier, tier_nodes_[Index(tier)]);
}

StatusOr<MigrateResult> Runtime::Impl::EvictRange(void* ptr, size_t len) {
  Region* region;
  uint64_t first, npages;
  TIERMEM_RETURN_IF_ERROR(CheckRange(ptr, len, &region, &first, &npages));
  uint64_t already = 0;
  for (uint64_t i = first; i < first + npages; ++i) {
    if (region->record(i).state.load(std::memory_order_acquire) ==
        static_cast<uint8_t>(PageState::kRemote)) {
      ++already;
    }
  }
  ReleaseSampled(region->PageAddress(first), npages * page_size_);
  // Evicted pages are retagged and counted by OnEvicted, as each becomes remote.
  TIERMEM_ASSIGN_OR_RETURN(uint64_t moved, pager_->Evict(*region, first, npages));
  MigrateResult r;
  r.pages_moved = moved;
  r.pages_already_there = already;
  return r;
}

StatusOr<MigrateResult> Runtime::Impl::EvictPages(const std::vector<char*>& pages) {
  return EvictEach(pages, [this](Region& region, const std::vector<uint64_t>& idx) {
    return pager_->EvictPages(region, idx);  // OnEvicted counts
  });
}

StatusOr<MigrateResult> Runtime::Impl::EvictPagesBackground(const std::vector<char*>& pages) {
  return EvictEach(pages, [this](Region& region, const std::vector<uint64_t>& idx) {
    evicting_ = true;  // even on a failure: windows queued before it are the ticket's
    return pager_->EvictPagesBegin(region, idx, &evict_ticket_);
  });
}

Status Runtime::Impl::WaitEvictions(uint64_t* became_remote) {
  *became_remote = 0;
  if (!evicting_ || pager_ == nullptr) return Status::Ok();
  evicting_ = false;
  return pager_->EvictWait(&evict_ticket_, became_remote);
}

StatusOr<MigrateResult> Runtime::Impl::EvictEach(
    const std::vector<char*>& pages,
    const std::function<StatusOr<uint64_t>(Region&, const std::vector<uint64_t>&)>& evict) {
  MigrateResult r;
  if (pages.empty()) return r;
  if (!HasTier(Tier::kRemote)) {
    return Unavailable("Migrate: tier remote is not available: " + tier_absent_[Index(Tier::kRemote)]);
  }
  // Pages of one region at a time (ascending addresses keep a region's pages together).
  for (size_t i = 0; i < pages.size();) {
    Region* region = nullptr;
    std::vector<uint64_t> idx;
    size_t j = i;
    for (; j < pages.size(); ++j) {
      Region* rg;
      uint64_t first, n;
      TIERMEM_RETURN_IF_ERROR(CheckRange(pages[j], page_size_, &rg, &first, &n));
      if (region != nullptr && rg != region) break;
      region = rg;
      if (region->record(first).state.load(std::memory_order_acquire) == static_cast<uint8_t>(PageState::kRemote)) {
        ++r.pages_already_there;
      }
      idx.push_back(first);
    }
    TIERMEM_ASSIGN_OR_RETURN(uint64_t moved, evict(*region, idx));
    r.pages_moved += moved;
    i = j;
  }
  return r;
}

StatusOr<MigrateResult> Runtime::Impl::MovePages(const std::vector<char*>& pages, Tier tier) {
  MigrateResult r;
  if (pages.empty()) return r;
  if (tier != Tier::kDram && tier != Tier::kCxl) return InvalidArgument("MovePages: a NUMA tier (dram or cxl)");
  if (!HasTier(tier)) {
    return Unavailable("MovePages: tier " + std::string(TierName(tier)) + " is not available: " +
                       tier_absent_[Index(tier)]);
  }
  std::vector<char*> local;
  std::vector<PageRecord*> recs;
  local.reserve(pages.size());
  recs.reserve(pages.size());
  uint64_t incoming = 0;
  for (char* p : pages) {
    Region* region;
    uint64_t first, n;
    TIERMEM_RETURN_IF_ERROR(CheckRange(p, page_size_, &region, &first, &n));
    PageRecord& rec = region->record(first);
    if (rec.state.load(std::memory_order_acquire) != static_cast<uint8_t>(PageState::kLocal)) {
      ++r.pages_not_resident;
      continue;
    }
    incoming += rec.tier.load(std::memory_order_relaxed) != static_cast<uint8_t>(tier) ? page_size_ : 0;
    local.push_back(p);
    recs.push_back(&rec);
  }
  const uint64_t limit = tier_limit_[Index(tier)];
  if (limit != 0 && allocated_[Index(tier)].load() + incoming > limit) {
    return ResourceExhausted("tier " + std::string(TierName(tier)) + " is full: limit " +
                             std::to_string(limit) + " bytes, " +
                             std::to_string(allocated_[Index(tier)].load()) +
                             " allocated, the move would add " + std::to_string(incoming));
  }
  for (char* p : local) ReleaseSampled(p, page_size_);
  TIERMEM_ASSIGN_OR_RETURN(MoveStats ms, NumaBackend::MovePages(local, tier_nodes_[Index(tier)]));
  for (PageRecord* rec : recs) Retag(*rec, tier);
  r.pages_moved = ms.moved;
  r.pages_already_there = ms.already_there;
  r.pages_not_resident += ms.not_resident;
  r.pages_failed = ms.failed;
  CountMoves(Index(tier == Tier::kDram ? Tier::kCxl : Tier::kDram), tier, ms.moved);
  return r;
}

StatusOr<MigrateResult> Runtime::Impl::MigrateToNode(void* ptr, size_t len, int node) {
  const NumaNode* n = topo_.Node(node);
  if (n == nullptr) {
    std::vector<int> ids;
    for (const NumaNode& x : topo_.nodes) ids.push_back(x.id);
    return NotFound("MigrateToNode: NUMA node " + std::to_string(node) +
                    " does not exist (this machine has nodes " + NodeListString(ids) + ")");
  }
  if (n->mem_bytes == 0) {
    return NotFound("MigrateToNode: NUMA node " + std::to_string(node) + " has no memory");
  }
  Tier t = TierOfNode(node);
  if (t == Tier::kAuto) t = n->cpus.empty() ? Tier::kCxl : Tier::kDram;
  return MoveRangeTo(ptr, len, t, {node});
}

StatusOr<std::vector<PageLocation>> Runtime::Impl::Locate(const void* ptr, size_t len) const {
  Region* region;
  uint64_t first, npages;
  TIERMEM_RETURN_IF_ERROR(CheckRange(ptr, len, &region, &first, &npages));
  std::vector<int> nodes(npages);
  TIERMEM_RETURN_IF_ERROR(NumaBackend::QueryNodes(region->PageAddress(first), npages, nodes.data()));
  // Local pages the query did not place may be under sampling (ReleaseSampled): released and
  // asked again, in runs (only those, so a query costs the sampler no other samples).
  if (migrator_ != nullptr && migrator_->running()) {
    for (uint64_t a = 0; a < npages;) {
      auto unplaced = [&](uint64_t i) {
        return nodes[i] < 0 && region->record(first + i).state.load(std::memory_order_acquire) ==
                                   static_cast<uint8_t>(PageState::kLocal);
      };
      if (!unplaced(a)) {
        ++a;
        continue;
      }
      uint64_t b = a + 1;
      while (b < npages && unplaced(b)) ++b;
      ReleaseSampled(region->PageAddress(first + a), (b - a) * page_size_);
      TIERMEM_RETURN_IF_ERROR(NumaBackend::QueryNodes(region->PageAddress(first + a), b - a, nodes.data() + a));
      a = b;
    }
  }
  std::vector<PageLocation> out(npages);
  for (uint64_t i = 0; i < npages; ++i) {
    const PageRecord& rec = region->record(first + i);
    PageLocation& loc = out[i];
    uint8_t st = rec.state.load(std::memory_order_acquire);
    if (st == static_cast<uint8_t>(PageState::kRemote)) {
      loc.tier = Tier::kRemote;
      continue;
    }
    if (nodes[i] >= 0) {
      loc.node = nodes[i];
      loc.resident = true;
      Tier t = TierOfNode(nodes[i]);
      loc.tier = t == Tier::kAuto ? static_cast<Tier>(rec.tier.load()) : t;
    } else {
      const uint8_t t = rec.tier.load(std::memory_order_relaxed);
      // A local page of a range allocated on the remote tier was faulted in: a fault puts it
      // in DRAM, as it would this one. So does a page no tier counts (untouched, or held free
      // by the heap): its next touch is a zero page in DRAM.
      loc.tier = t >= kNumTiers || t == static_cast<uint8_t>(Tier::kRemote) ? Tier::kDram : static_cast<Tier>(t);
    }
  }
  return out;
}

}  // namespace tiermem
