// What the tiering subsystem needs from the rest of the runtime, in two pieces:
//
// - TieringConfig: the policy thread's whole configuration, built once by the core from the
//   option table (TieringConfigFromOptions) before the thread starts. Nothing in tiering reads
//   options or asks the core for them afterwards.
// - PageMover: the narrow door through which the policy thread carries out a plan. The core
//   (Runtime::Impl) implements it; tiering reads the page records (pages/region.h) but never
//   includes runtime_impl.h, so the direction core -> tiering holds (docs/architecture.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/options.h"
#include "runtime/pages/sampler.h"
#include "runtime/tiering/policy.h"
#include "runtime/tiering/scan_tracker.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {

struct TieringConfig {
  // The sampling mode in effect: "protect", "uffd", "faults" or "off" ("auto" is resolved
  // here).
  std::string mode = "off";
  bool sample_always = false;  // TIERMEM_SAMPLE_MODE=protect|uffd: sample even with nothing to decide
  // Mode uffd: the pager's soft sampler (runtime/paging/soft_sampler.h), which outlives the
  // policy thread. Null in every other mode.
  AccessSampler* uffd_sampler = nullptr;
  std::string mode_note;        // a warning to log at start ("" when none)
  size_t page_size = 4096;
  uint64_t interval_ms = 20;    // one sampling round and one plan per interval
  // What the policy thread's schedule goes by: when rounds start (RoundPacer), the budget's
  // refresh, relief's patience and its pause while the remote tier is full. Never null; outlives
  // the thread. The policy's own times (heat, the watch) stay on os::MonotonicNanos, the clock
  // the samplers stamp their samples with (a signal handler takes no clock from here).
  Clock* clock = &SystemClock();
  uint64_t sample_pages = 256;  // pages armed per round
  // Resident pages a round lists at most (a window of the page records that moves on each
  // round; migrator_scan.cc); 0: every live page each round.
  uint64_t scan_pages = 0;
  // TIERMEM_TRACK=scan: each round the write scan (scan_tracker.h) reads track_pages pages of the
  // managed regions, folds the written ones into heat as write samples, and the access sample
  // is drawn only from pages it found unwritten (migrator_track.cc).
  bool track_scan = false;
  uint64_t track_pages = 262144;
  // TIERMEM_HEAT_LOG and its cap (heat_log.h): "" = no heat log.
  std::string heat_log;
  uint64_t heat_log_pages = 16384;

  // With a remote tier: the pager, whose userfaultfd (opened WP_ASYNC) the scan registers and
  // scans through (ScanTracker::Adopt), and whose clean marks the scan clears on the pages it
  // finds written (migrator_track.cc). Null: the scan has a descriptor of its own. Outlives the
  // policy thread.
  ScanHost* scan_host = nullptr;
  // The plan's evictions are queued to the pager's writer (PageMover::EvictPagesBackground) and
  // settled before the next round, relief, and the thread's end; false: each round waits for them.
  bool evict_background = true;
  // Budget relief's evictions too (TIERMEM_RELIEF_BACKGROUND): relief counts DRAM less the pages
  // in flight (PageMover::EvictionsPending) and goes on; the fault handler it holds back is
  // woken as windows finish. false (the default): relief waits for each batch's writes. Needs
  // evict_background.
  bool relief_background = false;
  // Percent of one CPU the policy thread may use (TIERMEM_POLICY_CPU; RoundPacer); 0: no bound.
  uint64_t policy_cpu_percent = 0;
  uint64_t sample_half_life_ms = 200;
  // Budget relief (migrator.h): a DRAM budget and a remote tier. The thread then runs in every
  // mode, "off" included (relief only: no sampling, no plans).
  bool relief = false;
  PolicyConfig policy;          // budgets (pages), tiers present, half-life, rate limit
};

// Builds the configuration from the option table. `preloaded`: the process runs under the
// preload library (mode auto then samples by soft eviction where `uffd_sampler` is given, by
// remote faults otherwise; see the comment in the .cc). `max_armed`: the samplers' limit on
// pages armed at once. `uffd_sampler`: the pager's soft sampler, null without one.
// TIERMEM_TRACK=scan with a remote tier (TIERMEM_REMOTE or TIERMEM_REMOTE_FILE) where it cannot
// run: the pager's userfaultfd is then asynchronous for write-protect, so neither fork sharing
// (TIERMEM_FORK=share, the default: a child's writes must be reported) nor the soft sampler
// (TIERMEM_SAMPLE_MODE=uffd) can work. InvalidArgument naming the options then; Ok otherwise.
Status CheckTrackOptions(const OptionValues& o);

