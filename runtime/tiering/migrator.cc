#include "runtime/tiering/migrator.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "base/log.h"
#include "base/runtime_thread.h"
#include "base/os.h"
#include "backends/numa/numa_backend.h"
#include "runtime/tiering/round_pacer.h"
#include "runtime/tiering/tracker.h"

namespace tiermem {
Status CheckTrackOptions(const OptionValues& o) {
  if (std::string(o.track) != "scan" || (o.remote[0] == '\0' && o.remote_file[0] == '\0')) return Status::Ok();
  const std::string remote = o.remote[0] != '\0' ? "TIERMEM_REMOTE" : "TIERMEM_REMOTE_FILE";
  if (std::string(o.fork) == "share") {
    return InvalidArgument("TIERMEM_TRACK=scan with a remote tier (" + remote +
                           ") needs TIERMEM_FORK=fetch, not share (the default): the scan makes the pager's "
                           "write-protect asynchronous, and sharing pages with a child needs its writes reported "
                           "(docs/tiering.md, \"The write scan in the runtime\")");
  }
  if (std::string(o.sample_mode) == "uffd") {
    return InvalidArgument("TIERMEM_SAMPLE_MODE=uffd cannot run with TIERMEM_TRACK=scan and a remote tier (" + remote +
                           "): the soft sampler needs the write-protect faults the scan makes asynchronous; use "
                           "auto or protect");
  }
  return Status::Ok();
}

TieringConfig TieringConfigFromOptions(const OptionValues& o, size_t page_size, bool has_cxl,
                                       bool has_remote, bool preloaded, uint64_t max_armed,
                                       AccessSampler* uffd_sampler) {
  TieringConfig c;
  c.page_size = page_size;
  std::string mode = o.sample_mode;  // one of the table's choices, in lower case
  if (mode == "uffd" && uffd_sampler == nullptr) {
    c.mode_note = "TIERMEM_SAMPLE_MODE=uffd needs the remote tier's userfaultfd with write-protect and "
                  "kernel-mode faults (TIERMEM_REMOTE set, a reachable memory server, kernel 5.7+, not "
                  "UFFD_USER_MODE_ONLY); sampling by remote faults only";
    mode = "faults";
  }
  c.interval_ms = std::clamp<uint64_t>(o.sample_interval_ms, 1, 3'600'000);  // at most an hour
  c.sample_pages = std::min<uint64_t>(o.sample_pages, max_armed);
  c.sample_half_life_ms = std::max<uint64_t>(1, o.sample_half_life_ms);
  const bool budgets = o.dram_limit != 0 || o.cxl_limit != 0;
  // Under the preload library, mode auto samples by soft eviction (uffd): pages cannot be
  // sampled by protection (unmodified programs pass heap pointers to read(2) and friends, which
  // would fail with EFAULT on a protected page), while a soft-evicted page's touch by a system
  // call waits for the pager's handler like any access. Without the pager's sampler (no remote
  // tier), by remote faults only.
  if (mode == "auto" && preloaded) mode = uffd_sampler != nullptr ? "uffd" : "faults";
  if (mode == "off" || (!budgets && mode != "protect" && mode != "uffd")) mode = "off";
  // The write scan runs in the policy thread's rounds: with no budget it learns heat only (no
  // sampling, no moves to plan), and with TIERMEM_SAMPLE_MODE=off it runs alone.
  if (std::string(o.track) == "scan" && mode == "off") mode = "faults";
  if (mode == "auto") mode = "protect";
  c.relief = o.dram_limit != 0 && has_remote;
  c.mode = mode;
  // A window of the page records by default only where a round arms no sample: with protection
  // sampling, rounds that keep their interval cost the program more than the whole-memory
  // rounds did (kv at 4 GiB: a third of the requests per second; docs/tiering.md).
  c.track_scan = std::string(o.track) == "scan";
  c.track_pages = o.track_pages;
  c.heat_log = o.heat_log;
  c.heat_log_pages = o.heat_log_pages;
  c.scan_pages = o.scan_pages != 0 ? std::max<uint64_t>(o.scan_pages, 1024) : mode == "faults" ? 32768 : 0;
  c.evict_background = o.evict_background;
  c.relief_background = o.relief_background;  // in effect only with evict_background (Relieve)
  c.policy_cpu_percent = o.policy_cpu;
  c.sample_always = std::string(o.sample_mode) == mode && (mode == "protect" || mode == "uffd");
  c.uffd_sampler = mode == "uffd" ? uffd_sampler : nullptr;
  PolicyConfig& pc = c.policy;
  pc.budget_pages = {o.dram_limit / page_size, o.cxl_limit / page_size, 0};
  pc.present = {true, has_cxl, has_remote};
  pc.half_life_ms = static_cast<double>(c.sample_half_life_ms);
  pc.min_residence_ms = 2.0 * pc.half_life_ms;
  pc.max_moves_per_s = static_cast<double>(std::max<uint64_t>(1, o.migrate_rate));
  // At most two rounds' worth per plan, so a round never runs far past its interval.
  pc.max_burst = std::max(pc.max_moves_per_s * static_cast<double>(c.interval_ms) * 2 / 1000, 64.0);
  return c;
}

Migrator::Migrator(PageMover* mover, TieringConfig config, ProcessCounters* counters)
    : mover_(mover), config_(std::move(config)), counters_(counters) {}

Migrator::~Migrator() { Stop(); }

Status Migrator::Start() {
  if (!config_.mode_note.empty()) TM_LOG_WARN("%s", config_.mode_note.c_str());
  std::string mode = config_.mode;
  interval_ms_ = config_.interval_ms;
  sample_pages_ = config_.sample_pages;
  scan_pages_ = config_.scan_pages;
  const PolicyConfig& pc = config_.policy;
  dram_budget_ = pc.budget_pages[static_cast<int>(Tier::kDram)];
  budget_now_.store(dram_budget_, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    DetectPebs(&stats_.pebs);
  }
  relief_ = config_.relief;
  snprintf(counters_->track_mode, sizeof(counters_->track_mode), "off");
  if (mode == "off" && !relief_) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.mode = "off";
    snprintf(counters_->sampling_mode, sizeof(counters_->sampling_mode), "off");
    return Status::Ok();
  }
  const RingSizes rings = RingSizesFor(dram_budget_);  // counted in the limit as they are written
  TIERMEM_RETURN_IF_ERROR(log_.Reset(rings.log).WithContext("tiering: the fault log"));
  if (relief_) {
    // The slack: the larger of 4 MiB and 1/32 of the budget (docs/tiering.md, "DRAM limit").
    slack_pages_ = std::max<uint64_t>((4u << 20) / config_.page_size, dram_budget_ / 32);
    TIERMEM_RETURN_IF_ERROR(ring_.Reset(rings.relief).WithContext("tiering: the relief ring"));
    TIERMEM_RETURN_IF_ERROR(ahead_ring_.Reset(rings.ahead).WithContext("tiering: the relief ring"));
    relief_cv_.emplace();
  }
  sample_always_ = config_.sample_always;
  if (mode == "protect") {
    Status s = ProtectTracker::Get().Install();
    if (!s.ok()) {
      TM_LOG_WARN("access sampling unavailable (%s); tiering uses remote faults only",
                  s.ToString().c_str());
      mode = "faults";
    } else {
      sampler_ = &ProtectTracker::Get();
    }
  } else if (mode == "uffd") {
    sampler_ = config_.uffd_sampler;  // TieringConfigFromOptions chose uffd only with one
  }
  sampling_ = sampler_ != nullptr;
  StartTrack();
  OpenHeatLog();
  mode_ = mode;
  plans_ = mode != "off";
  policy_ = std::make_unique<Policy>(pc);
  // Confirmation of DRAM victims (Round): with a CXL tier, a page sampled one round untouched
  // (the QEMU guest runs slow rounds); without one, DRAM pages under watch stay protected from
  // round to round until touched and are confirmed cold after a half-life (at least one round,
  // at most ten): a page in use is touched long before. Not with a heat log (`tiermem advise`'s
  // record): the watch keeps pages caught in use out of the sample and untouched ones armed, so
  // the sample would not be drawn alike from the pages its weight stands for (docs/advise.md).
  const bool carry = !pc.present[static_cast<int>(Tier::kCxl)] && dram_budget_ != 0 && config_.heat_log.empty();
  policy_->ConfigureWatch(
      carry, carry ? std::max(interval_ms_, std::min<uint64_t>(config_.sample_half_life_ms, 10 * interval_ms_)) * 1'000'000
                   : 0);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.mode = mode_;
  }
  snprintf(counters_->sampling_mode, sizeof(counters_->sampling_mode), "%s", mode_.c_str());
  counters_->policy_interval_ms.store(interval_ms_, std::memory_order_relaxed);
  stop_ = false;
  cv_.emplace();
  NewRuntimeThreadSignals quiet;  // the program's signal handlers never run there
  thread_ = std::thread([this] {
    OnRuntimeThreadStart();  // its own allocations never come from evictable pages
    Loop();
  });
  started_.store(true, std::memory_order_release);
  TM_LOG_INFO("tiering: policy thread started (sampling %s, %llu pages per %llu ms)",
              mode_.c_str(), static_cast<unsigned long long>(sample_pages_),
              static_cast<unsigned long long>(interval_ms_));
  return Status::Ok();
}

