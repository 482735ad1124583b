// PageMap<V>: a map from page keys (uint64_t) to small values, open addressing with linear
// probing in one flat array (power-of-two size, at most half full), erase by backward shift (no
// tombstones). The policy's per-round maps (the victim watch, the pages caught in use) look up
// and insert thousands of pages a round; a node-based std::unordered_map costs an allocation per
// insert and a pointer chase per lookup, where a probe here reads one or two adjacent slots.
//
// Key kEmptyKey (all ones) is reserved: page keys are page numbers (addresses >> 12), which never
// reach it. Not thread-safe (the policy thread's own). Iteration order is unspecified, as with
// std::unordered_map; callers that need an order sort what they collect.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tiermem {

template <typename V>
class PageMap {
 public:
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Every entry goes; the table keeps its size (a map refilled each round allocates nothing).
  void clear() {
    if (size_ == 0) return;
    for (Slot& s : slots_) s.key = kEmptyKey;
    size_ = 0;
  }

  void swap(PageMap& o) noexcept {
    slots_.swap(o.slots_);
    std::swap(size_, o.size_);
    std::swap(mask_, o.mask_);
  }

  V* find(uint64_t key) {
    if (size_ == 0) return nullptr;
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kEmptyKey) return nullptr;
    }
  }
  const V* find(uint64_t key) const { return const_cast<PageMap*>(this)->find(key); }
  bool contains(uint64_t key) const { return find(key) != nullptr; }

  // Adds key -> value when key is absent (true); a present key keeps its value (false), as
  // std::unordered_map::emplace.
  bool insert(uint64_t key, const V& value) {
    bool added = false;
    V& v = Place(key, &added);
    if (added) v = value;
    return added;
  }

  // The value of `key`, added as V{} when absent.
  V& operator[](uint64_t key) {
    bool added = false;
    V& v = Place(key, &added);
    if (added) v = V{};
    return v;
  }

  bool erase(uint64_t key) {
    if (size_ == 0) return false;
    size_t i = Home(key);
    while (slots_[i].key != key) {
      if (slots_[i].key == kEmptyKey) return false;
      i = (i + 1) & mask_;
    }
    EraseAt(i);
    return true;
  }

  // Removes every entry for which pred(key, value) holds. An entry shifted back into a slot
  // already passed (the table wraps) is looked at twice, which a predicate does not mind.
  template <typename Pred>
  void erase_if(Pred pred) {
    for (size_t i = 0; i < slots_.size();) {
      if (slots_[i].key != kEmptyKey && pred(slots_[i].key, slots_[i].value)) {
        EraseAt(i);  // the slot may now hold a later entry: looked at again
      } else {
        ++i;
      }
    }
  }

  // f(key, value) for each entry; f must not add or remove entries.
  template <typename F>
  void for_each(F f) const {
    for (const Slot& s : slots_) {
      if (s.key != kEmptyKey) f(s.key, s.value);
    }
  }

 private:
  struct Slot {
    uint64_t key = kEmptyKey;
    V value{};
  };

  size_t Home(uint64_t key) const {
    // Fibonacci hashing: neighbouring pages land far apart, so runs of pages do not cluster.
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
  }

  V& Place(uint64_t key, bool* added) {
    assert(key != kEmptyKey);
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    size_t i = Home(key);
    while (slots_[i].key != kEmptyKey) {
      if (slots_[i].key == key) return slots_[i].value;
      i = (i + 1) & mask_;
    }
    slots_[i].key = key;
    ++size_;
    *added = true;
    return slots_[i].value;
  }

  // Backward-shift deletion: the entries after the hole that would be found through it move up,
  // so every probe still stops at the first empty slot.
  void EraseAt(size_t hole) {
    for (size_t j = (hole + 1) & mask_;; j = (j + 1) & mask_) {
      if (slots_[j].key == kEmptyKey) break;
      const size_t home = Home(slots_[j].key);
      // The entry at j may fill the hole when its home is not in (hole, j] (cyclically).
      const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (stays) continue;
      slots_[hole] = std::move(slots_[j]);
      hole = j;
    }
    slots_[hole].key = kEmptyKey;
    slots_[hole].value = V{};
    --size_;
  }

  void Grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 16 : old.size() * 2, {});
    mask_ = slots_.size() - 1;
    size_ = 0;
    for (Slot& s : old) {
      if (s.key == kEmptyKey) continue;
      bool added = false;
      Place(s.key, &added) = std::move(s.value);
    }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
  size_t mask_ = 0;
};

}  // namespace tiermem
