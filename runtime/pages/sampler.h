// The access sampler's contract, shared by the policy thread (runtime/tiering, which arms and
// collects) and the two mechanisms behind it: protection faults (runtime/tiering/tracker.h:
// SIGSEGV on PROT_NONE pages) and soft eviction (runtime/paging/soft_sampler.h: a sampled page's
// bytes are kept in a local copy, its page table entry is dropped, and the next touch is caught
// by the pager's userfaultfd and served from the copy). A header of its own, below both, so
// neither subsystem includes the other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace tiermem {

// One access seen: the page's key (address / page size), whether it was a write, when.
// `weight`: how many accesses it stands for (the policy scales sampled accesses by the inverse
// sampling probability; a remote fault is always seen and weighs 1).
struct AccessSample {
  uint64_t page = 0;
  bool write = false;
  uint64_t time_ns = 0;
  float weight = 1;
};

// A sampler watches a set of resident pages for their next read or write. Rounds: Arm starts
// one, Collect ends it. Thread safety: every method may be called from any thread; Arm and
// Collect come from the policy thread.
class AccessSampler {
 public:
  struct Counters {
    uint64_t armed = 0;    // pages armed in total
    uint64_t touched = 0;  // of those, pages whose access was caught
    uint64_t rounds = 0;
  };
  virtual ~AccessSampler() = default;

  // "protect" or "uffd": the TIERMEM_SAMPLE_MODE value that selects it.
  virtual const char* name() const = 0;
  // The most pages armed at once (carried pages included).
  virtual size_t max_armed() const = 0;
  // False once the mechanism stopped working (the program replaced the SIGSEGV handler, or a
  // fork is in progress): the policy thread then stops arming.
  virtual bool usable() const = 0;
  // Ends the current round: every armed page is given back untouched, and an access sample is
  // appended for each page touched since it was armed. `untouched` (when given) receives the
  // keys of the pages armed all round and never touched. A page for whose key `keep` returns
  // true stays armed and is carried into the next round by the next Arm (a CLOCK hand that stays
  // on the page until it is touched, released or no longer kept).
  virtual void Collect(uint64_t now_ns, std::vector<AccessSample>* out, std::vector<uint64_t>* untouched = nullptr,
                       const std::function<bool(uint64_t)>& keep = {}) = 0;
  // Starts a round on the carried pages and `pages` (page-aligned addresses of resident,
  // allocated pages; max_armed() in all at most, carried pages first). Pages that cannot be
  // armed (not resident, busy) are skipped. Returns the number armed, carried included.
  // `armable` (when given) is asked about each new page under the sampler's lock, just before
  // the page is armed: a page it refuses (claimed by an eviction since the caller chose it,
  // say) is skipped. Together with Release this keeps a page that is being sent from being
  // armed: an evictor claims the page first and releases it after (Pager::WatchClaims), so
  // either this check sees the claim or that Release finds the page armed and lifts it, before
  // any byte of it is sent. The uffd sampler claims its pages itself and needs no filter.
  using ArmFilter = std::function<bool(const char*)>;
  virtual size_t Arm(const std::vector<char*>& pages, const ArmFilter& armable = {}) = 0;
  // Pages carried over by the last Collect (still armed until Arm or Release).
  virtual size_t carried() const = 0;
  // Gives back armed (or carried) pages inside [addr, addr+len) untouched, before they are moved,
  // evicted, freed or queried. Their accesses are forgotten.
  virtual void Release(const void* addr, size_t len) = 0;
  virtual void DisarmAll() = 0;
  virtual Counters counters() const = 0;
};

}  // namespace tiermem
