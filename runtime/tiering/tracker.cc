#include "runtime/tiering/tracker.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "base/os_signal.h"

namespace tiermem {
namespace {

constexpr uintptr_t kPage = 4096;
constexpr int kTableBits = 13;
constexpr size_t kTableSize = size_t{1} << kTableBits;  // 2x kMaxArmed: short probes

enum SlotState : uint8_t { kEmpty = 0, kArmed = 1, kRead = 2, kWritten = 3, kLifted = 4 };

struct Slot {
  std::atomic<uintptr_t> page{0};
  std::atomic<uint8_t> state{kEmpty};
};

// Two tables: the current round's, and the previous round's (kept one round so late faults on
// pages whose protection was just lifted still find their page).
Slot g_tables[2][kTableSize];
std::atomic<bool> g_installed{false};

size_t Hash(uintptr_t page) {
  return static_cast<size_t>(((page >> 12) * 0x9E3779B97F4A7C15ull) >> (64 - kTableBits));
}

Slot* Find(int t, uintptr_t page) {
  size_t h = Hash(page);
  for (size_t i = 0; i < kTableSize; ++i) {
    Slot& s = g_tables[t][(h + i) & (kTableSize - 1)];
    uintptr_t p = s.page.load(std::memory_order_acquire);
    if (p == page) return &s;
    if (p == 0) return nullptr;
  }
  return nullptr;
}

// The last protection fault this thread saw on a page in neither table. A thread descheduled
// between its fault and the table lookup for longer than the one-round grace finds its page gone
// from the tables although its protection was lifted long ago: the access is retried once, and
// only a second fault on the same page in a row is passed on. initial-exec TLS: no allocation
// on first use inside a signal handler.
__attribute__((tls_model("initial-exec"))) thread_local uintptr_t tls_unknown_page = 0;

void SegvHandler(int sig, siginfo_t* info, void* uctx) {
  int saved_errno = errno;
  if (info != nullptr && info->si_code == SEGV_ACCERR) {
    uintptr_t page = reinterpret_cast<uintptr_t>(info->si_addr) & ~(kPage - 1);
    // A page carried from one round into the next is in both tables for a moment: the access
    // belongs to whichever slot is still armed.
    bool found = false;
    const uint8_t now = os::FaultWasWrite(uctx) ? kWritten : kRead;
    for (int t = 0; t < 2; ++t) {
      Slot* s = Find(t, page);
      if (s == nullptr) continue;
      found = true;
      uint8_t expect = kArmed;
      if (s->state.compare_exchange_strong(expect, now, std::memory_order_acq_rel)) {
        os::ProtectReadWrite(reinterpret_cast<void*>(page), kPage);
        break;
      }
    }
    if (found) {
      // Lifted by us, or another thread (or the tracker) is lifting it: the access runs again.
      tls_unknown_page = 0;
      errno = saved_errno;
      return;
    }
    if (tls_unknown_page != page) {
      tls_unknown_page = page;
      errno = saved_errno;
      return;
    }
    tls_unknown_page = 0;
  }
  errno = saved_errno;
  os::ChainSegv(sig, info, uctx);
}

}  // namespace

ProtectTracker& ProtectTracker::Get() {
  static ProtectTracker* tracker = new ProtectTracker();  // never destroyed: the handler may run late
  return *tracker;
}

Status ProtectTracker::Install() {
  std::lock_guard<std::mutex> lock(mu_);
  if (installed_) return Status::Ok();
  int rc = os::InstallSegvHandler(&SegvHandler);
  if (rc != 0) return ErrnoToStatus(-rc, "installing the tracker's SIGSEGV handler");
  installed_ = true;
  g_installed.store(true, std::memory_order_release);
  return Status::Ok();
}

bool ProtectTracker::HandlerInstalled() const {
  return g_installed.load(std::memory_order_acquire) && os::CurrentSegvHandler() == &SegvHandler;
}

bool ProtectTracker::ProgramHandlerFree() const { return HandlerInstalled() && !os::ProgramSetSegvHandler(); }

void ProtectTracker::Collect(uint64_t now_ns, std::vector<AccessSample>* out,
                             std::vector<uint64_t>* untouched,
                             const std::function<bool(uint64_t)>& keep) {
  std::lock_guard<std::mutex> lock(mu_);
  // Untouched pages the caller keeps stay protected and armed (carried into the next round).
  std::vector<char*> kept, rest;
  for (char* p : armed_) {
    const uint64_t key = reinterpret_cast<uintptr_t>(p) >> 12;
    Slot* s = Find(cur_, reinterpret_cast<uintptr_t>(p));
    if (keep && s != nullptr && s->state.load(std::memory_order_acquire) == kArmed && keep(key)) {
      kept.push_back(p);
      if (untouched != nullptr) untouched->push_back(key);
    } else {
      rest.push_back(p);
    }
  }
  // Lift protection in runs of adjacent pages (one system call per run; pages a fault already
  // lifted are unaffected), then mark: a fault racing with this finds its slot armed or lifted.
  for (size_t i = 0; i < rest.size();) {
    size_t j = i + 1;
    while (j < rest.size() && rest[j] == rest[j - 1] + kPage) ++j;
    os::ProtectReadWrite(rest[i], (j - i) * kPage);
    i = j;
  }
  for (char* p : rest) {
    Slot* s = Find(cur_, reinterpret_cast<uintptr_t>(p));
    if (s == nullptr) continue;
    uint8_t st = kArmed;
    if (s->state.compare_exchange_strong(st, kLifted, std::memory_order_acq_rel)) {
      if (untouched != nullptr) untouched->push_back(reinterpret_cast<uintptr_t>(p) >> 12);
      continue;
    }
    if (st == kRead || st == kWritten) {
      out->push_back({reinterpret_cast<uintptr_t>(p) >> 12, st == kWritten, now_ns});
      ++counters_.touched;
      s->state.store(kLifted, std::memory_order_release);
    }
  }
  armed_ = std::move(kept);  // sorted, as armed_ was
  in_round_ = false;
  ++counters_.rounds;
}

size_t ProtectTracker::carried() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_round_ ? 0 : armed_.size();
}

