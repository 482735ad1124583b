// Subsystem runtime/tiering: owns access sampling (tracker), the pure Policy and the policy
// thread. It gets its whole configuration once (mover.h's TieringConfig), reads the core's page
// records (pages/region.h), and acts only through PageMover (implemented by the core) and
// backends/numa; it never includes runtime_impl.h.
//
// The policy thread: once per sampling round (TIERMEM_SAMPLE_INTERVAL_MS) it runs scan -> plan
// -> execute. Scan (migrator_scan.cc): it collects the tracker's samples and the remote faults
// seen since the last round, reads the page records of every live page (a byte or two each), or
// past TIERMEM_SCAN_PAGES resident pages a window of them that moves on from round to round, and
// lists the resident ones (DRAM, CXL) with only a count of the rest. Plan: Policy::PlanRound makes every
// placement decision (the plan by heat, the second chance of DRAM's victims, block expansion).
// Execute: the moves go through the PageMover (Migrate: move_pages for DRAM/CXL, the pager's
// evict and fetch for the remote tier); then the next sample is armed. Budget relief asks the
// Policy too (ReliefSpares, RoomBelowLowWatermark): this thread decides nothing by itself.
//
// Remote faults as samples: a page whose record went from kRemote to kLocal since the last round
// was faulted in by the program (the pager served it), so it counts as an access.
//
// Modes (TIERMEM_SAMPLE_MODE): protect = protection-fault sampling always on (reads and writes);
// auto = the same, but only while there is a decision to make (a budget is set, a lower tier
// exists and DRAM is at least 3/4 full or pages live below it), and in a program run under the
// preload library "faults" (a system call given a protected page would fail with EFAULT);
// faults = no protection sampling, only remote faults; off = no sampling and no plans. The
// thread is not started at all when no tier has a budget, unless protect or TIERMEM_TRACK=scan.
//
// The write scan (TIERMEM_TRACK=scan, migrator_track.cc): each round, before the plan, a window
// of the regions' pages is scanned for writes, the written pages become write samples, and the
// next access sample leaves them out (only pages the scan found unwritten are sampled).
//
// Budget relief (migrator_relief.cc), in every mode with a DRAM budget and a lower tier: pages
// the pager makes resident (faults, zero fills of first touches, fetches) enter a FIFO ring.
// When DRAM goes over its budget the fault handler nudges this thread, which evicts down to the
// budget without waiting for its round: pages the prefetcher fetched and nobody touched first,
// then the pages under the carried watch that went untouched the longest, then the ring's old
// end (a page the policy holds hot gets a second chance at the ring's new end, once per entry
// the ring held, so the limit still holds); while DRAM is more than
// `slack` pages over, the handler waits (at most one interval per batch) for that room, so a
// program that faults faster than pages can be written out is slowed down instead of running
// past its limit. The round's plan still decides by heat where samples exist. When the remote
// tier is full, relief pauses for a second at a time and the handler is not held back: DRAM
// then runs over its budget (TIERMEM_ON_REMOTE_FULL, the runtime's warning says so).
//
// Thread safety: OnAllocate/OnFree are called by Runtime::Impl from any thread (lock-free and
// allocation-free, so the preload allocator may call them); Start/Stop by the runtime.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <optional>
#include <span>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/counters.h"
#include "base/zeroed_array.h"
#include "runtime/tiering/heat_log.h"
#include "runtime/tiering/mover.h"
#include "runtime/tiering/policy.h"
#include "runtime/tiering/ring_sizes.h"
#include "runtime/tiering/round_pacer.h"
#include "runtime/pages/region.h"
#include "runtime/tiering/scan_tracker.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {

// What the policy thread says in words (its counters are the listed ones, in the stats block).
struct MigratorStats {
  std::string mode;        // the mode in effect: protect, faults, off
  std::string track = "off";  // the write scan's mechanism (TIERMEM_TRACK=scan), or off
  std::string pebs;        // why PEBS is (not) used
  std::string last_error;  // the latest refusal of a planned move, for diagnosis
};

