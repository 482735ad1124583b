// Subsystem runtime/core: owns the Runtime (start, stop, fork), the managed regions and their
// page records, and every placement (allocate, free, migrate, evict, locate). It may call the
// other runtime subsystems (tiering, paging, topology), backends/, protocol/ and base/; they call
// it back only through narrow interfaces (tiering/mover.h's PageMover, paging/paging_events.h's PagingEvents),
// and the allocator reaches it only through heap_runtime.h's HeapRuntime.
//
// Runtime::Impl: the runtime's state, private to runtime/core (and to tests, through
// RuntimeAccess), never seen by users or the allocator. Public behaviour:
// include/tiermem/tiermem.hpp.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/numa/numa_backend.h"
#include "base/clock.h"
#include "base/once_per.h"
#include "base/options.h"
#include "base/own_memory.h"
#include "runtime/core/heap_runtime.h"
#include "runtime/paging/pager.h"
#include "runtime/pages/region.h"
#include "runtime/stats/stats_block.h"
#include "runtime/tiering/mover.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {

class Migrator;  // runtime/tiering/migrator.h: the policy thread

// HeapRuntime: the allocator's calls, and the regions, options and counters it reads.
class Runtime::Impl final : public PageMover, public HeapRuntime {
 public:
  // fork(): handlers installed once per process (os::AtFork) act on every live runtime.
  // Prepare stops evictions and brings remote pages back (the child has no fault handler), and
  // holds the runtime's own locks across the fork; the child then runs without a policy thread
  // and without the remote tier.
  void PrepareFork();
  void AfterFork(bool child);

  Impl();  // runtime.cc
  ~Impl();

  Status Init(const Options& api_options);
  Status Stop();
  bool running() const { return running_.load(std::memory_order_acquire); }

  StatusOr<void*> Allocate(size_t bytes, Tier tier, uint32_t flags);
  Status Free(void* ptr);
  StatusOr<size_t> AllocationSize(const void* ptr) const;
  StatusOr<MigrateResult> Migrate(void* ptr, size_t len, Tier tier) override;
  // Migrate to kRemote of scattered live pages (page addresses, ascending): the pager shares
  // its round trips among them (the policy thread's demotions of scattered cold pages).
  StatusOr<MigrateResult> EvictPages(const std::vector<char*>& pages) override;
  // The same without waiting for memd (the policy thread's plan): pages_moved counts the pages
  // claimed and queued; WaitEvictions settles them. The policy thread's alone.
  StatusOr<MigrateResult> EvictPagesBackground(const std::vector<char*>& pages) override;
  Status WaitEvictions(uint64_t* became_remote) override;
  uint64_t EvictionsPending() const override { return pager_ ? pager_->EvictPending(&evict_ticket_) : 0; }
  StatusOr<MigrateResult> MovePages(const std::vector<char*>& pages, Tier tier) override;
  StatusOr<MigrateResult> MigrateToNode(void* ptr, size_t len, int node);
  StatusOr<std::vector<PageLocation>> Locate(const void* ptr, size_t len) const;
  bool HasTier(Tier tier) const;
  std::vector<TierStats> Stats() const;
  RuntimeCounters Counters() const;                                   // runtime_counters.cc
  bool GetProperty(std::string_view name, std::string* value) const;  // runtime_counters.cc
  Status SetPinned(void* ptr, bool pinned);                           // runtime_counters.cc
  Status AddRemoteServer(std::string_view address);                  // runtime_counters.cc
  void FinishStats();  // HeapRuntime::FinishStats
  // Per-tier usage and the counters as text (stats_report.cc): TIERMEM_STATS=stderr prints it,
  // GetProperty("tiermem.stats") returns it.
  std::string StatsReportText() const;
  const Topology& topology() const { return topo_; }
  std::pmr::memory_resource* Resource(Tier tier);