TieringConfig TieringConfigFromOptions(const OptionValues& o, size_t page_size, bool has_cxl,
                                       bool has_remote, bool preloaded, uint64_t max_armed,
                                       AccessSampler* uffd_sampler = nullptr);

// Thread safety: called from the policy thread only (TierPages: any thread), while the runtime runs (the core stops the
// thread before it tears anything down). Each call is a whole, synchronous move, but for
// EvictPagesBackground, whose writes WaitEvictions settles.
class PageMover {
 public:
  // Moves the pages of [addr, addr+len) (inside live allocations) to `tier`.
  virtual StatusOr<MigrateResult> Migrate(void* addr, size_t len, Tier tier) = 0;
  // Evicts scattered live pages (page addresses, ascending) to the remote tier, sharing round
  // trips among them.
  virtual StatusOr<MigrateResult> EvictPages(const std::vector<char*>& pages) = 0;
  // The same without waiting for the servers: the pages are claimed (no longer resident for the
  // page records: in flight), write-protected and queued to the pager's writer, and pages_moved
  // counts them. They leave DRAM as their writes are acknowledged; a write that fails gives its
  // pages back local and intact. Every call is followed by WaitEvictions before the runtime
  // stops. The default waits (a mover without a background writer).
  virtual StatusOr<MigrateResult> EvictPagesBackground(const std::vector<char*>& pages) { return EvictPages(pages); }
  // Waits for the writes EvictPagesBackground queued since the last call; `became_remote`: the
  // pages that left (0 when none was queued). Returns the first failure (the pages of its
  // window are local again).
  virtual Status WaitEvictions(uint64_t* became_remote) {
    *became_remote = 0;
    return Status::Ok();
  }
  // The pages EvictPagesBackground queued whose writes are not finished yet: still resident
  // (TierPages counts them) until they leave. Any thread.
  virtual uint64_t EvictionsPending() const { return 0; }
  // Moves scattered live pages (page addresses, ascending) to a NUMA tier (kDram or kCxl),
  // sharing move_pages calls among them; pages not resident here (remote, in flight) are
  // counted as not resident and left where they are.
  virtual StatusOr<MigrateResult> MovePages(const std::vector<char*>& pages, Tier tier) = 0;
  // NUMA nodes of a tier (empty when absent).
  virtual const std::vector<int>& TierNodes(Tier tier) const = 0;
  // Pages the tier holds now (allocated there, or faulted back into DRAM). Any thread.
  virtual uint64_t TierPages(Tier tier) const = 0;
  // Whether any remote page has a copy on a server (false while the remote tier holds only
  // pages allocated there and never written: their first touch is a zero fill, and there is
  // nothing to bring back). Any thread.
  virtual bool RemoteWritten() const { return TierPages(Tier::kRemote) != 0; }
  // DRAM pages the runtime holds for its own use that count against DRAM's budget (0: none).
  virtual uint64_t OwnPages() const { return 0; }
  // Brings TierPages(kDram) to the pages resident in DRAM: local DRAM pages the kernel has not
  // backed (allocated and never touched, or dropped) stop counting, and such pages touched
  // since count again. Costs a look at every live page (mincore and its record), so it may
  // skip a call to keep that cost a small share of the caller's time: a small share of the
  // policy thread's time when due, a larger one before an eviction, which costs far more if
  // the count is wrong. The policy thread's.
  enum class CountWhen { kDue, kBeforeEviction };
  virtual void CountResident(CountWhen /*when*/) {}
  // DRAM pages counted when they were allocated, no count has looked at since, and likely never
  // touched (part of TierPages(kDram), an estimate from what the last counts found): DRAM may be
  // over its budget by the count and not in fact. Any thread.
  virtual uint64_t UnseenPages() const { return 0; }

 protected:
  ~PageMover() = default;
};

}  // namespace tiermem