// Page key -> position in a round's page views (resident pages only): over each window of page
// records the round read, a directory with an entry per block of kBlock pages and a block of
// positions for each block that holds a listed page (a round looks up pages often several times;
// a hash map of them was a good part of the policy thread's time, and a dense array over the
// window cost 4 bytes for every page of a large buffer the program never touched); and a small
// map for the pages listed outside them (sampled pages; migrator_scan.cc).
class ViewIndex {
 public:
  void Clear() {
    nspans_ = 0;
    pool_.clear();
    extra_.clear();
  }
  // A window [first_key, first_key + pages) of `region`, whose page 0 has key `region_key`;
  // returns its number for Set and Trim.
  size_t AddSpan(const Region* region, uint64_t region_key, uint64_t first_key, uint64_t pages) {
    if (spans_.size() <= nspans_) spans_.emplace_back();
    Span& s = spans_[nspans_];
    s.region = region;
    s.region_key = region_key;
    s.first = first_key;
    s.pages = pages;
    s.dir.assign((pages + kBlock - 1) / kBlock, kNone);
    return nspans_++;
  }
  // Sets the position of a page inside the span's window (at most once per page).
  void Set(size_t span, uint64_t key, uint32_t view) {
    Span& s = spans_[span];
    const uint64_t off = key - s.first;
    uint32_t& block = s.dir[off / kBlock];
    if (block == kNone) {
      block = static_cast<uint32_t>(pool_.size() / kBlock);
      pool_.resize(pool_.size() + kBlock, kNone);
    }
    pool_[static_cast<size_t>(block) * kBlock + off % kBlock] = view;
  }
  // The window ends after `pages` (the round stopped reading there).
  void Trim(size_t span, uint64_t pages) { spans_[span].pages = pages; }
  uint64_t SpanFirst(size_t span) const { return spans_[span].first; }
  uint64_t SpanPages(size_t span) const { return spans_[span].pages; }
  // A page listed outside every window.
  void SetExtra(uint64_t key, uint32_t view) { extra_[key] = view; }
  // Whether the round read `key`'s record in one of its windows.
  bool InWindow(uint64_t key) const {
    for (size_t i = 0; i < nspans_; ++i) {
      if (key >= spans_[i].first && key - spans_[i].first < spans_[i].pages) return true;
    }
    return false;
  }
  bool SameRegion(uint64_t a, uint64_t b) const {
    const Span* s = RegionSpan(a);
    return s != nullptr && b >= s->region_key && b - s->region_key < s->region->pages();
  }
  // The page's record state now (kFree outside the regions the round read).
  uint8_t State(uint64_t key) const {
    const Span* s = RegionSpan(key);
    return s == nullptr ? static_cast<uint8_t>(PageState::kFree)
                        : s->region->record(key - s->region_key).state.load(std::memory_order_acquire);
  }
  const uint32_t* Find(uint64_t key) const {
    for (size_t i = 0; i < nspans_; ++i) {
      const Span& s = spans_[i];
      if (key >= s.first && key - s.first < s.pages) {
        const uint64_t off = key - s.first;
        const uint32_t block = s.dir[off / kBlock];
        if (block == kNone) return nullptr;
        const uint32_t* v = &pool_[static_cast<size_t>(block) * kBlock + off % kBlock];
        return *v == kNone ? nullptr : v;
      }
    }
    if (extra_.empty()) return nullptr;
    auto it = extra_.find(key);
    return it == extra_.end() ? nullptr : &it->second;
  }

 private:
  static constexpr uint32_t kNone = ~0u;
  static constexpr uint64_t kBlock = 256;
  struct Span {
    const Region* region = nullptr;
    uint64_t region_key = 0;  // key of the region's page 0
    uint64_t first = 0;       // key of the window's first page
    uint64_t pages = 0;
    std::vector<uint32_t> dir;  // per block of the window: its block in pool_, or kNone
  };
  const Span* RegionSpan(uint64_t key) const {
    for (size_t i = 0; i < nspans_; ++i) {
      const Span& s = spans_[i];
      if (key >= s.region_key && key - s.region_key < s.region->pages()) return &s;
    }
    return nullptr;
  }
  std::vector<Span> spans_;
  size_t nspans_ = 0;
  std::vector<uint32_t> pool_;  // blocks of kBlock positions (kNone: not listed)
  std::unordered_map<uint64_t, uint32_t> extra_;
};

// The round's views by page key for the Policy (ViewLookup over a ViewIndex).
class RoundViews final : public ViewLookup {
 public:
  RoundViews(const ViewIndex& index, const std::vector<PageView>& views) : index_(index), views_(views) {}
  const PageView* Find(uint64_t page) const override {
    const uint32_t* at = index_.Find(page);
    return at == nullptr ? nullptr : &views_[*at];
  }

