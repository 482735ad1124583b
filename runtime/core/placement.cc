// Where an allocation goes (Runtime::Impl::ChooseTier): the tier asked for, or for kAuto the
// first NUMA tier with room, then DRAM untouched where DRAM counts resident pages (a large run
// split at the process's room, SplitRoom), and the checks on the remote tier's capacity.
#include <algorithm>
#include <string>

#include "base/log.h"
#include "base/os.h"
#include "runtime/core/runtime_impl.h"

namespace tiermem {

StatusOr<Tier> Runtime::Impl::ChooseTier(Tier asked, uint64_t bytes, uint32_t flags, uint64_t* untouched) const {
  *untouched = 0;
  auto fits = [&](Tier t) {
    uint64_t limit = tier_limit_[Index(t)];
    return limit == 0 || allocated_[Index(t)].load(std::memory_order_relaxed) + bytes <= limit;
  };
  if (asked == Tier::kAuto) {
    for (Tier t : {Tier::kDram, Tier::kCxl}) {
      if (HasTier(t) && fits(t)) return t;
    }
    // A child after fork() has lost the remote tier that kept the parent within its budgets;
    // the budget is the policy's, not the machine's, so the child runs over it in DRAM.
    if (pager_ && pager_->forked_child()) return Tier::kDram;
    // Where DRAM counts resident pages, a run it has no room for may still go there, uncounted
    // until CountResident finds it touched (resident.cc). A large run goes there as far as the
    // process has room (SplitRoom), and the rest to the remote tier, zero-filled at its first
    // touch: a program that asks for far more than it uses (GNU sort's buffer, sized by the
    // machine's memory) touches most of what it uses in DRAM as it would without a limit, and
    // one that writes all it asks for (a 1 GiB array filled at once) is held to its limit as
    // relief makes room, not let run past it until a count sees it. A smaller run (a heap
    // segment, an ordinary large block) is touched soon after it is asked for, and on the
    // remote tier its zero fills keep the limit from the first touch (a short program runs its
    // whole life between two counts): it goes untouched only while the count may be over by
    // pages nobody touched and the process has the room (UnseenRoom).
    if (CountsResident() && HasTier(Tier::kDram)) {
      if (bytes >= kUntouchedRunBytes) {
        // (Counting resident pages means overcommit: the remote tier takes the rest unasked.)
        *untouched = SplitRoom(bytes);
        return *untouched > 0 ? Tier::kDram : Tier::kRemote;  // no room at all: all remote
      } else if (UnseenRoom(bytes)) {
        *untouched = bytes;
        return Tier::kDram;
      }
    }
    // The remote tier that was to take what DRAM's limit leaves out was not reached at start
    // (said then): with overcommit the limit is not a cap.
    if (remote_absent_ && on_remote_full_ == RemoteFullPolicy::kOvercommit) return Tier::kDram;
    return ResourceExhausted("every tier is at its limit (TIERMEM_DRAM_LIMIT/TIERMEM_CXL_LIMIT)");
  }
  if (static_cast<int>(asked) >= kNumTiers) return InvalidArgument("invalid tier value");
  if (!HasTier(asked)) {
    if ((flags & kAllocAllowFallback) || opts_.allow_fallback) {
      TM_LOG_DEBUG("tier %s absent; allocation falls back to dram",
                   std::string(TierName(asked)).c_str());
      asked = Tier::kDram;
    } else {
      return Unavailable("tier " + std::string(TierName(asked)) +
                         " is not available: " + tier_absent_[Index(asked)]);
    }
  }
  // A page allocated on the remote tier is zero-filled into DRAM at its first touch and relies
  // on evictions to leave; with fail, none is handed out that no server could take.
  if (asked == Tier::kRemote && on_remote_full_ == RemoteFullPolicy::kFail && !RemoteCanTake(bytes)) {
    NoteRemoteFull();
    return ResourceExhausted("the remote tier is full (TIERMEM_ON_REMOTE_FULL=fail): " +
                             std::to_string(bytes) + " bytes asked");
  }
  if (!fits(asked)) {
    return ResourceExhausted(
        "tier " + std::string(TierName(asked)) + " is full: limit " +
        std::to_string(tier_limit_[Index(asked)]) + " bytes, " +
        std::to_string(allocated_[Index(asked)].load()) + " allocated, " +
        std::to_string(bytes) + " asked");
  }
  return asked;
}

bool Runtime::Impl::RemoteCanTake(uint64_t bytes) const {
  if (pager_ == nullptr || pager_->Full()) return false;
  const uint64_t cap = pager_->CapacityPages() * page_size_;
  const uint64_t limit = tier_limit_[Index(Tier::kDram)];
  const uint64_t dram = allocated_[Index(Tier::kDram)].load(std::memory_order_relaxed);
  const uint64_t owed = limit != 0 && dram > limit ? dram - limit : 0;
  return allocated_[Index(Tier::kRemote)].load(std::memory_order_relaxed) + owed + bytes <= cap;
}

uint64_t Runtime::Impl::SplitRoom(uint64_t bytes) const {
  const uint64_t limit = tier_limit_[Index(Tier::kDram)];
  const uint64_t used = std::max(os::ProcessResidentBytes(), allocated_[Index(Tier::kDram)].load(std::memory_order_relaxed));
  const uint64_t room = limit > used ? (limit - used) / page_size_ * page_size_ : 0;
  return std::min(bytes, room);
}

}  // namespace tiermem
