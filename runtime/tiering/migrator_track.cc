// The policy thread's write scan (TIERMEM_TRACK=scan; migrator.h, scan_tracker.h).
//
// Each round reads the written bit of a window of TIERMEM_TRACK_PAGES pages of the managed
// regions (the live part of each, [0, known end)), moving on from round to round and round
// again, and re-arms it in the same walk. A written page becomes a write sample whose weight is
// the rounds one pass over every live page takes (it stands for the accesses of the rounds its
// window was elsewhere), so heat comes from what the program writes for the price of the walk,
// not a fault per page. Reads leave no such bit: the access sample still finds them, but only
// among the pages the scan found unwritten (KeepOutOfSample), the candidates for demotion.
//
// Soft-dirty's clear takes no range (it clears every page of the process), so with it each
// round scans every live page: a window would lose the writes of the pages outside it.
//
// Registration: each managed region is registered whole, once, the first round after the region
// is known, and not protected: its pages are protected by their first scan
// (ScanTracker::Register). Without a remote tier, with the scan's own userfaultfd (write-protect
// only, asynchronous). With one, a range takes one descriptor: the pager's, opened WP_ASYNC
// (TieringConfig::scan_host), registers it for missing faults and write-protect. The scan then
// also clears the clean mark (kPageRemoteClean) of each page it finds written: it protects those
// pages again, and the pager trusts a clean mark only while the page shows protected.
#include <algorithm>

#include "base/log.h"
#include "base/os.h"
#include "runtime/tiering/migrator.h"

namespace tiermem {

void Migrator::StartTrack() {
  snprintf(counters_->track_mode, sizeof(counters_->track_mode), "off");
  if (!config_.track_scan) return;
  StatusOr<std::unique_ptr<ScanTracker>> t = NotSupported("");
  if (config_.scan_host != nullptr) {
    t = ScanTracker::Adopt(config_.scan_host);
  } else {
    StatusOr<ScanTracker::Mechanism> m = ScanTracker::Choose(os::ProbeTracking());
    t = m.ok() ? ScanTracker::Open(*m) : m.status();
  }
  if (!t.ok()) {
    TM_LOG_WARN("TIERMEM_TRACK=scan: %s; writes are learned by access samples only", t.status().ToString().c_str());
    return;
  }
  track_ = std::move(*t);
  const char* name = ScanTracker::Name(track_->mechanism());
  snprintf(counters_->track_mode, sizeof(counters_->track_mode), "%s", name);
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.track = name;
}

void Migrator::OpenHeatLog() {
  if (config_.heat_log.empty()) return;
  StatusOr<std::unique_ptr<HeatLog>> log =
      HeatLog::Open(config_.heat_log, static_cast<uint32_t>(config_.page_size),
                    static_cast<uint32_t>(config_.interval_ms), config_.heat_log_pages);
  if (!log.ok()) {
    TM_LOG_WARN("%s; no heat log", log.status().ToString().c_str());
    return;
  }
  heat_log_ = std::move(*log);
}

uint64_t Migrator::TrackRound(uint64_t now, std::vector<AccessSample>* samples) {
  const uint64_t t0 = os::MonotonicNanos();
  const size_t page = config_.page_size;
  // Regions seen since the last round: registered whole, not protected (a write-protect's cost
  // goes by the range's length, the region's reservation; its pages count as written until
  // their first scan protects them).
  for (; track_regions_ < known_.size(); ++track_regions_) {
    Region* r = known_[track_regions_].region.load(std::memory_order_acquire);
    if (r == nullptr) break;
    if (Status s = track_->Register(r->base(), r->bytes()); !s.ok()) {
      TM_LOG_WARN("TIERMEM_TRACK=scan: the write scan stops: %s", s.ToString().c_str());
      track_.reset();
      return 0;
    }
    written_.emplace_back();
  }
  // Each region's live pages as of now (its known end only grows meanwhile; the rest is the
  // next round's).
  uint64_t live = 0;
  track_ends_.resize(track_regions_);
  for (size_t ki = 0; ki < track_regions_; ++ki) {
    const Region* r = known_[ki].region.load(std::memory_order_acquire);
    track_ends_[ki] = std::min(known_[ki].end.load(std::memory_order_acquire), r->pages());
    live += track_ends_[ki];
    if (written_[ki].size() * 64 < track_ends_[ki]) written_[ki].resize((track_ends_[ki] + 63) / 64);
  }
  if (live == 0) return 0;
  const bool whole = track_->mechanism() == ScanTracker::Mechanism::kSoftDirty || live <= config_.track_pages;
  TrackWindow(whole ? live : config_.track_pages, whole);
  // Each page's written bit is read once a pass: a write sample stands for the pass's rounds.
  const float weight = static_cast<float>(std::max<uint64_t>(1, live / config_.track_pages));
  const size_t before = samples->size();
  const bool clear_clean = config_.scan_host != nullptr;
  auto written = [&](uintptr_t start, uintptr_t end) {
    const int ki = TrackedIndex(start);
    if (ki < 0) return;
    const Region* r = known_[size_t(ki)].region.load(std::memory_order_relaxed);
    std::vector<uint64_t>& bits = written_[size_t(ki)];
    for (uintptr_t a = start; a < end; a += page) {
      const uint64_t i = r->PageIndex(reinterpret_cast<const char*>(a));
      PageRecord& rec = r->record(i);
      if (clear_clean) rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_acq_rel);
      if (!LiveData(rec)) continue;
      if (i / 64 < bits.size()) bits[i / 64] |= uint64_t{1} << (i % 64);
      samples->push_back({a / page, true, now, weight});
    }
  };
  StatusOr<size_t> scanned = track_->Scan(track_spans_.data(), track_spans_.size(), written);
  if (!scanned.ok()) {
    TM_LOG_WARN("TIERMEM_TRACK=scan: a scan failed: %s", scanned.status().ToString().c_str());
    scanned = size_t{0};
  }
  const uint64_t appended = samples->size() - before;
  counters_->track_pages_scanned.fetch_add(*scanned, std::memory_order_relaxed);
  counters_->track_written_pages.fetch_add(appended, std::memory_order_relaxed);
  counters_->track_scan_ns.fetch_add(os::MonotonicNanos() - t0, std::memory_order_relaxed);
  return appended;
}