void Migrator::Stop() {
  if (!thread_.joinable()) return;
  started_.store(false, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_->notify_all();
  if (relief_cv_) {
    std::lock_guard<std::mutex> lock(relief_mu_);
    relief_cv_->notify_all();  // a fault handler held back by AfterFaults goes on
  }
  thread_.join();
  if (sampling_) sampler_->DisarmAll();
  track_.reset();  // its userfaultfd closed: the regions' pages are plain writable pages again
}

void Migrator::OnAllocate(Region* region, uint64_t first, uint64_t npages) {
  const uint64_t end = first + npages;
  for (Known& k : known_) {
    Region* r = k.region.load(std::memory_order_acquire);
    if (r == nullptr) {
      Region* expected = nullptr;
      if (!k.region.compare_exchange_strong(expected, region, std::memory_order_acq_rel) &&
          expected != region) {
        continue;
      }
      r = region;
    }
    if (r != region) continue;
    uint64_t cur = k.end.load(std::memory_order_relaxed);
    while (cur < end && !k.end.compare_exchange_weak(cur, end, std::memory_order_acq_rel)) {
    }
    return;
  }
}

void Migrator::OnFree(Region* region, uint64_t first, uint64_t npages) {
  // Freed pages must not stay protected: the next owner may hand them to a system call. (The
  // soft sampler's pages are given up by the pager's OnFree, which follows.)
  if (sampling_.load(std::memory_order_relaxed) && running() && sampler_ == &ProtectTracker::Get()) {
    sampler_->Release(region->PageAddress(first), npages * region->page_size());
  }
}

AccessSampler* Migrator::protecting_sampler() const {
  return running() && sampler_ == &ProtectTracker::Get() ? sampler_ : nullptr;
}

void Migrator::ReleaseSampled(const void* addr, size_t len) {
  if (sampling_.load(std::memory_order_relaxed) && running()) sampler_->Release(addr, len);
}

MigratorStats Migrator::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

void Migrator::Loop() {
  Clock& clock = *config_.clock;
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t next_round = clock.NowNanos();
  RoundPacer pacer(config_.policy_cpu_percent, interval_ms_ * 1'000'000);
  uint64_t cpu0 = 0;
  os::ThreadCpuNanos(&cpu0);
  pacer.Start(clock.NowNanos(), cpu0);
  while (!stop_) {
    lock.unlock();
    RefreshBudget();
    lock.lock();
    if (plans_ && clock.NowNanos() >= next_round) {
      lock.unlock();
      next_round = PacedRound(pacer);
      lock.lock();
    }
    if (!plans_) next_round = clock.NowNanos() + interval_ms_ * 1'000'000;
    clock.WaitUntil(*cv_, lock, next_round, [this] { return stop_ || nudged_.load(std::memory_order_acquire); });
    if (stop_) break;
    lock.unlock();
    MaybeRelieve();
    if (uint64_t cpu; os::ThreadCpuNanos(&cpu) == 0) counters_->policy_cpu_ns.store(cpu, std::memory_order_relaxed);
    lock.lock();
  }
  lock.unlock();
  SettleEvictions();  // the writes queued last are the mover's ticket's until waited for
}

uint64_t Migrator::PacedRound(RoundPacer& pacer) {
  const uint64_t start = os::MonotonicNanos();
  const bool idle = Idle();
  if (idle) counters_->policy_idle_rounds.fetch_add(1, std::memory_order_relaxed);
  const bool busy = !idle && Round();
  counters_->policy_round_time.Record(os::MonotonicNanos() - start);  // the policy's cost, per round
  const uint64_t end = config_.clock->NowNanos();
  uint64_t cpu = 0;
  if (os::ThreadCpuNanos(&cpu) == 0) counters_->policy_cpu_ns.store(cpu, std::memory_order_relaxed);
  // Nothing to do (no plan, no sampling): look again less often, so an idle runtime with a
  // large heap costs little. A round past the thread's CPU share: later still (RoundPacer).
  const uint64_t gap = (busy ? interval_ms_ : interval_ms_ * 5) * 1'000'000;
  const uint64_t next = pacer.NextRound(end, cpu, !busy);
  if (next > end + gap) {
    counters_->policy_paced_rounds.fetch_add(1, std::memory_order_relaxed);
    counters_->policy_paced_ns.fetch_add(next - end - gap, std::memory_order_relaxed);
  }
  return next;
}

bool Migrator::SamplingWanted(uint64_t dram_pages, uint64_t lower_pages) const {
  if (sample_always_) return true;
  if (dram_budget_ == 0) return lower_pages > 0;
  return lower_pages > 0 || dram_pages * 4 >= Budget() * 3;
}

bool Migrator::Idle() const {
  if (sample_always_ || armed_ || track_ != nullptr || dram_budget_ == 0) return false;
  if (policy_->config().present[static_cast<int>(Tier::kCxl)]) return false;
  if (sampler_ != nullptr && sampler_->carried() > 0) return false;
  if (mover_->RemoteWritten() || mover_->EvictionsPending() != 0) return false;
  return !SamplingWanted(mover_->TierPages(Tier::kDram), 0);
}

void Migrator::RefreshBudget() {
  // Once an interval (the loop runs at every nudge from the fault handler as well).
  const uint64_t now = config_.clock->NowNanos();
  if (dram_budget_ == 0 || now < budget_at_ns_ + interval_ms_ * 1000000) return;
  budget_at_ns_ = now;
  // DRAM's count is of resident pages: what the program allocated and never touched, or the
  // kernel dropped, is left out (and what it touched since is counted again) before the budget
  // is compared with it. A round whose plan would demote (DRAM and the runtime's own pages above
  // the policy's high watermark) counts as relief does before it evicts: DRAM's count may be
  // over by pages allocated and never looked at (PageMover::UnseenPages).
  const bool demoting = policy_->AboveHighWatermark(Tier::kDram, mover_->TierPages(Tier::kDram) + own_pages_);
  mover_->CountResident(demoting ? PageMover::CountWhen::kBeforeEviction : PageMover::CountWhen::kDue);
  // At most half the limit: a runtime that somehow held more would otherwise leave the program
  // no DRAM at all; the rest shows as DRAM over its limit.
  const uint64_t own = mover_->OwnPages();
  own_pages_ = std::min(own, dram_budget_ / 2);
  budget_now_.store(dram_budget_ - own_pages_, std::memory_order_relaxed);
  counters_->runtime_own_bytes.store(own * config_.page_size, std::memory_order_relaxed);
  // Pages a count found touched (a run handed out untouched and written: the kernel backed it,
  // no fault was seen) can put DRAM over its budget with no fault handler to nudge relief.
  if (relief_ && DramPagesSeen() > Budget()) nudged_.store(true, std::memory_order_release);
}

bool Migrator::Round() {
  RoundReport r;
  // The last round's evictions first: the counts and records this round reads are then settled.
  r.t_settle = os::MonotonicNanos();
  SettleEvictions();
  // Scan: the sampler's round and the page records.
  const uint64_t now = os::MonotonicNanos();
  r.t_start = now;
  r.relief_ns0 = relief_ns_;
  std::vector<AccessSample> samples;
  std::vector<uint64_t> untouched;
  r.tracked = CollectSamples(now, &samples, &untouched);
  // Page records: every live page's, or a window of them (migrator_scan.cc), with the pages the
  // sampler named this round wherever they are.
  named_keys_.clear();
  for (size_t k = 0; k < r.tracked; ++k) named_keys_.push_back(samples[k].page);
  named_keys_.insert(named_keys_.end(), untouched.begin(), untouched.end());
  RoundScan& scan = scan_;
  r.t_scan = os::MonotonicNanos();
  Scan(named_keys_, &scan);
  r.scan_ns = os::MonotonicNanos() - r.t_scan;
  r.fault_samples = AddFaultSamples(now, &samples);
  // Sampled accesses stand for the pages not sampled this round: weight = the candidates the
  // sample could arm (ArmablePopulation) per armed page, the inverse sampling probability;
  // faults are always seen (weight 1).
  if (r.tracked > 0 && last_armed_ > 0) {
    const float w = std::max(1.0f, static_cast<float>(last_candidates_) / static_cast<float>(last_armed_));
    for (size_t k = 0; k < r.tracked; ++k) samples[k].weight = w;
  }
  r.written = RecordSamples(now, &samples);  // with the write scan's
  MaybeRelieve();
  // Plan: every placement decision is the Policy's.
  const bool cxl = policy_->config().present[static_cast<int>(Tier::kCxl)];
  Policy::RoundInput in;
  const RoundViews lookup(index_, scan.views);
  in.views = scan.views;
  in.lookup = &lookup;
  in.unlisted = scan.unlisted;
  in.reserved[static_cast<int>(Tier::kDram)] = own_pages_;
  in.unseen[static_cast<int>(Tier::kDram)] = mover_->UnseenPages();
  // Relief's victims since the scan began may still be DRAM pages in its views: the plan leaves
  // them out of DRAM's count, so that each page is counted out once, whoever takes it out.
  in.left_dram = relieved_since_scan_;
  in.samples = samples.size();
  in.sampling = sampling_;
  const uint64_t t_plan = os::MonotonicNanos();
  std::vector<PageMove> moves = policy_->PlanRound(in, now, &r.ps);
  r.plan_ns = os::MonotonicNanos() - t_plan;
  r.moves = moves.size();
  // Execute, through the PageMover; then the next sample.
  std::unordered_set<uint64_t> moved_now;
  r.ex = Execute(moves, cxl, now, &moved_now);
  r.t_arm = os::MonotonicNanos();
  r.armed = ArmNextSample(now, scan.views, scan.candidates, scan.population, scan.dram_pages, scan.lower_pages,
                          r.fault_samples, moved_now);
  r.t_end = os::MonotonicNanos();
  if (LogEnabled(LogLevel::kDebug)) LogRound(r, samples, scan);
  CountRound(r, scan);
  return r.armed > 0 || r.moves > 0 || r.ps.deferred > 0 || r.fault_samples > 0 || r.written > 0;
}

uint64_t Migrator::CollectSamples(uint64_t now, std::vector<AccessSample>* samples, std::vector<uint64_t>* untouched) {
  if (sampling_ && armed_) {
    sampler_->Collect(now, samples, untouched, [this](uint64_t k) { return policy_->Carried(k); });
    armed_ = false;
  }
  policy_->Watched(*untouched, *samples, now);  // confirmations of cold pages, the carried watch
  // A sampled access is an access: a page fetched ahead and caught in use is no longer relief's
  // first victim.
  const size_t page = config_.page_size;
  for (const AccessSample& a : *samples) {
    char* addr = reinterpret_cast<char*>(a.page * page);
    if (Region* r = RegionOf(addr)) {
      r->record(r->PageIndex(addr)).flags.fetch_and(uint8_t(~kPageAhead), std::memory_order_relaxed);
    }
  }
  return samples->size();
}

uint64_t Migrator::AddFaultSamples(uint64_t now, std::vector<AccessSample>* samples) {
  // Pages the pager brought back since the last round (the fault log): a sample each, whether
  // the page is still here or already gone again. Pages fetched ahead by the prefetcher are not:
  // nobody touched them yet, and counting them gave streams of cold pages the heat of the hot
  // set they then pushed out.
  std::vector<uint64_t>& log = fault_log_scratch_;
  TakeFaultLog(&log);
  uint64_t added = 0;
  for (uint64_t e : log) {
    if (e & kLogAhead) continue;
    const uint64_t key = e & kLogKeyMask;
    samples->push_back({key, false, now});
    policy_->FaultedBack(key, now);
    ++added;
  }
  return added;
}

void Migrator::LogRound(const RoundReport& r, const std::vector<AccessSample>& samples, const RoundScan& scan) {
  uint64_t cxl_samples = 0;  // accesses caught on the CXL tier
  for (size_t k = 0; k < r.tracked; ++k) {
    auto it = index_.Find(samples[k].page);
    cxl_samples += it != nullptr && scan.views[*it].tier == Tier::kCxl;
  }
  // One line per round at TIERMEM_LOG=debug: what the round saw, planned and did (diagnosis of
  // placement in slow guests; docs/tiering.md).
  const PlanStats& ps = r.ps;
  const auto ms = [](uint64_t ns) { return static_cast<double>(ns) / 1e6; };
  TM_LOG_DEBUG("tiering: round %llu dram=%llu cxl=%llu remote=%llu samples=%llu(cxl %llu) faults=%llu cold=%zu "
               "plan=%zu(-%llu/+%llu) held=%llu demoted=%llu promoted=%llu failed=%llu armed=%llu listed=%zu%s "
               "known=%zu ms=%.1f (settle %.1f collect %.1f scan %.1f relief %.1f plan %.1f moves %.1f arm %.1f)",
               static_cast<unsigned long long>(counters_->policy_rounds.load(std::memory_order_relaxed) + 1),
               static_cast<unsigned long long>(scan.dram_pages), static_cast<unsigned long long>(scan.cxl_pages),
               static_cast<unsigned long long>(scan.lower_pages - scan.cxl_pages),
               static_cast<unsigned long long>(r.tracked), static_cast<unsigned long long>(cxl_samples),
               static_cast<unsigned long long>(r.fault_samples),
               static_cast<size_t>(ps.confirmed_cold), static_cast<size_t>(ps.planned),
               static_cast<unsigned long long>(ps.demotions), static_cast<unsigned long long>(ps.promotions),
               static_cast<unsigned long long>(ps.held),
               static_cast<unsigned long long>(r.ex.demoted), static_cast<unsigned long long>(r.ex.promoted),
               static_cast<unsigned long long>(r.ex.failed), static_cast<unsigned long long>(r.armed),
               scan.views.size(), scan.whole ? "" : "(window)", policy_->tracked_pages(),
               ms(r.t_end - r.t_start), ms(r.t_start - r.t_settle), ms(r.t_scan - r.t_start), ms(r.scan_ns),
               ms(relief_ns_ - r.relief_ns0), ms(r.plan_ns), ms(r.ex.migrate_ns), ms(r.t_end - r.t_arm));
}

void Migrator::CountRound(const RoundReport& r, const RoundScan& scan) {
  ProcessCounters& c = *counters_;
  const auto add = [](std::atomic<uint64_t>& to, uint64_t n) { to.fetch_add(n, std::memory_order_relaxed); };
  add(c.policy_rounds, 1);
  add(c.policy_round_ns, os::MonotonicNanos() - r.t_start);
  add(c.samples, r.tracked);
  add(c.fault_samples, r.fault_samples);
  add(c.demotions, r.ex.demoted);
  add(c.promotions, r.ex.promoted);
  add(c.moves_failed, r.ex.failed);
  add(c.moves_deferred, r.ps.deferred);
  add(c.migrate_calls, r.ex.calls);
  add(c.migrate_ns, r.ex.migrate_ns);
  add(c.policy_records_read, scan.records_read);
  if (sampling_) c.pages_armed.store(sampler_->counters().armed, std::memory_order_relaxed);
  c.dram_unseen_bytes.store(mover_->UnseenPages() * config_.page_size, std::memory_order_relaxed);
  if (!scan.whole) {
    add(c.policy_window_rounds, 1);
    if (scan.window_listed > c.policy_window_listed_max.load(std::memory_order_relaxed)) {
      c.policy_window_listed_max.store(scan.window_listed, std::memory_order_relaxed);  // this thread alone writes it
    }
  }
  std::lock_guard<std::mutex> lock(stats_mu_);
  if (!r.ex.last_error.empty()) stats_.last_error = r.ex.last_error;
}

}  // namespace tiermem
