// Budget relief: DRAM's limit kept while the program faults pages back in (migrator.h, "Budget
// relief"). The pager reports every page it makes resident; they queue in a FIFO ring; when DRAM
// is over its budget the policy thread evicts from the ring's old end, and the fault handler
// waits while DRAM is more than the slack over.
//
// Why FIFO: the ring holds pages in the order they came back, so its old end is the pages
// resident longest without a fault; under remote-fault sampling that is all the policy knows
// of them. Each entry carries the page's residency stamp (PageRecord::stamp), so an entry of a
// page that was evicted and came back since is skipped (its newer entry counts).
#include <algorithm>
#include <chrono>

#include "base/log.h"
#include "base/os.h"
#include "runtime/tiering/migrator.h"
#include "runtime/tiering/tracker.h"

namespace tiermem {
namespace {

constexpr size_t kReliefBatch = 1024;  // pages per EvictPages call
constexpr int kStampShift = 56;        // ring entry: key | stamp << 56 (keys are < 2^52)
constexpr uint64_t kKeyMask = (uint64_t{1} << kStampShift) - 1;
// After the remote tier refused (every server full), relief tries again this much later: a
// refusal costs the pager a few round trips to each server, and pages keep faulting in.
constexpr uint64_t kReliefFullRetryNs = 1000ull * 1000 * 1000;

class SpinGuard {
 public:
  explicit SpinGuard(std::atomic_flag& f) : f_(f) {
    while (f_.test_and_set(std::memory_order_acquire)) {
    }
  }
  ~SpinGuard() { f_.clear(std::memory_order_release); }
  SpinGuard(const SpinGuard&) = delete;
  SpinGuard& operator=(const SpinGuard&) = delete;

 private:
  std::atomic_flag& f_;
};

}  // namespace

void Migrator::OnResident(Region* region, uint64_t first, uint64_t npages) {
  if (!relief_ || !running()) return;
  const size_t page = config_.page_size;
  SpinGuard g(ring_lock_);
  for (uint64_t i = first; i < first + npages; ++i) {
    PageRecord& rec = region->record(i);
    const uint8_t stamp = static_cast<uint8_t>(rec.stamp.load(std::memory_order_relaxed) + 1);
    rec.stamp.store(stamp, std::memory_order_relaxed);
    if (ring_head_ - ring_tail_ >= kRingPages) continue;  // full: found by the round's plan
    const uint64_t key = reinterpret_cast<uintptr_t>(region->PageAddress(i)) / page;
    ring_[ring_head_++ % kRingPages] = key | uint64_t{stamp} << kStampShift;
  }
  relief_stuck_.store(false, std::memory_order_relaxed);  // there is something to evict again
}

void Migrator::AfterFaults() {
  if (!relief_ || !running()) return;
  const uint64_t usage = mover_->TierPages(Tier::kDram);
  if (usage <= dram_budget_) return;
  if (os::MonotonicNanos() < relief_retry_ns_.load(std::memory_order_acquire)) return;  // full
  if (!nudged_.exchange(true, std::memory_order_acq_rel)) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_->notify_all();
  }
  if (usage <= dram_budget_ + slack_pages_ || relief_stuck_.load(std::memory_order_acquire)) return;
  // Over by more than the slack: hold the faults back until relief has made room, at most five
  // intervals (relief may be stuck behind a slow server; the program then runs over by this
  // batch, and the next batch asks again).
  const uint64_t t0 = os::MonotonicNanos();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(5 * interval_ms_);
  std::unique_lock<std::mutex> lock(relief_mu_);
  relief_cv_->wait_until(lock, deadline, [&] {
    return mover_->TierPages(Tier::kDram) <= dram_budget_ + slack_pages_ ||
           relief_stuck_.load(std::memory_order_acquire) || !running();
  });
  counters_->throttle_waits.fetch_add(1, std::memory_order_relaxed);
  counters_->throttle_ns.fetch_add(os::MonotonicNanos() - t0, std::memory_order_relaxed);
}

bool Migrator::PopVictims(size_t max, std::vector<char*>* out) {
  const size_t page = config_.page_size;
  SpinGuard g(ring_lock_);
  while (out->size() < max && ring_tail_ != ring_head_) {
    const uint64_t e = ring_[ring_tail_++ % kRingPages];
    char* addr = reinterpret_cast<char*>((e & kKeyMask) * page);
    Region* region = nullptr;
    for (const Known& k : known_) {
      Region* r = k.region.load(std::memory_order_acquire);
      if (r == nullptr) break;
      if (r->Contains(addr)) {
        region = r;
        break;
      }
    }
    if (region == nullptr) continue;
    const PageRecord& rec = region->record(region->PageIndex(addr));
    // Still the residency this entry was made for, in DRAM, and movable.
    if (rec.stamp.load(std::memory_order_relaxed) != static_cast<uint8_t>(e >> kStampShift) ||
        rec.state.load(std::memory_order_acquire) != static_cast<uint8_t>(PageState::kLocal) ||
        rec.tier.load(std::memory_order_relaxed) != static_cast<uint8_t>(Tier::kDram) ||
        (rec.flags.load(std::memory_order_relaxed) & kPagePinned)) {
      continue;
    }
    out->push_back(addr);
  }
  return !out->empty();
}