bool Migrator::LiveData(const PageRecord& rec) {
  // A page written with no live block in it (freed since: the heap's free page, one it dropped,
  // a run given back) is no heat: sampled, each would take an entry in the policy's tables, the
  // runtime's own memory that counts against the DRAM limit, for a page nobody uses.
  if (rec.state.load(std::memory_order_acquire) == static_cast<uint8_t>(PageState::kFree)) return false;
  if (rec.tier.load(std::memory_order_relaxed) == kNoTier) return false;
  return (rec.flags.load(std::memory_order_relaxed) & kPageHeapFree) == 0;
}

void Migrator::TrackWindow(uint64_t pages, bool whole) {
  const size_t page = config_.page_size;
  track_spans_.clear();
  if (whole) track_region_ = track_page_ = 0;
  uint64_t left = pages;  // at most the live pages: one pass at most
  while (left > 0) {
    if (track_region_ >= track_regions_) track_region_ = 0, track_page_ = 0;
    const Region* r = known_[track_region_].region.load(std::memory_order_acquire);
    const uint64_t end = track_ends_[track_region_];
    const uint64_t n = std::min(left, end > track_page_ ? end - track_page_ : 0);
    if (n > 0) {
      track_spans_.push_back({r->PageAddress(track_page_), n * page});
      std::vector<uint64_t>& bits = written_[track_region_];  // cleared: this scan says anew
      for (uint64_t i = track_page_; i < track_page_ + n; ++i) bits[i / 64] &= ~(uint64_t{1} << (i % 64));
    }
    left -= n;
    track_page_ += n;
    if (track_page_ >= end) ++track_region_, track_page_ = 0;
  }
}

int Migrator::TrackedIndex(uintptr_t addr) const {
  for (size_t ki = 0; ki < track_regions_; ++ki) {
    if (known_[ki].region.load(std::memory_order_relaxed)->Contains(reinterpret_cast<const void*>(addr))) {
      return static_cast<int>(ki);
    }
  }
  return -1;
}

uint64_t Migrator::RecordSamples(uint64_t now, std::vector<AccessSample>* samples) {
  const size_t scan_from = samples->size();  // TrackRound appends the write scan's
  const uint64_t written = track_ != nullptr ? TrackRound(now, samples) : 0;
  if (heat_log_ != nullptr) heat_log_->Round(now, mover_->TierPages(Tier::kDram), *samples, scan_from);
  policy_->Record(*samples);
  return written;
}

bool Migrator::WrittenLately(uint64_t key) const {
  const uintptr_t addr = key * config_.page_size;
  const int ki = TrackedIndex(addr);
  if (ki < 0) return false;
  const uint64_t i = known_[size_t(ki)].region.load(std::memory_order_relaxed)->PageIndex(reinterpret_cast<const void*>(addr));
  const std::vector<uint64_t>& bits = written_[size_t(ki)];
  return i / 64 < bits.size() && ((bits[i / 64] >> (i % 64)) & 1) != 0;
}

bool Migrator::KeepOutOfSample(uint64_t key, const std::unordered_set<uint64_t>& moved_now) {
  if (policy_->WatchBusy(key) || moved_now.count(key)) return true;
  if (track_ == nullptr || !WrittenLately(key)) return false;
  counters_->track_sample_skips.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace tiermem