  // --- for the project's own layers ---
  Status DiscardPages(void* p, size_t bytes);  // HeapRuntime::DiscardPages
  // Whether DRAM's limit is kept against resident pages (CountResident, and pages handed out
  // from dropped or fresh memory counted once touched): where evictions keep it, that is a
  // DRAM limit with a connected remote tier and TIERMEM_ON_REMOTE_FULL=overcommit. Elsewhere the
  // limit is a cap on allocations (docs/protocol.md): pages count as they are handed out.
  bool CountsResident() const {
    return tier_limit_[Index(Tier::kDram)] != 0 && pager_ != nullptr && !remote_absent_ &&
           on_remote_full_ == RemoteFullPolicy::kOvercommit;
  }
  // The heap's free pages (HeapRuntime::HoldFree, ReuseFree; resident.cc).
  Status HoldFree(void* p, size_t bytes, FreeHold how);
  void ReuseFree(void* p, size_t bytes, Tier tier);
  uint64_t DramRoom() const;  // HeapRuntime::DramRoom (resident.cc)
  // PageMover::CountResident (resident.cc): local DRAM pages the kernel has not backed go to
  // kUntouchedTier and leave DRAM's count; such pages found resident come back to it. When due,
  // at most once per kResidentCostShare times its own last duration; before an eviction, once
  // per kEvictionCountShare times it.
  void CountResident(CountWhen when) override;
  // The pages counted at allocation since the last count, times the share of such pages the
  // last sampled count found untouched; at most what DRAM's count grew since that count ended
  // (a page counted at allocation and freed, or evicted, before the next count left the count,
  // and leaving it in the estimate would let DRAM's count fall short of what it holds).
  uint64_t UnseenPages() const override {
    const uint64_t estimate =
        unseen_pages_.load(std::memory_order_relaxed) * unseen_untouched_.load(std::memory_order_relaxed) / 1024;
    const uint64_t now = TierPages(Tier::kDram), base = dram_after_count_.load(std::memory_order_relaxed);
    return std::min(estimate, now > base ? now - base : 0);
  }
  // The tier a NUMA node belongs to (kDram or kCxl), or kAuto when the node is in no tier.
  Tier TierOfNode(int node) const;
  const std::vector<int>& TierNodes(Tier tier) const override { return tier_nodes_[Index(tier)]; }
  uint64_t TierPages(Tier tier) const override {
    return allocated_[Index(tier)].load(std::memory_order_relaxed) / page_size_;
  }
  // Under the preload library glibc's heap serves the runtime's own threads alone
  // (OnRuntimeThreadStart): the policy's tables, the pager's buffers. That DRAM, and what the
  // runtime maps for itself beside it as far as it is written (OwnMappedBytes: staging, rings,
  // region and heap metadata, its threads' stacks), counts against TIERMEM_DRAM_LIMIT like the
  // program's, so the process stays near its limit. Elsewhere glibc's heap is the program's own,
  // outside tiermem's accounting: nothing is counted.
  bool RemoteWritten() const override { return pager_ != nullptr && pager_->PagesStored() != 0; }
  uint64_t OwnPages() const override {
    return preloaded_ ? (os::LibcHeapBytes() + OwnMappedBytes()) / page_size_ : 0;
  }
  // The policy thread, or nullptr before Init / after Stop.
  Migrator* migrator() const { return migrator_.get(); }
  // The remote tier's pager, or nullptr when TIERMEM_REMOTE is unset or unreachable.
  Pager* pager() const { return pager_.get(); }

 private:
  static int Index(Tier t) { return static_cast<int>(t); }
  void MarkQuietChunk(Region& r, uint64_t first, uint64_t m);  // CountResident's, per chunk
  Status ResolveTiers();
  PagerConfig MakePagerConfig();  // Init's remote tier (runtime.cc)
  friend struct RuntimeAccess;
  Clock* clock_ = &SystemClock();  // the pager's and the policy thread's (RuntimeAccess::Start)
  void StartRemoteTier();
  // Picks the tier an allocation goes to (fallback, kAuto, limits). *untouched: the bytes of a
  // kAuto run that DRAM's count has no room for that are placed on DRAM all the same, because
  // the limit is kept against resident pages (CountsResident): those pages start out of the
  // count (kUntouchedTier) and count as CountResident finds them touched. All of the run, or
  // its first pages (a large run: as many as the process has room for); the rest of it is
  // then the remote tier's, zero-filled by the fault thread at its first touch (SplitRoom).
  StatusOr<Tier> ChooseTier(Tier asked, uint64_t bytes, uint32_t flags, uint64_t* untouched) const;
  // The bytes of a large run (kUntouchedRunBytes or more) that go to DRAM untouched: what the
  // limit leaves above the process's resident memory and DRAM's count, whichever is more,
  // in whole pages, at most `bytes`. The kernel backs those pages at their first touch with
  // no fault the runtime sees, so nothing could hold back a program that writes them faster
  // than relief evicts; past them, the fault thread's zero fills keep the limit as they go.
  uint64_t SplitRoom(uint64_t bytes) const;
  // Whether a run of `bytes` DRAM's count has no room for fits all the same: the count holds at
  // least as many pages nobody has seen since they were allocated (unseen_pages_), and the
  // process's resident memory (which includes every page of it DRAM's count should hold) leaves
  // room for the run within the limit. One read of the kernel's count (resident.cc).
  bool UnseenRoom(uint64_t bytes) const;
  static constexpr uint64_t kUntouchedRunBytes = uint64_t{64} << 20;
  // Binds a page to `tier` and moves its bytes between the per-tier counts; returns the tier it
  // left, or kNoTier when it was already there or no tier counts it (its run is being freed, or
  // is not bound yet: a migration working from a stale view must not count such a page).
  uint8_t Retag(PageRecord& rec, Tier tier);
  // MADV_NOHUGEPAGE on the region's data while the policy thread runs (runtime.cc).
  void SmallPagesWhileTiering(Region& region);
  // Lifts the access sampler's protection inside [addr, addr+len) (runtime_move.cc).
  void ReleaseSampled(const void* addr, size_t len) const;
  StatusOr<Region*> AllocRunAnywhere(uint64_t npages, PageState initial, uint64_t* first);
  // Checks [ptr, ptr+len) lies in live allocations of one region; returns its region and pages.
  Status CheckRange(const void* ptr, size_t len, Region** region, uint64_t* first,
                    uint64_t* npages) const;
  // Migrate to kRemote: the pager writes the pages to memd and drops them.
  StatusOr<MigrateResult> EvictRange(void* ptr, size_t len);
  // Scattered pages (ascending addresses), a region's at a time, handed to `evict`.
  StatusOr<MigrateResult> EvictEach(
      const std::vector<char*>& pages,
      const std::function<StatusOr<uint64_t>(Region&, const std::vector<uint64_t>&)>& evict);
  StatusOr<MigrateResult> MoveRangeTo(void* ptr, size_t len, Tier tier,
                                      const std::vector<int>& nodes);