 private:
  const ViewIndex& index_;
  const std::vector<PageView>& views_;
};

class Migrator {
 public:
  // `mover` and `counters` (the stats block's, base/counters.h) outlive the Migrator; `config`
  // is the whole configuration (mover.h).
  Migrator(PageMover* mover, TieringConfig config, ProcessCounters* counters);
  ~Migrator();
  Migrator(const Migrator&) = delete;
  Migrator& operator=(const Migrator&) = delete;

  // Installs the tracker the mode needs and starts the thread when there is work for it.
  Status Start();
  void Stop();
  // In a child after fork(): the thread does not exist there; forget it (nothing to join).
  void AbandonAfterFork() {
    started_.store(false, std::memory_order_release);
    new (&thread_) std::thread();
  }
  bool running() const { return started_.load(std::memory_order_acquire); }
  // The sampler that protects pages (PROT_NONE) while running, else null: evictions must
  // release their claimed pages from it (Pager::WatchClaims).
  AccessSampler* protecting_sampler() const;

  void OnAllocate(Region* region, uint64_t first, uint64_t npages);
  void OnFree(Region* region, uint64_t first, uint64_t npages);
  // Gives back sampled pages of [addr, addr+len) before the runtime moves or queries them
  // (kernel 6.1 answers move_pages for PROT_NONE pages with -ENOENT; a soft-sampled page is
  // claimed by the sampler). Any thread.
  void ReleaseSampled(const void* addr, size_t len);
  // Budget relief (migrator_relief.cc). OnResident: the pager made pages [first, first+npages)
  // resident in DRAM (any thread; a spinlock and no allocation). AfterFaults: from the pager's
  // fault handler thread after each batch: nudges the thread when DRAM is over its budget and
  // waits (bounded) while it is more than slack_pages() over. faulted false: pages the kernel
  // backed on a first touch that a resident count found (Runtime::Impl::CountResident, the
  // policy thread): relief's ring only, not the fault log (a first touch says nothing of heat).
  void OnResident(Region* region, uint64_t first, uint64_t npages, bool faulted = true);
  void AfterFaults();
  // The pager's writer thread finished an eviction window (pages left DRAM, or stayed): wakes
  // a fault handler AfterFaults holds back, to look at DRAM again. Any thread.
  void OnLeftDram();
  uint64_t slack_pages() const { return slack_pages_; }

  MigratorStats stats() const;
  // Its counters (the stats block's, or those it was given), read now.
  CounterValues counters() const { return LoadCounters(*counters_); }

