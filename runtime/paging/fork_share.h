// fork() without fetching (docs/design-notes.md, "fork: remote pages shared with the child"):
// what the pager keeps of a fork's remote pages, and the holds on the slots a child may still
// read. Plain data structures; the pager (pager_fork.cc) does the locking and the I/O.
//
// - ForkSnapshot: the remote pages of the parent at fork (region, page, pager slot), sorted, and
//   which of them have been installed in the child already (or given up). Made by the atfork
//   prepare handler. The parent's copy is read and written by the one thread serving that child;
//   the child's own copy (inherited) by the child's thread once it took over, and ChildDrop,
//   under the child pager's self_mu_. 16 bytes a remote page.
// - SlotHolds: per pager slot, how many snapshots hold it, and whether the parent has let go of
//   it meanwhile (freed the page, or written it elsewhere). The pager gives a slot back to its
//   pool only when both are done. Every method runs with the pager's io_mu_ held. Hold()
//   allocates (it runs in the fork prepare handler, where allocation is allowed); Defer() and
//   Release() never do, so frees from inside the allocator may call them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tiermem {

class Region;

struct ForkSnapshot {
  struct Entry {    // 16 bytes
    uint32_t region;  // in `regions`
    uint32_t slot;    // pager slot of its copy at fork (PageRecord::remote_slot is 32 bits)
    uint64_t index;   // page index in the region
  };
  std::vector<Region*> regions;  // the runtime's regions at the fork
  std::vector<Entry> entries;   // sorted by (region, index)
  std::vector<uint8_t> served;  // entries[i] was installed in the child (or given up)

  // Sorts entries and sizes `served`; call once, after the last entry was added.
  void Seal() {
    std::sort(entries.begin(), entries.end(), Less);
    served.assign(entries.size(), 0);
  }
  Region* RegionOf(const Entry& e) const { return regions[e.region]; }
  // The first entry at or after page `index` of `region` (entries.size() when none), or -1 when
  // `region` is not one of the fork's.
  int64_t LowerBound(const Region* region, uint64_t index) const {
    auto r = std::find(regions.begin(), regions.end(), region);
    if (r == regions.end()) return -1;
    const Entry key{static_cast<uint32_t>(r - regions.begin()), 0, index};
    return std::lower_bound(entries.begin(), entries.end(), key, Less) - entries.begin();
  }
  // The entry of page `index` of `region`, or -1.
  int64_t Find(const Region* region, uint64_t index) const {
    const int64_t j = LowerBound(region, index);
    if (j < 0 || j == int64_t(entries.size())) return -1;
    const Entry& e = entries[j];
    return regions[e.region] == region && e.index == index ? j : -1;
  }

 private:
  static bool Less(const Entry& a, const Entry& b) {
    return a.region != b.region ? a.region < b.region : a.index < b.index;
  }
};

class SlotHolds {
 public:
  bool empty() const { return held_ == 0; }
  size_t size() const { return held_; }
  // One more snapshot holds `slot`.
  void Hold(uint64_t slot) {
    if (slot >= v_.size()) v_.resize(slot + 1);
    if ((v_[slot] & ~kLetGo) == 0) ++held_;
    ++v_[slot];
  }
  // The parent lets go of `slot`. True when a snapshot still holds it: it stays allocated (its
  // copy intact) until the last Release, which then says so. False: not held, free it now.
  bool Defer(uint64_t slot) {
    if (!Held(slot)) return false;
    v_[slot] |= kLetGo;
    return true;
  }
  bool Held(uint64_t slot) const { return slot < v_.size() && (v_[slot] & ~kLetGo) != 0; }
  // A snapshot lets go of `slot`. True when the parent had let go of it too and this was the last
  // hold: the caller frees it now. The table's memory goes when nothing is held any more.
  bool Release(uint64_t slot) {
    if (!Held(slot)) return false;
    const uint16_t v = static_cast<uint16_t>(v_[slot] - 1);
    if ((v & ~kLetGo) != 0) {
      v_[slot] = v;
      return false;
    }
    v_[slot] = 0;
    if (--held_ == 0) std::vector<uint16_t>().swap(v_);
    return (v & kLetGo) != 0;
  }

 private:
  static constexpr uint16_t kLetGo = 1u << 15;
  // Per pager slot: snapshots holding it (up to 32767) | kLetGo. Two bytes a slot, dense: a few
  // hundred KiB for a GiB of remote pages, where a hash table took tens of bytes a page.
  std::vector<uint16_t> v_;
  size_t held_ = 0;  // slots with a hold
};

}  // namespace tiermem
