// Budget relief: DRAM's limit kept while the program faults pages back in (migrator.h, "Budget
// relief"). The pager reports every page it makes resident; they queue in a FIFO ring; when DRAM
// is over its budget the policy thread evicts from the ring's old end, and the fault handler
// waits while DRAM is more than the slack over.
//
// Why FIFO: the ring holds pages in the order they came back, so its old end is the pages
// resident longest without a fault; under remote-fault sampling that is all the policy knows
// of them. Under the carried watch the sampler knows more: the pages it has watched untouched
// the longest go before the ring's (TakeWatchedVictims), and a page it caught in use is spared
// until it may be checked again (Policy::CaughtInUse). Pages the prefetcher fetched ahead go first while nobody is seen touching them
// (kPageAhead; a second, smaller ring): a wrong guess leaves before a page that was used. Each
// entry carries the page's residency stamp (PageRecord::stamp), so an entry of a page that was
// evicted and came back since is skipped (its newer entry counts). A page the policy holds hot
// gets a second chance (Relieve), and with room on CXL the victims go there, not remote.
#include <algorithm>

#include "base/log.h"
#include "base/os.h"
#include "runtime/tiering/migrator.h"
#include "runtime/tiering/tracker.h"

namespace tiermem {
namespace {

constexpr size_t kReliefBatch = 1024;  // pages per EvictPages call
constexpr int kStampShift = 56;        // ring entry: key | stamp << 56 (keys are < 2^52)
constexpr uint64_t kSparedBit = uint64_t{1} << 53;  // requeued by a second chance (keys < 2^52)
constexpr uint64_t kKeyMask = (uint64_t{1} << 52) - 1;
// After the remote tier refused (every server full), relief tries again this much later: a
// refusal costs the pager a few round trips to each server, and pages keep faulting in.
constexpr uint64_t kReliefFullRetryNs = 1000ull * 1000 * 1000;
// The fault handler held back for room waits at most this many spans of five intervals in all
// (AfterFaults), however busy relief is: a policy thread that never gets the CPU cannot hold
// the program forever.
constexpr int kMaxHoldWindows = 20;

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

void Migrator::OnResident(Region* region, uint64_t first, uint64_t npages, bool faulted) {
  if (!running()) return;
  const size_t page = config_.page_size;
  SpinGuard g(ring_lock_);
  for (uint64_t i = first; i < first + npages; ++i) {
    PageRecord& rec = region->record(i);
    const uint8_t stamp = static_cast<uint8_t>(rec.stamp.load(std::memory_order_relaxed) + 1);
    rec.stamp.store(stamp, std::memory_order_relaxed);
    const uint64_t key = reinterpret_cast<uintptr_t>(region->PageAddress(i)) / page;
    const uint64_t entry = key | uint64_t{stamp} << kStampShift;
    const bool ahead = (rec.flags.load(std::memory_order_relaxed) & kPageAhead) != 0;
    if (faulted) log_[log_head_++ % log_.size()] = ahead ? entry | kLogAhead : entry;
    if (!relief_) continue;
    if (ahead && ahead_head_ - ahead_tail_ < ahead_ring_.size()) {
      ahead_ring_[ahead_head_++ % ahead_ring_.size()] = entry;
    }
    if (ring_head_ - ring_tail_ >= ring_.size()) continue;  // full: found by the round's plan
    ring_[ring_head_++ % ring_.size()] = entry;
  }
  if (relief_) relief_stuck_.store(false, std::memory_order_relaxed);  // something to evict again
}

void Migrator::TakeFaultLog(std::vector<uint64_t>* out) {
  out->clear();
  out->reserve(log_.size());  // the most it can take, before the lock (see ring_lock_)
  SpinGuard g(ring_lock_);
  // The entries since the last read that are still there (a lossy log: the oldest overwritten).
  const uint64_t from = std::max(log_read_, log_head_ > log_.size() ? log_head_ - log_.size() : 0);
  for (uint64_t i = from; i < log_head_; ++i) out->push_back(log_[i % log_.size()]);
  log_read_ = log_head_;
}

void Migrator::AfterFaults() {
  if (!relief_ || !running()) return;
  const uint64_t usage = DramPagesSeen();
  if (usage <= Budget()) return;
  if (config_.clock->NowNanos() < relief_retry_ns_.load(std::memory_order_acquire)) return;  // full
  if (!nudged_.exchange(true, std::memory_order_acq_rel)) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_->notify_all();
  }
  // Relief found nothing to evict: stuck, unless pages of its windows are still being written
  // (then they leave DRAM as their writes are acknowledged, and OnLeftDram wakes this wait).
  auto stuck = [&] { return relief_stuck_.load(std::memory_order_acquire) && mover_->EvictionsPending() == 0; };
  if (usage <= Budget() + slack_pages_ || stuck()) return;
  // Over by more than the slack: hold the faults back until relief has made room. The wait
  // lasts while relief is busy or making progress (asked and not yet run, running, its writes in
  // flight, or DRAM went down in the last five intervals): on a busy machine the policy thread
  // runs late, and letting the program on after a fixed time broke the limit by a batch each
  // time. Five intervals with relief idle and no page leaving DRAM (relief stuck behind a slow
  // or lost server), or kMaxHoldWindows of them in all, end it: the program then runs over by
  // this batch, and the next batch asks again.
  const uint64_t t0 = os::MonotonicNanos();
  const uint64_t patience_ns = 5 * interval_ms_ * 1'000'000;
  std::unique_lock<std::mutex> lock(relief_mu_);
  // Counted before the predicate reads DRAM, and OnLeftDram reads the count after the pages
  // left it (a fence each side): either it sees this count and notifies (under the lock, so
  // not before the wait), or this reads DRAM after they left. No wake-up is lost.
  held_back_.fetch_add(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  auto room = [&] {
    return DramPagesSeen() <= Budget() + slack_pages_ || stuck() || !running();
  };
  uint64_t last = DramPagesSeen();
  for (int windows = 1; !config_.clock->WaitUntil(*relief_cv_, lock, config_.clock->NowNanos() + patience_ns, room);
       ++windows) {
    const uint64_t now_pages = DramPagesSeen();
    const bool progress = now_pages < last;
    last = now_pages;
    const bool busy = nudged_.load(std::memory_order_acquire) || relieving_.load(std::memory_order_acquire) ||
                      mover_->EvictionsPending() > 0;
    if ((!progress && !busy) || windows >= kMaxHoldWindows) break;
  }
  held_back_.fetch_sub(1, std::memory_order_relaxed);
  counters_->fault_throttle_waits.fetch_add(1, std::memory_order_relaxed);
  counters_->fault_throttle_ns.fetch_add(os::MonotonicNanos() - t0, std::memory_order_relaxed);
}

void Migrator::OnLeftDram() {
  if (!relief_ || !running()) return;
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the pages' leaving before the count's read
  if (held_back_.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> lock(relief_mu_);
  relief_cv_->notify_all();
}

Region* Migrator::RegionOf(const char* addr) const {
  for (const Known& k : known_) {
    Region* r = k.region.load(std::memory_order_acquire);
    if (r == nullptr) break;
    if (r->Contains(addr)) return r;
  }
  return nullptr;
}

void Migrator::TakeWatchedVictims(size_t max, std::vector<Victim>* out) {
  if (!sampling_ || !policy_->carry()) return;
  const size_t page = config_.page_size;
  std::vector<uint64_t>& keys = watched_scratch_;
  keys.clear();
  policy_->TakeWatched(max, os::MonotonicNanos(), &keys);
  for (uint64_t key : keys) {
    char* addr = reinterpret_cast<char*>(key * page);
    Region* region = RegionOf(addr);
    if (region == nullptr) continue;
    const PageRecord& rec = region->record(region->PageIndex(addr));
    const uint8_t flags = rec.flags.load(std::memory_order_relaxed);
    const uint8_t state = rec.state.load(std::memory_order_acquire);
    // Held by the soft sampler (untouched since it was armed), or resident under protection.
    const bool held = state == static_cast<uint8_t>(PageState::kInFlight) && (flags & kPageSampled);
    if ((state != static_cast<uint8_t>(PageState::kLocal) && !held) || (flags & (kPagePinned | kPageHeapFree)) ||
        rec.tier.load(std::memory_order_relaxed) != static_cast<uint8_t>(Tier::kDram)) {
      continue;
    }
    out->push_back({addr, false, true});
  }
}

bool Migrator::PopVictims(size_t max, std::vector<Victim>* out, bool fifo) {
  const size_t page = config_.page_size;
  max += out->size();
  out->reserve(max);  // no allocation under ring_lock_ (migrator.h says why)
  SpinGuard g(ring_lock_);
  // Pops entries of one ring while they last; `need` flags a victim must still have. An entry
  // whose page is still being installed (the pager reports a page resident before it stores
  // kLocal: the page is counted in DRAM, its entry queued, its state still in flight) stays
  // where it is and ends the drain: dropped, a page fetched ahead lost its place as a first
  // victim (it remained only in the FIFO ring, behind the pages used before it), and a faulted
  // page left the ring for good. Returns whether it stopped at such an entry.
  auto drain = [&](ZeroedArray<uint64_t>& ring, uint64_t& tail, uint64_t head, uint8_t need) {
    while (out->size() < max && tail != head) {
      const uint64_t e = ring[tail % ring.size()];
      char* addr = reinterpret_cast<char*>((e & kKeyMask) * page);
      Region* region = RegionOf(addr);
      if (region == nullptr) {
        ++tail;
        continue;
      }
      const PageRecord& rec = region->record(region->PageIndex(addr));
      const uint8_t flags = rec.flags.load(std::memory_order_relaxed);
      const uint8_t state = rec.state.load(std::memory_order_acquire);
      const bool same = rec.stamp.load(std::memory_order_relaxed) == static_cast<uint8_t>(e >> kStampShift);
      if (same && state == static_cast<uint8_t>(PageState::kInFlight) && !(flags & kPageSampled) &&
          rec.tier.load(std::memory_order_relaxed) == static_cast<uint8_t>(Tier::kDram)) {
        return true;  // being installed (or evicted: then its entry is stale next time)
      }
      ++tail;
      // Still the residency this entry was made for, in DRAM, and movable. A page the soft
      // sampler holds (in flight, kPageSampled: under watch and untouched since it was armed) is
      // as much a victim as a resident one: it counts against DRAM, and its entry, dropped, was
      // gone from the ring for good while the watch held DRAM's coldest pages (thousands).
      const bool held = state == static_cast<uint8_t>(PageState::kInFlight) && (flags & kPageSampled);
      if (!same || (state != static_cast<uint8_t>(PageState::kLocal) && !held) ||
          rec.tier.load(std::memory_order_relaxed) != static_cast<uint8_t>(Tier::kDram) ||
          (flags & (kPagePinned | kPageHeapFree)) || (flags & need) != need) {
        continue;
      }
      out->push_back({addr, (e & kSparedBit) != 0});
    }
    return false;
  };
  // The pages fetched ahead first; while one of them is still being installed, none of the FIFO
  // ring's (its old end holds pages that were used): the next relief step takes it.
  const size_t before = out->size();
  if (!drain(ahead_ring_, ahead_tail_, ahead_head_, kPageAhead) && fifo) drain(ring_, ring_tail_, ring_head_, 0);
  return out->size() > before;
}

void Migrator::RequeueVictims(const std::vector<char*>& pages, bool spared) {
  const size_t page = config_.page_size;
  SpinGuard g(ring_lock_);
  for (char* addr : pages) {
    if (ring_head_ - ring_tail_ >= ring_.size()) break;
    Region* r = RegionOf(addr);
    if (r == nullptr) continue;
    // The page's current stamp: the entry stands for the residency it still has (a page
    // evicted and back since has a newer stamp and entry, and this one is skipped).
    const uint8_t stamp = r->record(r->PageIndex(addr)).stamp.load(std::memory_order_relaxed);
    const uint64_t key = reinterpret_cast<uintptr_t>(addr) / page;
    ring_[ring_head_++ % ring_.size()] = key | uint64_t{stamp} << kStampShift | (spared ? kSparedBit : 0);
  }
}

// One relief, in steps: pause while the remote tier is full (ReliefPaused); then, while DRAM is
// over its target, pop a batch of victims, spare the ones the policy holds hot (SpareHot), and
// send the rest down (EvictReliefBatch). Every step runs on the policy thread.
uint64_t Migrator::Relieve() {
  // In the background (config_.relief_background), relief queues its batches like the plan's
  // evictions and counts DRAM less every page still in flight (they leave as their writes are
  // acknowledged, and the fault handler held back is woken then: OnLeftDram); the policy thread's
  // rounds settle them. Where no round runs (mode off) each relief settles the last one's.
  // Otherwise relief waits for each batch, and first for the plan's evictions in flight.
  ReliefPass pass;
  pass.background = config_.relief_background && config_.evict_background;
  if (!pass.background || !plans_) SettleEvictions();
  // Down to half the slack below the budget, so that one relief buys room for several batches.
  const uint64_t budget = Budget();
  const uint64_t target = budget > slack_pages_ / 2 ? budget - slack_pages_ / 2 : 0;
  // At most as many pages are spared in one relief as the ring held entries when it began
  // (SpareHot), so the loop ends: each turn pops at least one entry, and past that none is requeued.
  {
    SpinGuard g(ring_lock_);
    pass.spare_left = ring_head_ - ring_tail_;
  }
  if (ReliefPaused()) return 0;
  // DRAM's count over the target: if it holds pages allocated and never looked at, they are
  // counted first, so that relief evicts for those a program touched and not for pages that
  // were never there (between counts DramPagesSeen leaves out the share likely untouched).
  if (mover_->TierPages(Tier::kDram) > target) mover_->CountResident(PageMover::CountWhen::kBeforeEviction);
  std::vector<Victim> popped;
  std::vector<char*> batch;
  for (;;) {
    const uint64_t usage = ReliefDramPages(pass.background);
    if (usage <= target) break;
    popped.clear();
    // The pages fetched ahead that nobody touched, then the pages the watch has seen untouched
    // the longest, then the ring's oldest.
    const size_t want = std::min<uint64_t>(usage - target, kReliefBatch);
    PopVictims(want, &popped, false);
    if (popped.size() < want) TakeWatchedVictims(want - popped.size(), &popped);
    if (popped.size() < want) PopVictims(want - popped.size(), &popped);
    if (popped.empty()) {
      // Nothing left in the ring: DRAM's other pages are the plan's (by heat, next round).
      relief_stuck_.store(true, std::memory_order_release);
      break;
    }
    const uint64_t now = os::MonotonicNanos();
    SpareHot(popped, now, &pass, &batch);
    if (batch.empty()) continue;
    if (!EvictReliefBatch(batch, now, &pass)) break;
  }
  {
    std::lock_guard<std::mutex> lock(relief_mu_);
    relief_cv_->notify_all();
  }
  TM_LOG_DEBUG("tiering: budget relief: %llu pages evicted, %llu hot ones spared, dram %llu pages (budget %llu)%s",
               static_cast<unsigned long long>(pass.evicted), static_cast<unsigned long long>(pass.spared_total),
               static_cast<unsigned long long>(mover_->TierPages(Tier::kDram)),
               static_cast<unsigned long long>(Budget()),
               relief_stuck_.load() ? ", nothing left to evict" : "");
  return pass.evicted;
}

uint64_t Migrator::DramPagesSeen() const {
  const uint64_t all = mover_->TierPages(Tier::kDram), unseen = mover_->UnseenPages();
  return all > unseen ? all - unseen : 0;
}

uint64_t Migrator::ReliefDramPages(bool background) const {
  const uint64_t usage = DramPagesSeen();
  const uint64_t leaving = background ? mover_->EvictionsPending() : 0;
  return usage > leaving ? usage - leaving : 0;
}

bool Migrator::ReliefPaused() {
  if (config_.clock->NowNanos() >= relief_retry_ns_.load(std::memory_order_acquire)) return false;
  relief_stuck_.store(true, std::memory_order_release);  // the remote tier is full: wait
  std::lock_guard<std::mutex> lock(relief_mu_);
  relief_cv_->notify_all();
  return true;
}

// Second chance, the Policy's decision (Policy::ReliefSpares): a victim it holds hot goes back
// to the ring's new end instead. Under remote-fault sampling a resident page is never seen, so heat
// cannot tell a page still in use from one that was used once: each residency gets one second
// chance (CLOCK's one bit), and a page in use that is evicted after it comes back at its next
// touch, hot again. Under access sampling the heat is current, and a page stays while it is
// caught in use. Either way at most pass->spare_left pages are spared; past that, hot pages are
// evicted too (the limit is kept before the heat).
void Migrator::SpareHot(const std::vector<Victim>& popped, uint64_t now, ReliefPass* pass, std::vector<char*>* batch) {
  const size_t page = config_.page_size;
  std::vector<char*> spared;
  batch->clear();
  for (const Victim& v : popped) {
    if (!v.watched && policy_->ReliefSpares(reinterpret_cast<uintptr_t>(v.addr) / page, v.spared, sampling_, &pass->spare_left, now)) {
      spared.push_back(v.addr);
    } else {
      batch->push_back(v.addr);
    }
  }
  if (!spared.empty()) {
    RequeueVictims(spared, true);
    pass->spared_total += spared.size();
  }
  std::sort(batch->begin(), batch->end());
  batch->erase(std::unique(batch->begin(), batch->end()), batch->end());
}

// Each batch is counted as soon as it is out (relief_pages, and the policy thread's demotions),
// not when the relief ends: a reader of the counters right after a page left sees it.
void Migrator::CountRelief(uint64_t pages, ReliefPass* pass) {
  if (pages == 0) return;
  pass->evicted += pages;
  counters_->budget_relief_pages.fetch_add(pages, std::memory_order_relaxed);
  counters_->demotions.fetch_add(pages, std::memory_order_relaxed);  // the policy thread's, like the plan's
}

void Migrator::ReliefProgress() {
  relief_stuck_.store(false, std::memory_order_release);
  relief_epoch_.fetch_add(1, std::memory_order_acq_rel);
  std::lock_guard<std::mutex> lock(relief_mu_);
  relief_cv_->notify_all();
}

StatusOr<MigrateResult> Migrator::ReliefEvict(const std::vector<char*>& pages, bool background) {
  if (!background) return mover_->EvictPages(pages);
  auto r = mover_->EvictPagesBackground(pages);
  if (r.ok()) evictions_queued_ += r->pages_moved;
  return r;
}

// Sends one batch of victims down: to CXL where it has room, else to the remote tier. Returns
// false when relief should end (a server refused; with every server full, relief pauses).
bool Migrator::EvictReliefBatch(const std::vector<char*>& batch, uint64_t now, ReliefPass* pass) {
  const size_t page = config_.page_size;
  if (sampling_) {
    for (char* p : batch) {
      sampler_->Release(p, page);
      policy_->LeftWatch(reinterpret_cast<uintptr_t>(p) / page);  // not carried into the next round
    }
  }
  // With a CXL tier that has room, the victims go there: the plan then sends the coldest of
  // CXL on to remote (by heat, which the ring knows nothing of), so a warm page that faulted
  // back is not sent remote again behind the plan's back. A refusal sends them remote.
  if (ReliefRoomOnCxl(batch.size())) {
    auto m = mover_->MovePages(batch, Tier::kCxl);
    if (m.ok() && m->pages_failed == 0) {
      CountRelief(m->pages_moved + m->pages_already_there, pass);
      ReliefProgress();
      return true;
    }
    if (!m.ok()) TM_LOG_DEBUG("tiering: budget relief to cxl: %s", m.status().ToString().c_str());
  }
  auto r = ReliefEvict(batch, pass->background);
  if (!r.ok()) {
    // A victim was freed since it was popped (the whole call is refused): the rest go one by
    // one. Any other failure (a server refusing) ends this relief; the next nudge tries again.
    if (r.status().code() != StatusCode::kInvalidArgument) {
      TM_LOG_DEBUG("tiering: budget relief: %s", r.status().ToString().c_str());
      if (r.status().code() == StatusCode::kResourceExhausted) {
        // Every server is full (the runtime has said so): keep the victims, pause relief.
        RequeueVictims(batch, false);
        relief_retry_ns_.store(config_.clock->NowNanos() + kReliefFullRetryNs, std::memory_order_release);
      }
      relief_stuck_.store(true, std::memory_order_release);
      return false;
    }
    uint64_t moved = 0;
    for (char* p : batch) {
      auto one = ReliefEvict({p}, pass->background);
      if (!one.ok()) continue;
      moved += one->pages_moved;
      policy_->NoteEviction(reinterpret_cast<uintptr_t>(p) / page);
    }
    CountRelief(moved, pass);
  } else {
    CountRelief(r->pages_moved, pass);
    for (char* p : batch) policy_->NoteEviction(reinterpret_cast<uintptr_t>(p) / page);
  }
  // Under remote-fault sampling nothing was seen of these pages while they were here: their
  // heat is carried to now undecayed, so the time to their next fault decides how hot they
  // come back (Policy::Evicted). Access sampling saw them, and their heat stands.
  if (!sampling_) {
    for (char* p : batch) policy_->Evicted(reinterpret_cast<uintptr_t>(p) / page, now);
  }
  ReliefProgress();
  return true;
}

bool Migrator::ReliefRoomOnCxl(size_t pages) const {
  return policy_->RoomBelowLowWatermark(Tier::kCxl, mover_->TierPages(Tier::kCxl), pages);
}

void Migrator::MaybeRelieve() {
  if (!relief_) return;
  // Busy from before the nudge is taken to after the relief: a held-back handler (AfterFaults)
  // sees the nudge or this flag while relief is due or running.
  relieving_.store(true, std::memory_order_release);
  if (!nudged_.exchange(false, std::memory_order_acq_rel)) {
    relieving_.store(false, std::memory_order_release);
    return;
  }
  const uint64_t t0 = os::MonotonicNanos();
  relieved_since_scan_ += Relieve();
  relief_ns_ += os::MonotonicNanos() - t0;
  relieving_.store(false, std::memory_order_release);
}

}  // namespace tiermem