 private:
  static constexpr uint64_t kBlockPages = Policy::kBlockPages;  // victim checks arm whole blocks
  struct Known {
    std::atomic<Region*> region{nullptr};
    std::atomic<uint64_t> end{0};  // pages [0, end) may be live
  };
  void Loop();
  // Round() and its accounting (time, CPU, pacing); returns when the next round may start
  // (config_.clock's time).
  uint64_t PacedRound(RoundPacer& pacer);
  // One round; returns whether it had anything to do (samples armed, moves planned).
  bool Round();
  // Budget relief on the policy thread: evicts ring pages while DRAM is over its budget;
  // returns the pages evicted. MaybeRelieve: the same, only when the handler asked for it.
  uint64_t Relieve();
  void MaybeRelieve();
  // Relieve's steps (migrator_relief.cc), on the policy thread.
  struct ReliefPass {
    bool background = false;    // batches queued to the writer, not waited for
    uint64_t evicted = 0;       // pages sent down so far
    uint64_t spare_left = 0;    // second chances this relief may still give
    uint64_t spared_total = 0;  // second chances given
  };
  struct Victim;
  uint64_t ReliefDramPages(bool background) const;  // DramPagesSeen, less those leaving (background)
  // DRAM's count less its pages allocated and not looked at since (PageMover::UnseenPages): what
  // relief, the fault handler's hold and the budget's nudge go by. Pages a program touched
  // unseen count at the next resident count (due once an interval, early when the process grew
  // past DRAM's room, and before relief evicts while any are unseen).
  uint64_t DramPagesSeen() const;
  bool ReliefPaused();  // the remote tier was full a moment ago: relief waits (and says so)
  void SpareHot(const std::vector<Victim>& popped, uint64_t now, ReliefPass* pass, std::vector<char*>* batch);
  bool EvictReliefBatch(const std::vector<char*>& batch, uint64_t now, ReliefPass* pass);
  StatusOr<MigrateResult> ReliefEvict(const std::vector<char*>& pages, bool background);
  void CountRelief(uint64_t pages, ReliefPass* pass);
  void ReliefProgress();  // a batch went down: relief is not stuck, and waiters are woken
  // Whether `pages` relief victims fit on the CXL tier below its low watermark.
  bool ReliefRoomOnCxl(size_t pages) const;
  // A page popped from a ring; `spared`: its entry was requeued by a second chance already.
  struct Victim {
    char* addr;
    bool spared;
    bool watched = false;  // under the watch, untouched (TakeWatchedVictims): no second chance
  };
  // Appends up to `max` victims: first the pages fetched ahead that nobody touched since
  // (kPageAhead), oldest first, then (`fifo`) the ring's oldest. False when it found none.
  bool PopVictims(size_t max, std::vector<Victim>* out, bool fifo = true);
  // Appends up to `max` pages under the carried watch that are still untouched (the soft
  // sampler holds them, or they are resident under protection), the longest watched first
  // (Policy::TakeWatched).
  void TakeWatchedVictims(size_t max, std::vector<Victim>* out);
  // The known region holding `addr`, or null (freed, or not managed).
  Region* RegionOf(const char* addr) const;
  // Puts popped victims that could not be evicted back at the ring's new end (the ring is
  // full: dropped), so relief finds them again once the remote tier has room.
  // `spared`: they were given a second chance (their entries say so).
  void RequeueVictims(const std::vector<char*>& pages, bool spared);
  bool SamplingWanted(uint64_t dram_pages, uint64_t lower_pages) const;
  // Whether a round has nothing to do (Loop then skips it): no CXL tier, no page on the remote
  // tier and no eviction to settle, no sample armed
  // or carried, no write scan, and DRAM under the share of its budget where sampling starts
  // (SamplingWanted). Such a round reads no page record: below its limit a program pays for
  // the relief ring and the resident counts only.
  bool Idle() const;
  // A round's scan (migrator_scan.cc): the resident pages it lists and what it counted.
  struct RoundScan {
    std::vector<PageView> views;       // ascending by page (Policy::RoundInput::views)
    std::vector<char*> candidates;     // resident unpinned pages read this round, in read order
    uint64_t dram_pages = 0, lower_pages = 0, cxl_pages = 0;  // whole memory, not the window
    Policy::TierPageCounts unlisted{};  // live pages not listed, per tier
    uint64_t population = 0;  // resident unpinned pages the candidates were drawn from, over time
    uint64_t window_listed = 0;  // pages listed from the records read (not the named ones)
    uint64_t records_read = 0;   // page records read (a quiet chunk passed over counts one)
    bool whole = true;        // every live page was read (no window)
  };
  // Reads the page records: every live page's when they fit TIERMEM_SCAN_PAGES (or it is 0),
  // else a window that continues where the last round's stopped, plus the pages named by
  // `named` (sampled, watched) wherever they are. Fills `index_` for `out->views`.
  void Scan(std::span<const uint64_t> named, RoundScan* out);
  // Reads records [from, end) of `r` (known_[ki]) into `out` until `*list_left` pages are
  // listed or `*read_left` records read (null: no limit); returns where it stopped.
  uint64_t ScanWindow(Region* r, uint64_t from, uint64_t end, uint64_t* list_left, uint64_t* read_left,
                      RoundScan* out);
  // A window's scan from the cursor (scan_region_, scan_page_) round the regions, at most once.
  void ScanFromCursor(size_t nregions, RoundScan* out);
  // The named pages outside the windows that are resident, into named_scratch_ (ascending).
  void ListNamed(std::span<const uint64_t> named, RoundScan* out);
  // Puts out->views in address order with the named pages merged in, and indexes them.
  void OrderViews(RoundScan* out);
  struct ScanWindowViews {
    size_t span;        // ViewIndex span
    size_t begin, end;  // its views, [begin, end) of RoundScan::views as read
  };
  std::vector<ScanWindowViews> scan_windows_;  // Scan's scratch (policy thread)
  RoundScan scan_;                             // the round's scan (policy thread; keeps capacity)
  std::vector<uint64_t> named_keys_;           // Round's scratch: the pages the sampler named
  std::vector<PageView> named_scratch_, sorted_scratch_;
  struct Executed {
    uint64_t demoted = 0, promoted = 0, failed = 0;
    uint64_t calls = 0, migrate_ns = 0;  // mover calls and the time in them
    std::string last_error;              // the latest refusal ("" when none)
  };
  // Carries `moves` out (sorted here: demotions first) in runs of adjacent pages with one
  // destination, evictions of the whole round in one EvictPages call; reports each move to the
  // policy (Moved) and adds the pages it touched to `moved` (not armed again this round).
  // `cxl`: a CXL tier exists (ranges evicted to remote are rebound to DRAM's nodes).
  Executed Execute(std::vector<PageMove>& moves, bool cxl, uint64_t now, std::unordered_set<uint64_t>* moved);
  class MoveBatch;  // Execute's steps (migrator_moves.cc)
  // Round's steps besides Scan, Execute and ArmNextSample (migrator.cc): CollectSamples takes
  // the sampler's round (its samples and the watched pages it found untouched; returns the
  // samples), AddFaultSamples the fault log's pages as samples (returns them), LogRound the
  // debug line, CountRound the counters. RoundReport is what they pass on.
  struct RoundReport {
    uint64_t t_settle = 0, t_start = 0, t_scan = 0, t_arm = 0, t_end = 0;  // os::MonotonicNanos
    uint64_t scan_ns = 0, plan_ns = 0, relief_ns0 = 0;
    uint64_t tracked = 0, fault_samples = 0, written = 0, armed = 0;
    size_t moves = 0;
    PlanStats ps;
    Executed ex;
  };
  uint64_t CollectSamples(uint64_t now, std::vector<AccessSample>* samples, std::vector<uint64_t>* untouched);
  uint64_t AddFaultSamples(uint64_t now, std::vector<AccessSample>* samples);
  void LogRound(const RoundReport& r, const std::vector<AccessSample>& samples, const RoundScan& scan);
  void CountRound(const RoundReport& r, const RoundScan& scan);
  // Waits for the evictions Execute queued in the background (TieringConfig::evict_background)
  // and counts those that failed (their pages are local again). Before a round scans, before
  // relief counts DRAM, and before the thread ends: every count the thread goes by is settled.
  void SettleEvictions();
  uint64_t evictions_queued_ = 0;  // pages queued since the last SettleEvictions (policy thread)
  uint64_t relief_ns_ = 0;         // time in Relieve, in total (policy thread; the round's debug line)
  // Pages budget relief took out of DRAM since the round's scan began (policy thread): the
  // plan's views may still show them on DRAM (Policy::RoundInput::left_dram).
  uint64_t relieved_since_scan_ = 0;
  // Arms the next round's sample (migrator_sample.cc); returns the pages armed.
  uint64_t ArmNextSample(uint64_t now, const std::vector<PageView>& views,
                         const std::vector<char*>& sample_candidates, uint64_t population,
                         uint64_t dram_pages, uint64_t lower_pages, uint64_t fault_samples,
                         const std::unordered_set<uint64_t>& moved_now);

