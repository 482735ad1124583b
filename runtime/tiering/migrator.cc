#include "runtime/tiering/migrator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "base/log.h"
#include "base/runtime_thread.h"
#include "base/os.h"
#include "backends/numa/numa_backend.h"
#include "runtime/tiering/tracker.h"

namespace tiermem {
namespace {

constexpr uint8_t kStateLocal = static_cast<uint8_t>(PageState::kLocal);
constexpr uint8_t kStateRemote = static_cast<uint8_t>(PageState::kRemote);
constexpr uint8_t kStateFree = static_cast<uint8_t>(PageState::kFree);
constexpr uint8_t kStateInFlight = static_cast<uint8_t>(PageState::kInFlight);

constexpr uint64_t kHotRecheck = 25;  // a page caught in use is watched again after 25 confirm times

}  // namespace

TieringConfig TieringConfigFromOptions(const OptionValues& o, size_t page_size, bool has_cxl,
                                       bool has_remote, bool preloaded, uint64_t max_armed,
                                       AccessSampler* uffd_sampler) {
  TieringConfig c;
  c.page_size = page_size;
  std::string mode = o.sample_mode;
  if (mode != "auto" && mode != "protect" && mode != "uffd" && mode != "faults" && mode != "off") {
    c.mode_note = "TIERMEM_SAMPLE_MODE=\"" + mode + "\" is not auto, protect, uffd, faults or off; using auto";
    mode = "auto";
  }
  if (mode == "uffd" && uffd_sampler == nullptr) {
    c.mode_note = "TIERMEM_SAMPLE_MODE=uffd needs the remote tier's userfaultfd with write-protect and "
                  "kernel-mode faults (TIERMEM_REMOTE set, a reachable memory server, kernel 5.7+, not "
                  "UFFD_USER_MODE_ONLY); sampling by remote faults only";
    mode = "faults";
  }
  c.interval_ms = std::max<uint64_t>(1, o.sample_interval_ms);
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
  if (mode == "auto") mode = "protect";
  c.relief = o.dram_limit != 0 && has_remote;
  c.mode = mode;
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

Migrator::Migrator(PageMover* mover, TieringConfig config, PolicyCounters* counters)
    : mover_(mover), config_(std::move(config)), counters_(counters) {}

Migrator::~Migrator() { Stop(); }

Status Migrator::Start() {
  if (!config_.mode_note.empty()) TM_LOG_WARN("%s", config_.mode_note.c_str());
  std::string mode = config_.mode;
  interval_ms_ = config_.interval_ms;
  sample_pages_ = config_.sample_pages;
  const PolicyConfig& pc = config_.policy;
  dram_budget_ = pc.budget_pages[static_cast<int>(Tier::kDram)];
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    DetectPebs(&stats_.pebs);
  }
  relief_ = config_.relief;
  if (mode == "off" && !relief_) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.mode = "off";
    snprintf(counters_->mode, sizeof(counters_->mode), "off");
    return Status::Ok();
  }
  log_.assign(kLogPages, 0);
  if (relief_) {
    // The slack: the larger of 4 MiB and 1/32 of the budget (docs/tiering.md, "DRAM limit").
    slack_pages_ = std::max<uint64_t>((4u << 20) / config_.page_size, dram_budget_ / 32);
    ring_.assign(kRingPages, 0);
    ahead_ring_.assign(kAheadRingPages, 0);
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
  mode_ = mode;
  plans_ = mode != "off";
  policy_ = std::make_unique<Policy>(pc);
  // Confirmation of DRAM victims (Round): with a CXL tier, a page sampled one round untouched
  // (the QEMU guest runs slow rounds); without one, DRAM pages under watch stay protected from
  // round to round until touched and are confirmed cold after a half-life (at least one round,
  // at most ten): a page in use is touched long before.
  carry_ = !pc.present[static_cast<int>(Tier::kCxl)] && dram_budget_ != 0;  // victims need a budget
  confirm_ns_ = carry_ ? std::max(interval_ms_, std::min<uint64_t>(config_.sample_half_life_ms, 10 * interval_ms_)) *
                             1'000'000
                       : 0;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.mode = mode_;
  }
  snprintf(counters_->mode, sizeof(counters_->mode), "%s", mode_.c_str());
  counters_->interval_ms.store(interval_ms_, std::memory_order_relaxed);
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

void Migrator::ReleaseSampled(const void* addr, size_t len) {
  if (sampling_.load(std::memory_order_relaxed) && running()) sampler_->Release(addr, len);
}

MigratorStats Migrator::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  MigratorStats s = stats_;
  if (sampling_) s.pages_armed = sampler_->counters().armed;
  return s;
}