  Topology topo_;
  std::array<std::vector<int>, kNumTiers> tier_nodes_;
  std::array<std::string, kNumTiers> tier_absent_;
  std::array<uint64_t, kNumTiers> tier_capacity_{};
  std::array<uint64_t, kNumTiers> tier_limit_{};  // 0 = no limit beyond capacity
  // Counters live in the process's stats block (stats_block.h), or in fallback_stats_ when it
  // could not be made: allocated_ points at the block's per-tier accounting.
  StatsPublisher stats_;
  StatsBlock fallback_stats_{};
  std::atomic<uint64_t>* allocated_ = fallback_stats_.allocated_bytes;
  void CountMoves(uint8_t from, Tier to, uint64_t pages) {
    if (from < kNumTiers && pages != 0) sb_->moves[from][Index(to)].fetch_add(pages, std::memory_order_relaxed);
  }
  // The pager's tier accounting (PagingEvents::OnResident / OnEvicted): a page's tier follows
  // its data, so DRAM's count includes the pages faulted back into it.
  void OnResident(Region& region, uint64_t first, uint64_t n, bool moved);
  void OnEvicted(Region& region, uint64_t index);
  // What the pager reports (runtime/paging/paging_events.h), passed on to the counts, the stats
  // block and the policy thread (runtime/core/paging_events.cc).
  class PagerEvents final : public PagingEvents {
   public:
    explicit PagerEvents(Impl* rt) : rt_(rt) {}
    Region* RegionOf(const void* addr) override;
    void OnResident(Region& region, uint64_t first, uint64_t n, bool moved) override;
    void OnEvicted(Region& region, uint64_t index) override;
    void OnKept(Region& region, uint64_t index) override;
    void OnWindowDone() override;
    void AfterFaults() override;
    void OnFull() override;
    void OnServerListed(size_t index, const std::string& name) override;