  // ArmNextSample's steps (migrator_sample.cc). StopSamplingIfHandlerLost: the program replaced
  // tiermem's SIGSEGV handler or set one of its own (the tracker is no longer usable):
  // protection sampling ends, its pages lifted. SampleSharesFor: the pages
  // the next sample arms in all, and how many of them check DRAM's next victims. PickVictims:
  // whole blocks around the coldest DRAM pages of a rotating window of the candidates.
  // PickRotating: the rest, rotating over the CXL tier's candidates (all of them without CXL).
  // ArmAndWatch: arms them (those still local) and puts the DRAM ones under watch.
  struct SampleShares {
    size_t total = 0, victims = 0;
  };
  void StopSamplingIfHandlerLost();
  SampleShares SampleSharesFor(size_t candidates, uint64_t dram_pages, uint64_t fault_samples) const;
  void PickVictims(uint64_t now, const std::vector<PageView>& views, const std::vector<char*>& candidates,
                   size_t victim_share, const std::unordered_set<uint64_t>& moved_now, std::vector<char*>* next);
  void PickRotating(const std::vector<PageView>& views, const std::vector<char*>& candidates, size_t total,
                    const std::unordered_set<uint64_t>& moved_now, std::vector<char*>* next);
  uint64_t ArmAndWatch(const std::vector<char*>& next, const std::vector<PageView>& views);