namespace {

// Puts `p` in table `t` with `state`; null when the table is full (cannot happen below
// kMaxArmed: the table is twice that).
Slot* Insert(int t, char* p, uint8_t state) {
  const uintptr_t page = reinterpret_cast<uintptr_t>(p);
  const size_t h = Hash(page);
  for (size_t i = 0; i < kTableSize; ++i) {
    Slot& s = g_tables[t][(h + i) & (kTableSize - 1)];
    if (s.page.load(std::memory_order_relaxed) == 0) {
      s.state.store(state, std::memory_order_relaxed);
      s.page.store(page, std::memory_order_release);
      return &s;
    }
  }
  return nullptr;
}

// Protects `fresh` (ascending, in table `t`) in runs of adjacent pages, one system call per run;
// returns the pages protected. A run that could not be is marked lifted: no sample from it.
size_t ProtectRuns(int t, const std::vector<char*>& fresh) {
  size_t armed = 0;
  for (size_t i = 0; i < fresh.size();) {
    size_t j = i + 1;
    while (j < fresh.size() && fresh[j] == fresh[j - 1] + kPage) ++j;
    int rc = os::ProtectNone(fresh[i], (j - i) * kPage);
    if (rc != 0) {
      for (size_t k = i; k < j; ++k) {
        if (Slot* s = Find(t, reinterpret_cast<uintptr_t>(fresh[k]))) s->state.store(kLifted);
      }
      TM_LOG_DEBUG("tracker: mprotect(PROT_NONE) failed: %s", strerror(-rc));
    } else {
      armed += j - i;
    }
    i = j;
  }
  return armed;
}

}  // namespace

size_t ProtectTracker::Arm(const std::vector<char*>& pages, const ArmFilter& armable) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!installed_ || in_round_) return 0;  // Collect first
  // The table of two rounds ago: its pages were lifted a whole round ago.
  const int old = cur_;
  cur_ ^= 1;
  for (Slot& s : g_tables[cur_]) {
    s.page.store(0, std::memory_order_relaxed);
    s.state.store(kEmpty, std::memory_order_relaxed);
  }
  std::atomic_thread_fence(std::memory_order_release);
  CarryOver(old);
  const size_t kept = armed_.size();
  const std::vector<char*> fresh = FreshPages(pages, armable, kept);
  for (char* p : fresh) Insert(cur_, p, kArmed);
  const size_t armed = ProtectRuns(cur_, fresh);
  armed_.insert(armed_.end(), fresh.begin(), fresh.end());
  std::inplace_merge(armed_.begin(), armed_.begin() + static_cast<long>(kept), armed_.end());
  in_round_ = true;
  counters_.armed += armed;
  return armed + kept;
}