   private:
    Impl* const rt_;
  };
  PagerEvents pager_events_{this};
  // The policy thread once it runs (the fault handler reads it; set after Migrator::Start).
  std::atomic<Migrator*> live_migrator_{nullptr};
  void PublishTopology();  // tiers, nodes, limits and servers into the stats block, at start
  void PublishRegion(int n);
  // Server `index` of the pager's list into the stats block (the first kMaxStatsServers).
  void PublishServer(size_t index, const std::string& name);
  // TIERMEM_STATS (stats_report.cc): the timeline thread and one JSON line of it.
  void StartStatsTimeline();
  void WriteStatsLine();
  std::thread timeline_;
  int timeline_stop_fd_ = -1;
  int stats_fd_ = -1;
  std::mutex stats_file_mu_;
  bool stats_reported_ = false;
  uint64_t RemoteCapacityBytes() const;  // what the connected servers offer this process
  // TIERMEM_ON_REMOTE_FULL (docs/protocol.md, "When the remote tier is full or absent").
  // RemoteCanTake: whether `bytes` more on the remote tier still fit what the connected servers
  // hold for this process, counting the pages DRAM holds past its limit, which are owed to
  // the remote tier. NoteRemoteFull: the warning that no server can take a page, at most once
  // a minute (kRemoteFullWarnNs); lock-free and allocation-free, so the evicting thread (with
  // the pager's io lock held) and allocating threads may call it.
  bool RemoteCanTake(uint64_t bytes) const;
  void NoteRemoteFull() const;
  static constexpr uint64_t kRemoteFullWarnNs = 60ull * 1000 * 1000 * 1000;
  RemoteFullPolicy on_remote_full_ = RemoteFullPolicy::kOvercommit;
  bool remote_absent_ = false;  // TIERMEM_REMOTE given, but no server was reached at start
  bool preloaded_ = false;      // the preload library's runtime (RuntimeThreadHookSet)
  mutable OncePer remote_full_warning_{kRemoteFullWarnNs};
  std::array<int, 1024> node_tier_{};  // node -> Tier index, -1 when in no tier

  std::mutex grow_mu_;
  std::atomic<bool> running_{false};
  // CountResident's state (its caller's thread only): its next look by the clock; the process's
  // resident bytes and DRAM's room (bytes) at the last count, past whose sum it looks at once.
  uint64_t resident_next_ns_ = 0, resident_rss_ = 0, resident_slack_ = 0;
  uint64_t resident_eviction_next_ns_ = 0;  // the next look before an eviction, by the clock
  bool ResidentGrewPastSlack() const;
  static constexpr uint64_t kResidentCostShare = 20, kEvictionCountShare = 4;
  // DRAM pages Allocate counted at once (a run that fit DRAM's count) since the last count
  // began: allocating threads add, a count reads them as it starts and takes them out as it
  // ends (only the policy thread counts, so no two counts take the same pages). UnseenPages weighs them by
  // the share (of 1024) of such pages the last count that looked at kUnseenSample or more of
  // them found untouched: none at first, so that a program that writes what it asks for keeps
  // the limit as pages count when handed out; most, for one that touches a page of each block.
  std::atomic<uint64_t> unseen_pages_{0};
  std::atomic<uint32_t> unseen_untouched_{0};
  std::atomic<uint64_t> dram_after_count_{0};  // DRAM's count (pages) when the last count ended
  static constexpr uint64_t kUnseenSample = 256;
  std::unique_ptr<Migrator> migrator_;  // automatic tiering
  std::unique_ptr<Pager> pager_;        // the remote tier
  // The pager as the write scan's host (TieringConfig::scan_host): with TIERMEM_TRACK=scan and a
  // remote tier the scan registers and reads the regions through the pager's WP_ASYNC descriptor.
  class PagerScanHost final : public ScanHost {
   public:
    explicit PagerScanHost(Pager* pager) : pager_(pager) {}
    Status RegisterForScan(void* addr, size_t bytes) override { return pager_->RegisterForScan(addr, bytes); }
    void ScanBegins() override { pager_->ScanBegins(); }
    void ScanEnds() override { pager_->ScanEnds(); }

   private:
    Pager* pager_;
  };
  std::unique_ptr<PagerScanHost> scan_host_;  // with pager_ in write-scan mode
  // The policy thread's background evictions (EvictPagesBackground), settled by WaitEvictions;
  // the migrator waits for them before it stops, so the ticket outlives its jobs.
  EvictTicket evict_ticket_;
  bool evicting_ = false;

  class PageResource;
  std::array<std::unique_ptr<PageResource>, kNumTiers + 1> page_resources_;
  std::array<std::unique_ptr<std::pmr::synchronized_pool_resource>, kNumTiers + 1> pools_;
};

// The door from the project's own layers (allocator, tests) to a Runtime's state; users have
// only the public API. Runtime names this struct its friend.
struct RuntimeAccess {
  static Runtime::Impl* Of(Runtime& rt) { return rt.impl_.get(); }
  // Runtime::Start with the clock its threads' waits, pauses and back-offs go by (the pager's
  // and the policy thread's; base/clock.h): tests pass a ManualClock, which must outlive the
  // runtime.
  static StatusOr<std::unique_ptr<Runtime>> Start(const Options& options, Clock* clock);
};
inline Runtime::Impl* ImplOf(Runtime& rt) { return RuntimeAccess::Of(rt); }

namespace internal {
// Messages shared by runtime.cc and runtime_move.cc: "0x7f...".
std::string Hex(const void* p);
}  // namespace internal

}  // namespace tiermem