  // The write scan (TIERMEM_TRACK=scan; migrator_track.cc). StartTrack, from Start: opens the
  // scan tracker (a kernel with neither mechanism: a warning, and the runtime goes on without).
  void StartTrack();
  // The round's scan: starts tracking the regions seen since the last round, reads the next
  // window of config_.track_pages pages (soft-dirty: every live page) and appends a write sample
  // per written page to `samples`. Returns the samples appended.
  uint64_t TrackRound(uint64_t now, std::vector<AccessSample>* samples);
  // The round's samples into the policy's heat, the write scan's appended first when it runs;
  // returns the pages the scan found written.
  uint64_t RecordSamples(uint64_t now, std::vector<AccessSample>* samples);
  // Whether the scan found the page written at its latest scan of it (false when not tracked):
  // such a page is in use, and the access sample leaves it out.
  bool WrittenLately(uint64_t key) const;
  // The pages a sampled access stands for (its weight's numerator): of `population`, the share
  // the sample could arm, i.e. `candidates` less those the write scan found written.
  uint64_t ArmablePopulation(const std::vector<char*>& candidates, uint64_t population) const;
  // TrackRound's window: `pages` live pages from the cursor (`whole`: from the start), as
  // track_spans_, their written bits cleared. TrackedIndex: the tracked region holding `addr`, -1.
  void TrackWindow(uint64_t pages, bool whole);
  int TrackedIndex(uintptr_t addr) const;
  // Whether a page the scan found written holds live data (not freed, not held free by the heap):
  // only those become write samples.
  static bool LiveData(const PageRecord& rec);
  // Whether `key` may not join the next sample: under watch, moved this round, or (counted in
  // track_sample_skips) written lately.
  bool KeepOutOfSample(uint64_t key, const std::unordered_set<uint64_t>& moved_now);
  // The heat log (TIERMEM_HEAT_LOG, heat_log.h): opened by Start, a round appended by
  // RecordSamples with every sample the round learned (the write scan's included); null when off.
  void OpenHeatLog();
  std::unique_ptr<HeatLog> heat_log_;
  std::unique_ptr<ScanTracker> track_;  // null unless the write scan runs (policy thread)
  size_t track_regions_ = 0;            // known_[0, track_regions_) are tracked
  size_t track_region_ = 0;             // where the next window starts: known_[track_region_],
  uint64_t track_page_ = 0;             //   this page
  // Per tracked region, a bit per page: written at the page's latest scan.
  std::vector<std::vector<uint64_t>> written_;
  std::vector<os::Span> track_spans_;  // TrackRound's scratch: the window, as spans
  std::vector<uint64_t> track_ends_;   // and each tracked region's live pages this round

  PageMover* mover_;
  const TieringConfig config_;
  ProcessCounters* counters_;
  std::unique_ptr<Policy> policy_;
  std::string mode_ = "off";
  std::atomic<bool> sampling_{false};  // sampler_ arms pages (modes protect and uffd)
  AccessSampler* sampler_ = nullptr;   // ProtectTracker::Get() or config_.uffd_sampler
  bool sample_always_ = false;
  uint64_t interval_ms_ = 20;
  uint64_t sample_pages_ = 256;
  uint64_t dram_budget_ = 0;  // TIERMEM_DRAM_LIMIT in pages; 0: none
  // DRAM's budget for the program's pages: dram_budget_ less the DRAM the runtime holds for
  // itself (PageMover::OwnPages, at most half of it), as of the last round (RefreshBudget).
  // Relief (the fault handler's AfterFaults too) and the sample go by it.
  uint64_t Budget() const { return budget_now_.load(std::memory_order_relaxed); }
  void RefreshBudget();  // policy thread, at the start of a round
  std::atomic<uint64_t> budget_now_{0};
  uint64_t own_pages_ = 0;  // the runtime's own DRAM pages at the last RefreshBudget; policy thread
  uint64_t budget_at_ns_ = 0;  // when RefreshBudget last looked; policy thread
  std::array<Known, 256> known_;
  size_t cursor_ = 0;                              // rotating sample position
  uint64_t scan_pages_ = 0;                        // TieringConfig::scan_pages
  uint64_t window_rounds_ = 0;                     // rounds that read a window (cursor seeds)
  size_t scan_region_ = 0;                         // where the next windowed scan starts:
  uint64_t scan_page_ = 0;                         //   known_[scan_region_], this page
  size_t victim_cursor_ = 0;                       // where the next victim window starts
  static constexpr size_t kVictimWindow = 16;      // pages looked at per victim checked
  static constexpr size_t kMinVictimWindow = 4096;
  bool armed_ = false;
  ViewIndex index_;  // policy thread only
  uint64_t last_armed_ = 0;       // pages armed in the round being collected
  uint64_t last_candidates_ = 0;  // pages they were chosen from