void ProtectTracker::CarryOver(int old) {
  // Carried pages (still protected, armed in the old table): armed in the new table first, then
  // lifted in the old one; an access caught in the old slot meanwhile moves over with its kind.
  // Pages released since Collect (lifted in the old table) are dropped.
  std::vector<char*> carried = std::move(armed_);
  armed_.clear();
  for (char* p : carried) {
    Slot* o = Find(old, reinterpret_cast<uintptr_t>(p));
    if (o == nullptr) continue;
    const uint8_t was = o->state.load(std::memory_order_acquire);
    if (was == kRead || was == kWritten) {
      // Touched since Collect (and lifted by the handler): reported at the end of this round.
      if (Insert(cur_, p, was) != nullptr) armed_.push_back(p);
      continue;
    }
    if (was != kArmed) continue;  // released
    Slot* n = Insert(cur_, p, kArmed);
    if (n == nullptr) {  // no room (cannot happen below kMaxArmed): lift it where it is
      os::ProtectReadWrite(p, kPage);
      uint8_t st = kArmed;
      o->state.compare_exchange_strong(st, kLifted, std::memory_order_acq_rel);
      continue;
    }
    uint8_t st = kArmed;
    if (!o->state.compare_exchange_strong(st, kLifted, std::memory_order_acq_rel)) {
      n->state.store(st, std::memory_order_release);
    }
    armed_.push_back(p);
  }
}

std::vector<char*> ProtectTracker::FreshPages(const std::vector<char*>& pages, const ArmFilter& armable,
                                              size_t kept) const {
  // New pages, in the caller's order of priority, up to the table's share left; then by address.
  std::vector<char*> fresh;
  for (char* p : pages) {
    if (kept + fresh.size() >= kMaxArmed) break;
    if (std::binary_search(armed_.begin(), armed_.end(), p)) continue;
    if (armable && !armable(p)) continue;  // under mu_: see AccessSampler::Arm
    fresh.push_back(p);
  }
  std::sort(fresh.begin(), fresh.end());
  fresh.erase(std::unique(fresh.begin(), fresh.end()), fresh.end());
  return fresh;
}

void ProtectTracker::Release(const void* addr, size_t len) {
  std::lock_guard<std::mutex> lock(mu_);
  if (armed_.empty()) return;  // (pages carried over by Collect are in armed_ too)
  auto lo = reinterpret_cast<uintptr_t>(addr) & ~(kPage - 1);
  auto hi = reinterpret_cast<uintptr_t>(addr) + len;
  auto it = std::lower_bound(armed_.begin(), armed_.end(), reinterpret_cast<char*>(lo));
  // One system call lifts every armed page of the range (the caller's range is live memory, so
  // the pages between them are accessible already): evictions of scattered pages under watch
  // would otherwise cost one mprotect each.
  std::vector<Slot*> lift;
  char *first = nullptr, *last = nullptr;
  for (; it != armed_.end() && reinterpret_cast<uintptr_t>(*it) < hi; ++it) {
    Slot* s = Find(cur_, reinterpret_cast<uintptr_t>(*it));
    if (s == nullptr) continue;
    if (s->state.load(std::memory_order_acquire) == kArmed) {
      if (first == nullptr) first = *it;
      last = *it;
    }
    lift.push_back(s);
  }
  if (first != nullptr) os::ProtectReadWrite(first, static_cast<size_t>(last - first) + kPage);
  for (Slot* s : lift) s->state.store(kLifted, std::memory_order_release);
}

void ProtectTracker::DisarmAll() {
  std::vector<AccessSample> dropped;
  Collect(0, &dropped);
}

AccessSampler::Counters ProtectTracker::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

bool DetectPebs(std::string* reason) {
  int rc = os::PerfPreciseAvailable();
  if (rc == 0) {
    *reason = "perf_event precise sampling is available";
    return true;
  }
  *reason = std::string("no precise hardware sampling: perf_event_open(cycles, precise_ip=2): ") +
            strerror(-rc);
  return false;
}

}  // namespace tiermem
