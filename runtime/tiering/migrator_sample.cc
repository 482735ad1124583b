// The policy thread's sampling (see migrator.h): which pages the next round protects.
#include <algorithm>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "runtime/tiering/migrator.h"
#include "base/log.h"
#include "base/os.h"
#include "runtime/pages/region.h"
#include "runtime/tiering/tracker.h"

namespace tiermem {

// The next sample: a rotating window over the resident, unpinned pages the round read, plus the
// DRAM pages that are the next demotion victims (put under watch). `population`: the resident
// pages each armed page stands for (the candidates, or every resident page when the round read
// a window of them). Returns the pages armed.
uint64_t Migrator::ArmNextSample(uint64_t now, const std::vector<PageView>& views,
                                 const std::vector<char*>& sample_candidates, uint64_t population,
                                 uint64_t dram_pages, uint64_t lower_pages, uint64_t fault_samples,
                                 const std::unordered_set<uint64_t>& moved_now) {
  AccessSampler* tracker = sampler_;
  uint64_t armed = 0;
  // A lost handler is noticed every round, whether or not this one wants a sample.
  const bool usable = !sampling_ || tracker->usable();
  if (!usable) StopSamplingIfHandlerLost();
  if (sampling_ && usable && !sample_candidates.empty() && SamplingWanted(dram_pages, lower_pages)) {
    // Half the sample checks the next demotion victims (the coldest DRAM pages: a hot page
    // among them is caught before it is evicted, like CLOCK's second chance); half rotates
    // over every resident page, so heat is learned everywhere (and hot CXL pages are found).
    const SampleShares shares = SampleSharesFor(sample_candidates.size(), dram_pages, fault_samples);
    std::vector<char*> next;
    if (dram_budget_ != 0 && dram_pages * 4 >= Budget() * 3) {
      PickVictims(now, views, sample_candidates, shares.victims, moved_now, &next);
    }
    PickRotating(views, sample_candidates, shares.total, moved_now, &next);
    armed = ArmAndWatch(next, views);
    last_candidates_ = ArmablePopulation(sample_candidates, population);
    // The tracker is in a round now, whatever it armed: the next round collects it. (A sample
    // that armed nothing, every candidate a page never touched, was taken as no round, and a
    // tracker left mid-round refuses every later Arm: sampling stopped for good.)
    armed_ = true;
    last_armed_ = armed;
  }
  if (sampling_ && armed == 0 && tracker->carried() > 0) {
    // No round armed: pages still carried from the last one are lifted, the watch ends.
    std::vector<AccessSample> dropped;
    tracker->Collect(now, &dropped);
    policy_->WatchEnded();
  }
  return armed;
}

uint64_t Migrator::ArmablePopulation(const std::vector<char*>& candidates, uint64_t population) const {
  // With the write scan, the pages it found written are never armed (KeepOutOfSample): the
  // sample is drawn from the unwritten pages alone, and a sampled read stands for those, not
  // for every candidate (counted over all of them, each read weighed live / unwritten times its
  // due). Where the candidates are a window, the window's unwritten share stands for all.
  if (track_ == nullptr || candidates.empty()) return population;
  uint64_t unwritten = 0;
  for (char* p : candidates) unwritten += !WrittenLately(reinterpret_cast<uintptr_t>(p) / config_.page_size);
  return population * unwritten / candidates.size();
}

void Migrator::StopSamplingIfHandlerLost() {
  if (std::string(sampler_->name()) != "protect") return;
  // Either way round (its handler chained to under the preload library, or ours replaced):
  // sampling by protection in a program that handles its own faults stops (tracker.h says why).
  TM_LOG_WARN("tiering: the program installed its own SIGSEGV handler; access sampling "
              "stops (remote faults still count)");
  // Pages still protected (carried from the last round) are lifted now: once sampling is off
  // nothing else would (Stop, frees and this loop go by sampling_), and their next touch would
  // reach the program's handler where it replaced ours.
  sampler_->DisarmAll();
  policy_->WatchEnded();
  sampling_ = false;
  // The mode in effect is now the remote faults' alone, and the stats and exit report say so:
  // a reader that asked for sampling (`tiermem advise`'s record) learns its samples stopped.
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.mode = "faults";
  snprintf(counters_->sampling_mode, sizeof(counters_->sampling_mode), "faults");
}

Migrator::SampleShares Migrator::SampleSharesFor(size_t candidates, uint64_t dram_pages, uint64_t fault_samples) const {
  const bool cxl = policy_->config().present[static_cast<int>(Tier::kCxl)];
  SampleShares s;
  s.total = std::min<size_t>(sample_pages_, candidates);
  // DRAM over its budget with a CXL tier below: victims go to CXL only once confirmed cold, so
  // checking them gets three quarters of the sample instead of half.
  const uint64_t budget = Budget();
  s.victims = cxl && dram_budget_ != 0 && dram_pages > budget ? s.total * 3 / 4 : s.total / 2;
  if (policy_->carry() && dram_budget_ != 0) {
    // The watch must confirm pages as fast as they come in (faults) and DRAM's excess must
    // leave: that many more pages go under watch, as far as the tracker has room.
    const uint64_t over = dram_pages > budget ? dram_pages - budget : 0;
    const size_t busy = sampler_->carried() + s.total;
    const size_t room = sampler_->max_armed() > busy ? sampler_->max_armed() - busy : 0;
    const size_t extra = std::min<size_t>(room, 2 * fault_samples + over);
    s.victims += extra;
    s.total += extra;
  }
  return s;
}

void Migrator::PickVictims(uint64_t now, const std::vector<PageView>& views, const std::vector<char*>& candidates,
                           size_t victim_share, const std::unordered_set<uint64_t>& moved_now,
                           std::vector<char*>* next) {
  const size_t page = config_.page_size;
  // The coldest are looked for in a window of the candidates that rotates from round to round (a
  // clock hand), kVictimWindow times the pages wanted: ranking every resident page by heat each
  // round made the round's cost grow with DRAM (a heat lookup and three hash lookups per page).
  std::vector<std::pair<double, char*>> coldest;
  const size_t window = std::min(candidates.size(), std::max<size_t>(kVictimWindow * victim_share, kMinVictimWindow));
  coldest.reserve(window);
  victim_cursor_ %= candidates.size();
  for (size_t w = 0; w < window; ++w) {
    char* p = candidates[(victim_cursor_ + w) % candidates.size()];
    const uint64_t key = reinterpret_cast<uintptr_t>(p) / page;
    auto it = index_.Find(key);
    if (it == nullptr || views[*it].tier != Tier::kDram || KeepOutOfSample(key, moved_now)) continue;
    coldest.push_back({policy_->Heat(key, now), p});
  }
  victim_cursor_ += window;
  const size_t want = std::min(victim_share, coldest.size());
  if (want == 0) return;
  const auto colder = [](const auto& a, const auto& b) { return a.first < b.first; };
  std::nth_element(coldest.begin(), coldest.begin() + static_cast<long>(want - 1), coldest.end(), colder);
  std::sort(coldest.begin(), coldest.begin() + static_cast<long>(want), colder);
  // Whole aligned blocks around the coldest pages: the block's other DRAM pages are confirmed
  // (or refuted) at once, which is what block expansion needs, and adjacent pages are protected
  // with one system call.
  std::unordered_map<uint64_t, bool> taken_pages;
  for (size_t c = 0; c < want && next->size() < victim_share; ++c) {
    const uint64_t key = reinterpret_cast<uintptr_t>(coldest[c].second) / page;
    const uint64_t block = key & ~(kBlockPages - 1);
    for (uint64_t k = block; k < block + kBlockPages && next->size() < victim_share; ++k) {
      auto it = index_.Find(k);
      if (it == nullptr || taken_pages.count(k) || KeepOutOfSample(k, moved_now)) continue;
      const PageView& v = views[*it];
      if (v.tier != Tier::kDram || v.pinned) continue;
      taken_pages[k] = true;
      next->push_back(reinterpret_cast<char*>(k * page));
    }
  }
}

void Migrator::PickRotating(const std::vector<PageView>& views, const std::vector<char*>& candidates, size_t total,
                            const std::unordered_set<uint64_t>& moved_now, std::vector<char*>* next) {
  const size_t page = config_.page_size;
  // The rotating half covers the CXL tier's pages when it has any (a hot page there does not
  // fault, so only sampling can find it); DRAM's are covered by the victim checks.
  std::vector<char*> lower;
  for (char* p : candidates) {
    auto it = index_.Find(reinterpret_cast<uintptr_t>(p) / page);
    if (it != nullptr && views[*it].tier == Tier::kCxl) lower.push_back(p);
  }
  const std::vector<char*>& pool = lower.empty() ? candidates : lower;
  cursor_ %= pool.size();
  size_t k = 0;
  for (; next->size() < total && k < pool.size(); ++k) {
    char* p = pool[(cursor_ + k) % pool.size()];
    const uint64_t key = reinterpret_cast<uintptr_t>(p) / page;
    if (!KeepOutOfSample(key, moved_now)) next->push_back(p);
  }
  cursor_ += k;
}

uint64_t Migrator::ArmAndWatch(const std::vector<char*>& next, const std::vector<PageView>& views) {
  // Only pages still local when armed: the candidates were read at the round's start, and a page
  // an eviction claimed since (its write may be in flight) must not be protected.
  const uint64_t armed = sampler_->Arm(next, [this](const char* p) {
    const Region* r = RegionOf(p);
    return r != nullptr &&
           r->record(r->PageIndex(p)).state.load(std::memory_order_acquire) == uint8_t(PageState::kLocal);
  });
  if (policy_->carry()) {
    // DRAM pages now under watch stay protected from round to round until touched.
    const uint64_t t_arm = os::MonotonicNanos();
    for (char* p : next) {
      const uint64_t key = reinterpret_cast<uintptr_t>(p) / config_.page_size;
      auto it = index_.Find(key);
      if (it != nullptr && views[*it].tier == Tier::kDram) policy_->WatchStarted(key, t_arm);
    }
  }
  return armed;
}

}  // namespace tiermem
