// fork() without fetching (docs/design-notes.md, "fork: remote pages shared with the child"):
// the data the pager keeps for each child it serves, and the holds on the slots a child may still
// read. Plain data structures; the pager (pager_fork.cc) does the locking and the I/O.
//
// - ForkSnapshot: the remote pages of the parent at fork (region, page, pager slot), sorted, and
//   which of them have been installed in the child already. Made by the atfork prepare handler,
//   read and written by the one thread serving that child only.
// - SlotHolds: per pager slot, how many snapshots hold it, and whether the parent has let go of
//   it meanwhile (freed the page, or written it elsewhere). The pager gives a slot back to its
//   pool only when both are done. Every method runs with the pager's io_mu_ held. Hold()
//   allocates (it runs in the fork prepare handler, where allocation is allowed); Defer() and
//   Release() never do, so frees from inside the allocator may call them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace tiermem {

class Region;

struct ForkSnapshot {
  struct Entry {
    Region* region;
    uint64_t index;  // page index in region
    uint64_t slot;   // pager slot of its copy at fork
  };
  std::vector<Entry> entries;   // sorted by (region, index)
  std::vector<uint8_t> served;  // entries[i] was installed in the child (or given up)

  // Sorts entries and sizes `served`; call once, after the last entry was added.
  void Seal() {
    std::sort(entries.begin(), entries.end(), Less);
    served.assign(entries.size(), 0);
  }
  // The entry of page `index` of `region`, or -1.
  int64_t Find(const Region* region, uint64_t index) const {
    const Entry key{const_cast<Region*>(region), index, 0};
    auto it = std::lower_bound(entries.begin(), entries.end(), key, Less);
    if (it == entries.end() || it->region != region || it->index != index) return -1;
    return it - entries.begin();
  }

 private:
  static bool Less(const Entry& a, const Entry& b) {
    return a.region != b.region ? a.region < b.region : a.index < b.index;
  }
};

class SlotHolds {
 public:
  bool empty() const { return holds_.empty(); }
  size_t size() const { return holds_.size(); }
  // One more snapshot holds `slot`.
  void Hold(uint64_t slot) { ++holds_[slot]; }
  // The parent lets go of `slot`. True when a snapshot still holds it: it stays allocated (its
  // copy intact) until the last Release, which then says so. False: not held, free it now.
  bool Defer(uint64_t slot) {
    auto it = holds_.find(slot);
    if (it == holds_.end()) return false;
    it->second |= kLetGo;
    return true;
  }
  bool Held(uint64_t slot) const { return holds_.count(slot) != 0; }
  // A snapshot lets go of `slot`. True when the parent had let go of it too and this was the last
  // hold: the caller frees it now.
  bool Release(uint64_t slot) {
    auto it = holds_.find(slot);
    if (it == holds_.end()) return false;
    const uint32_t v = it->second - 1;
    if ((v & ~kLetGo) != 0) {
      it->second = v;
      return false;
    }
    holds_.erase(it);
    return (v & kLetGo) != 0;
  }

 private:
  static constexpr uint32_t kLetGo = 1u << 31;
  std::unordered_map<uint64_t, uint32_t> holds_;  // slot -> snapshots holding it | kLetGo
};

}  // namespace tiermem