void Migrator::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  auto next_round = std::chrono::steady_clock::now();
  while (!stop_) {
    if (plans_ && std::chrono::steady_clock::now() >= next_round) {
      lock.unlock();
      const uint64_t start = os::MonotonicNanos();
      const bool busy = Round();
      counters_->round_time.Record(os::MonotonicNanos() - start);  // the policy's cost, per round
      if (uint64_t cpu; os::ThreadCpuNanos(&cpu) == 0) counters_->cpu_ns.store(cpu, std::memory_order_relaxed);
      lock.lock();
      // Nothing to do (no plan, no sampling): look again less often, so an idle runtime with a
      // large heap costs little (a round scans every live page record).
      next_round = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(busy ? interval_ms_ : interval_ms_ * 5);
    }
    if (!plans_) next_round = std::chrono::steady_clock::now() + std::chrono::milliseconds(interval_ms_);
    cv_->wait_until(lock, next_round, [this] { return stop_ || nudged_.load(std::memory_order_acquire); });
    if (stop_) break;
    lock.unlock();
    MaybeRelieve();
    if (uint64_t cpu; os::ThreadCpuNanos(&cpu) == 0) counters_->cpu_ns.store(cpu, std::memory_order_relaxed);
    lock.lock();
  }
}

bool Migrator::SamplingWanted(uint64_t dram_pages, uint64_t lower_pages) const {
  if (sample_always_) return true;
  if (dram_budget_ == 0) return lower_pages > 0;
  return lower_pages > 0 || dram_pages * 4 >= dram_budget_ * 3;
}