void Migrator::RequeueVictims(const std::vector<char*>& pages) {
  const size_t page = config_.page_size;
  SpinGuard g(ring_lock_);
  for (char* addr : pages) {
    if (ring_head_ - ring_tail_ >= kRingPages) break;
    for (const Known& k : known_) {
      Region* r = k.region.load(std::memory_order_acquire);
      if (r == nullptr) break;
      if (!r->Contains(addr)) continue;
      // The page's current stamp: the entry stands for the residency it still has (a page
      // evicted and back since has a newer stamp and entry, and this one is skipped).
      const uint8_t stamp = r->record(r->PageIndex(addr)).stamp.load(std::memory_order_relaxed);
      const uint64_t key = reinterpret_cast<uintptr_t>(addr) / page;
      ring_[ring_head_++ % kRingPages] = key | uint64_t{stamp} << kStampShift;
      break;
    }
  }
}

uint64_t Migrator::Relieve() {
  // Down to half the slack below the budget, so that one relief buys room for several batches.
  const uint64_t target = dram_budget_ > slack_pages_ / 2 ? dram_budget_ - slack_pages_ / 2 : 0;
  const size_t page = config_.page_size;
  uint64_t evicted = 0;
  std::vector<char*> batch;
  if (os::MonotonicNanos() < relief_retry_ns_.load(std::memory_order_acquire)) {
    relief_stuck_.store(true, std::memory_order_release);  // the remote tier is full: wait
    std::lock_guard<std::mutex> lock(relief_mu_);
    relief_cv_->notify_all();
    return 0;
  }
  for (;;) {
    const uint64_t usage = mover_->TierPages(Tier::kDram);
    if (usage <= target) break;
    batch.clear();
    if (!PopVictims(std::min<uint64_t>(usage - target, kReliefBatch), &batch)) {
      // Nothing left in the ring: DRAM's other pages are the plan's (by heat, next round).
      relief_stuck_.store(true, std::memory_order_release);
      break;
    }
    std::sort(batch.begin(), batch.end());
    batch.erase(std::unique(batch.begin(), batch.end()), batch.end());
    if (protect_) {
      for (char* p : batch) ProtectTracker::Get().Release(p, page);
    }
    auto r = mover_->EvictPages(batch);
    if (!r.ok()) {
      // A victim was freed since it was popped (the whole call is refused): the rest go one by
      // one. Any other failure (a server refusing) ends this relief; the next nudge tries again.
      if (r.status().code() != StatusCode::kInvalidArgument) {
        TM_LOG_DEBUG("tiering: budget relief: %s", r.status().ToString().c_str());
        if (r.status().code() == StatusCode::kResourceExhausted) {
          // Every server is full (the runtime has said so): keep the victims, pause relief.
          RequeueVictims(batch);
          relief_retry_ns_.store(os::MonotonicNanos() + kReliefFullRetryNs, std::memory_order_release);
        }
        relief_stuck_.store(true, std::memory_order_release);
        break;
      }
      for (char* p : batch) {
        auto one = mover_->EvictPages({p});
        if (one.ok()) evicted += one->pages_moved;
      }
    } else {
      evicted += r->pages_moved;
    }
    relief_stuck_.store(false, std::memory_order_release);
    relief_epoch_.fetch_add(1, std::memory_order_acq_rel);
    std::lock_guard<std::mutex> lock(relief_mu_);
    relief_cv_->notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(relief_mu_);
    relief_cv_->notify_all();
  }
  counters_->relief_pages.fetch_add(evicted, std::memory_order_relaxed);
  TM_LOG_DEBUG("tiering: budget relief: %llu pages evicted, dram %llu pages (budget %llu)%s",
               static_cast<unsigned long long>(evicted),
               static_cast<unsigned long long>(mover_->TierPages(Tier::kDram)),
               static_cast<unsigned long long>(dram_budget_),
               relief_stuck_.load() ? ", nothing left to evict" : "");
  if (evicted > 0) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.demotions += evicted;  // demotions of the policy thread, like the plan's
  }
  return evicted;
}

void Migrator::MaybeRelieve() {
  if (relief_ && nudged_.exchange(false, std::memory_order_acq_rel)) Relieve();
}

}  // namespace tiermem