  // Relief: the ring of resident page keys (page address / page size), oldest at ring_tail_.
  // Its size, the ahead ring's and the fault log's go by the DRAM budget (ring_sizes.h); a page
  // that comes in while the ring is full is dropped from it.
  ZeroedArray<uint64_t> ring_;  // made by Start when relief is on (resident as it is used)
  uint64_t ring_head_ = 0, ring_tail_ = 0;  // under ring_lock_
  // The fault log: every page the pager made resident, as a ring entry (the key, the stamp, and
  // kLogAhead for a page fetched ahead), newest at log_head_; lossy (the oldest are overwritten,
  // ring_sizes.h says why its size is enough). Each round reads the entries since log_read_ as
  // fault samples, so a page that came back and left again between two rounds is still seen.
  static constexpr uint64_t kLogAhead = uint64_t{1} << 52;  // keys are < 2^52
  static constexpr uint64_t kLogKeyMask = kLogAhead - 1;
  ZeroedArray<uint64_t> log_;   // made by Start
  std::vector<uint64_t> fault_log_scratch_;  // the round's copy (policy thread)
  std::vector<uint64_t> watched_scratch_;    // TakeWatchedVictims' (policy thread)
  uint64_t log_head_ = 0;       // under ring_lock_
  uint64_t log_read_ = 0;       // policy thread only
  // Entries since the last call, oldest first (policy thread).
  void TakeFaultLog(std::vector<uint64_t>* out);
  // The same entries for the pages the prefetcher installed (kPageAhead), which relief takes
  // before the ring's: they are in both, and whichever is popped first finds the other stale.
  ZeroedArray<uint64_t> ahead_ring_;  // made by Start when relief is on
  uint64_t ahead_head_ = 0, ahead_tail_ = 0;  // under ring_lock_
  // A spin lock the pager's fault thread takes (OnResident). Its holders never allocate, fault
  // or block: inside fork() glibc holds its malloc locks until the fault thread has read the
  // fork event, so a holder waiting in malloc there would stop the fault thread, and the fork
  // with it (vectors are reserved before it is taken).
  std::atomic_flag ring_lock_ = ATOMIC_FLAG_INIT;
  bool relief_ = false;          // a DRAM budget and a remote tier: relief on
  bool plans_ = false;           // rounds run (every mode but off)
  uint64_t slack_pages_ = 0;
  std::atomic<bool> nudged_{false};
  std::atomic<bool> relieving_{false};  // MaybeRelieve between taking a nudge and its relief's end
  std::atomic<uint64_t> relief_epoch_{0};  // grows after each relief step
  std::atomic<bool> relief_stuck_{false};  // the last relief found nothing to evict
  // The remote tier refused the last relief (every server full): no relief, and no holding the
  // fault handler back, before this time (config_.clock's). Without it each fault batch popped
  // victims, failed to place them, and waited for relief in turn.
  std::atomic<uint64_t> relief_retry_ns_{0};
  std::mutex relief_mu_;
  std::optional<std::condition_variable> relief_cv_;
  std::atomic<uint32_t> held_back_{0};  // fault handlers waiting in AfterFaults now

  std::thread thread_;
  std::atomic<bool> started_{false};  // thread_ runs (readable from any thread, unlike thread_)
  std::mutex mu_;
  // Made by Start: a runtime with no policy thread (every plain preloaded program) never calls
  // libstdc++'s condition_variable constructor, which would fault in code at start.
  std::optional<std::condition_variable> cv_;
  bool stop_ = false;
  mutable std::mutex stats_mu_;
  MigratorStats stats_;
};

}  // namespace tiermem