bool Migrator::Round() {
  const uint64_t now = os::MonotonicNanos();
  const size_t page = config_.page_size;
  std::vector<AccessSample> samples;
  AccessSampler* tracker = sampler_;
  std::vector<uint64_t> untouched;
  if (sampling_ && armed_) {
    tracker->Collect(now, &samples, &untouched,
                    [this](uint64_t k) { return carry_ && watch_since_.count(k) > 0; });
    armed_ = false;
  }
  // Pages sampled without an access for confirm_ns_ (or all last round): confirmed cold (victims
  // and block expansion take them). Pages under watch that were touched leave the watch.
  confirmed_cold_.clear();
  {
    std::unordered_map<uint64_t, uint64_t> still;
    for (uint64_t k : untouched) {
      auto it = watch_since_.find(k);
      if (it == watch_since_.end()) {
        confirmed_cold_.insert(k);  // sampled one whole round
        continue;
      }
      if (now - it->second >= confirm_ns_) confirmed_cold_.insert(k);
      still.insert(*it);  // still protected: the tracker carried it
    }
    watch_since_ = std::move(still);
    // A page caught in use is not put under watch again for a while (each check of a hot page
    // costs a protection fault); expired marks are dropped.
    if (carry_) {
      std::erase_if(hot_until_, [now](const auto& kv) { return kv.second <= now; });
      for (const AccessSample& a : samples) hot_until_[a.page] = now + kHotRecheck * confirm_ns_;
    }
  }
  const uint64_t tracked = samples.size();
  // A sampled access is an access: a page fetched ahead and caught in use is no longer relief's
  // first victim.
  for (const AccessSample& a : samples) {
    char* addr = reinterpret_cast<char*>(a.page * page);
    if (Region* r = RegionOf(addr)) {
      r->record(r->PageIndex(addr)).flags.fetch_and(uint8_t(~kPageAhead), std::memory_order_relaxed);
    }
  }

  // Page records of every live page.
  std::vector<PageView> views;
  ViewIndex& index = index_;  // page key -> views
  index.Clear();
  std::vector<char*> sample_candidates;
  uint64_t fault_samples = 0, dram_pages = 0, lower_pages = 0, cxl_pages = 0, remote_unlisted = 0;
  for (size_t ki = 0; ki < known_.size(); ++ki) {
    Region* r = known_[ki].region.load(std::memory_order_acquire);
    if (r == nullptr) break;
    const uint64_t end = std::min(known_[ki].end.load(std::memory_order_acquire), r->pages());
    bool pinned = false;
    index.AddRegion(r, reinterpret_cast<uintptr_t>(r->PageAddress(0)) / page, end);
    for (uint64_t i = 0; i < end; ++i) {
      if ((i & 0xffff) == 0xffff) MaybeRelieve();  // a long scan does not hold relief back
      const PageRecord& rec = r->record(i);
      const uint8_t st = rec.state.load(std::memory_order_acquire);
      if (st == kStateFree) continue;
      const uint8_t flags = rec.flags.load(std::memory_order_relaxed);
      if (flags & kPageRunHead) pinned = (flags & kPagePinned) != 0;
      const uint64_t key = reinterpret_cast<uintptr_t>(r->PageAddress(i)) / page;
      Tier tier;
      if (st == kStateRemote) {
        ++lower_pages, ++remote_unlisted;  // counted, not listed (Policy::Plan's `unlisted`)
        continue;
      } else if (st == kStateLocal || (st == kStateInFlight && (flags & kPageSampled))) {
        // (a page the soft sampler holds is resident on its tier: its bytes wait in a copy)
        const uint8_t tv = rec.tier.load(std::memory_order_relaxed);
        if (tv >= kNumTiers) continue;  // kNoTier: its run is being freed
        tier = static_cast<Tier>(tv);
        if (tier == Tier::kRemote) tier = Tier::kDram;  // faulted back in: remote pages land in DRAM
        if (!pinned) sample_candidates.push_back(r->PageAddress(i));
      } else {
        continue;  // in flight: the pager owns it this round
      }
      if (tier == Tier::kDram) {
        ++dram_pages;
      } else {
        ++lower_pages;
        cxl_pages += tier == Tier::kCxl;
      }
      index.Set(key, static_cast<uint32_t>(views.size()));
      views.push_back({key, tier, pinned});
    }
  }
  // Pages the pager brought back since the last round (the fault log): a sample each, whether
  // the page is still here or already gone again. Pages fetched ahead by the prefetcher are not:
  // nobody touched them yet, and counting them gave streams of cold pages the heat of the hot
  // set they then pushed out.
  {
    std::vector<uint64_t>& log = fault_log_scratch_;
    TakeFaultLog(&log);
    for (uint64_t e : log) {
      if (e & kLogAhead) continue;
      const uint64_t key = e & kLogKeyMask;
      samples.push_back({key, false, now});
      policy_->FaultedBack(key);
      ++fault_samples;
    }
  }
  // Sampled accesses stand for the pages not sampled this round: weight = candidates per armed
  // page (the inverse sampling probability); faults are always seen (weight 1).
  if (tracked > 0 && last_armed_ > 0) {
    const float w = std::max(1.0f, static_cast<float>(last_candidates_) / static_cast<float>(last_armed_));
    for (size_t k = 0; k < tracked; ++k) samples[k].weight = w;
  }
  policy_->Record(samples);
  MaybeRelieve();
  uint64_t cxl_samples = 0;  // for the debug line: accesses caught on the CXL tier
  const bool debug = LogEnabled(LogLevel::kDebug);
  for (size_t k = 0; debug && k < tracked; ++k) {
    auto it = index.Find(samples[k].page);
    cxl_samples += it != nullptr && views[*it].tier == Tier::kCxl;
  }
  PlanStats ps;
  // Nothing to decide while every page is in DRAM and DRAM is below its high watermark (no
  // demotion is due and nothing can be promoted): the plan, over every live page, is skipped,
  // so a runtime whose data fits costs one scan per idle round.
  const PolicyConfig& pc = policy_->config();
  const bool idle = lower_pages == 0 && samples.empty() && pc.budget_pages[0] != 0 &&
                    static_cast<double>(dram_pages) <= pc.high_watermark * static_cast<double>(pc.budget_pages[0]);
  std::vector<PlannedMove> plan;
  Policy::TierPageCounts unlisted{};
  unlisted[static_cast<int>(Tier::kRemote)] = remote_unlisted;
  if (!idle) plan = policy_->Plan(views, unlisted, now, &ps);

  // Second chance for DRAM's victims: while protection sampling runs, a DRAM page is demoted
  // only after it was watched without an access (confirmed cold: a whole round with a CXL tier,
  // confirm_ns_ without). A victim the policy picked by heat alone is replaced by a
  // confirmed-cold DRAM page (coldest first), or waits for a later round. Why heat alone is not
  // enough: a round may find DRAM far over its budget (pages faulted back while the last, slow
  // round ran), and then the policy's victims are pages of equal, decayed heat, hot ones
  // included; a hot page demoted to CXL is used there without a fault and found again only by
  // sampling. And a hot page is sampled once in seconds, so its heat has decayed long before
  // pages faulted in a moment ago, which look hotter. (Measurements: docs/tiering.md.)
  const bool cxl = policy_->config().present[static_cast<int>(Tier::kCxl)];
  uint64_t held_total = 0;
  if (sampling_) {
    std::unordered_set<uint64_t> in_plan;
    for (const PlannedMove& m : plan) in_plan.insert(m.page);
    // Confirmed-cold DRAM pages not in the plan, coldest first (under the carried watch: the
    // longest watched first); `partial`: watched without an access, not yet for confirm_ns_.
    std::vector<std::pair<double, uint64_t>> spare, partial;
    auto spare_page = [&](uint64_t k) {
      auto it = index.Find(k);
      return it != nullptr && !in_plan.count(k) && views[*it].tier == Tier::kDram &&
             !views[*it].pinned;
    };
    for (uint64_t k : confirmed_cold_) {
      if (!spare_page(k)) continue;
      auto w = watch_since_.find(k);
      spare.push_back({w != watch_since_.end() ? static_cast<double>(w->second) : policy_->Heat(k, now), k});
    }
    for (auto& [k, since] : watch_since_) {
      if (!confirmed_cold_.count(k) && spare_page(k)) partial.push_back({static_cast<double>(since), k});
    }
    std::sort(spare.begin(), spare.end());
    std::sort(partial.begin(), partial.end());
    size_t next_partial = 0;
    size_t next_spare = 0, spare_end = spare.size();
    uint64_t held = 0;
    // Victims bound for remote need confirmation too, except for DRAM's excess over 1.5x its
    // budget: there the pages faulted back from remote outrun the sampler (a round confirms at
    // most the pages it sampled), and that excess leaves by heat alone (a hot page evicted by
    // mistake comes back at its next touch). Evicting everything down to the budget by heat alone
    // took hundreds of hot pages at once in the guest.
    // Without a CXL tier the watch confirms many pages per round (it carries them), so only
    // DRAM's excess over its budget itself leaves unconfirmed.
    const uint64_t unconfirmed_above = cxl ? dram_budget_ * 3 / 2 : dram_budget_;
    uint64_t remote_unconfirmed = dram_pages > unconfirmed_above ? dram_pages - unconfirmed_above : 0;
    std::erase_if(plan, [&](PlannedMove& m) {
      if (m.from != Tier::kDram || m.to <= m.from || confirmed_cold_.count(m.page)) return false;
      if (carry_ && next_spare < spare_end) {  // confirmed pages first, the longest watched
        m.page = spare[next_spare++].second;
        return false;
      }
      if (m.to == Tier::kRemote && remote_unconfirmed > 0) {
        --remote_unconfirmed;
        // Under the carried watch the longest watched untouched pages go first, then the
        // policy's pick (the coldest by heat: after the hot set moves, the old one; a page
        // faulted in or caught in use lately is warmer).
        if (carry_ && next_partial < partial.size()) m.page = partial[next_partial++].second;
        return false;
      }
      // Replacements keep the policy's order: the coldest go furthest (remote), the warmest of
      // the confirmed-cold pages to CXL (else CXL fills with the coldest pages, and the warm set,
      // whose pages are rarely untouched for a whole round, finds no room there).
      if (next_spare < spare_end) {
        m.page = m.to == Tier::kRemote ? spare[next_spare++].second : spare[--spare_end].second;
        return false;
      }
      ++held;
      return true;
    });
    if (held > 0) {
      // DRAM stays over its budget this round: a page comes up into it only in exchange for one
      // that leaves (the hottest first: promotions are planned hottest first).
      uint64_t out = 0, in = 0;
      for (const PlannedMove& m : plan) out += m.from == Tier::kDram && m.to > m.from;
      std::erase_if(plan, [&](const PlannedMove& m) {
        if (m.to != Tier::kDram || m.from == Tier::kDram || ++in <= out) return false;
        ++held;
        return true;
      });
    }
    ps.deferred += held;
    held_total = held;
  }

  std::vector<Move> moves = ExpandBlocks(plan, views, unlisted, now);
  std::unordered_set<uint64_t> moved_now;
  const Executed ex = Execute(moves, cxl, now, &moved_now);
  const uint64_t demoted = ex.demoted, promoted = ex.promoted, failed = ex.failed;

  const uint64_t armed = ArmNextSample(now, views, sample_candidates, dram_pages, lower_pages, fault_samples, moved_now);
  // One line per round at TIERMEM_LOG=debug: what the round saw, planned and did (diagnosis of
  // placement in slow guests; docs/tiering.md).
  TM_LOG_DEBUG("tiering: round %llu dram=%llu cxl=%llu remote=%llu samples=%llu(cxl %llu) faults=%llu cold=%zu "
               "plan=%zu(-%llu/+%llu) held=%llu demoted=%llu promoted=%llu failed=%llu armed=%llu ms=%.1f",
               static_cast<unsigned long long>(stats().rounds + 1),
               static_cast<unsigned long long>(dram_pages), static_cast<unsigned long long>(cxl_pages),
               static_cast<unsigned long long>(lower_pages - cxl_pages),
               static_cast<unsigned long long>(tracked), static_cast<unsigned long long>(cxl_samples),
               static_cast<unsigned long long>(fault_samples),
               confirmed_cold_.size(), plan.size(), static_cast<unsigned long long>(ps.demotions),
               static_cast<unsigned long long>(ps.promotions), static_cast<unsigned long long>(held_total),
               static_cast<unsigned long long>(demoted), static_cast<unsigned long long>(promoted),
               static_cast<unsigned long long>(failed), static_cast<unsigned long long>(armed),
               static_cast<double>(os::MonotonicNanos() - now) / 1e6);
  std::lock_guard<std::mutex> lock(stats_mu_);
  ++stats_.rounds;
  stats_.samples += tracked;
  stats_.fault_samples += fault_samples;
  stats_.demotions += demoted;
  stats_.promotions += promoted;
  stats_.failed += failed;
  stats_.deferred += ps.deferred;
  stats_.migrate_calls += ex.calls;
  stats_.migrate_ns += ex.migrate_ns;
  const uint64_t round_ns = os::MonotonicNanos() - now;
  stats_.round_ns += round_ns;
  counters_->rounds.fetch_add(1, std::memory_order_relaxed);
  counters_->round_ns.fetch_add(round_ns, std::memory_order_relaxed);
  counters_->samples.fetch_add(tracked, std::memory_order_relaxed);
  if (!ex.last_error.empty()) stats_.last_error = ex.last_error;
  return armed > 0 || !plan.empty() || ps.deferred > 0 || fault_samples > 0;
}

}  // namespace tiermem
