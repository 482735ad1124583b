// tiermem-bench kv's workload, as a model its oracle can compute with: the table's slots, the key
// hash, the order of the fill and YCSB's Zipfian generator together with the exact distribution
// it draws from. bench/kv.cc runs it; bench/kv_oracle.cc places pages by it; the unit test
// (tests/unit/kv_oracle_test.cc) checks the one against the other.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace tiermem::bench::kv {

constexpr size_t kSlot = 64;
constexpr size_t kPageBytes = 4096;
constexpr uint64_t kSlotsPerPage = kPageBytes / kSlot;

struct Slot {
  uint64_t key;  // 0 = empty
  char value[56];
};
static_assert(sizeof(Slot) == kSlot);

inline uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

// The slot where a lookup of `key` starts probing.
inline uint64_t HomeSlot(uint64_t key, uint64_t slots) { return Mix(key) % slots; }
// The key a request for Zipf item `item` asks for: popular items scattered over the keys 1..keys.
inline uint64_t KeyOfItem(uint64_t item, uint64_t keys) { return Mix(item + 0x1234) % keys + 1; }

// YCSB's Zipfian generator (Gray et al.), items 0..n-1, item 0 the most popular.
class Zipf {
 public:
  Zipf(uint64_t n, double theta) : n_(n), theta_(theta) {
    for (uint64_t i = 1; i <= n; ++i) zetan_ += 1.0 / std::pow(static_cast<double>(i), theta);
    double zeta2 = 1.0 + 1.0 / std::pow(2.0, theta);
    alpha_ = 1.0 / (1.0 - theta);
    eta_ = (1.0 - std::pow(2.0 / static_cast<double>(n), 1.0 - theta)) / (1.0 - zeta2 / zetan_);
  }
  uint64_t Next(std::mt19937_64& rng) {
    double u = std::uniform_real_distribution<double>(0, 1)(rng);
    double uz = u * zetan_;
    if (uz < 1.0) return 0;
    if (uz < 1.0 + std::pow(0.5, theta_)) return 1;
    return static_cast<uint64_t>(static_cast<double>(n_) * std::pow(eta_ * u - eta_ + 1.0, alpha_)) % n_;
  }
  uint64_t items() const { return n_; }

  // Calls f(item, p) for every item in order, p the probability that Next() returns it: the
  // measure of the u that Next() maps to the item. That is the generator's own distribution,
  // which only approximates the ideal law 1/(k+1)^theta / zeta(n). Next() gives u < 1/zetan
  // item 0, u < (1 + 0.5^theta)/zetan item 1, and otherwise floor(n (eta (u - 1) + 1)^alpha),
  // which is at least k exactly when u >= 1 + ((k/n)^(1 - theta) - 1)/eta.
  template <class F>
  void ForEachMass(F f) const {
    const double u0 = 1.0 / zetan_, u1 = (1.0 + std::pow(0.5, theta_)) / zetan_;
    auto from = [&](uint64_t k) {  // the least u with floor(...) >= k, at least u1
      const double u = 1.0 + (std::pow(static_cast<double>(k) / static_cast<double>(n_), 1.0 - theta_) - 1.0) / eta_;
      return u < u1 ? u1 : u;
    };
    double lo = from(0);
    for (uint64_t k = 0; k < n_; ++k) {
      const double hi = k + 1 == n_ ? 1.0 : from(k + 1);
      double p = hi - lo;
      if (k == 0) p += u0;
      if (k == 1) p += u1 - u0;
      f(k, p);
      lo = hi;
    }
  }

 private:
  uint64_t n_;
  double theta_, zetan_ = 0, alpha_ = 0, eta_ = 0;
};

// The table: `chunks` of chunk_slots slots each, open addressing with linear probing.
class Table {
 public:
  Table(std::vector<char*> chunks, size_t chunk_slots)
      : chunks_(std::move(chunks)), chunk_slots_(chunk_slots), slots_(chunk_slots * chunks_.size()) {}
  Slot& At(uint64_t i) { return reinterpret_cast<Slot*>(chunks_[i / chunk_slots_])[i % chunk_slots_]; }
  // Linear probing; key != 0.
  Slot* Find(uint64_t key, bool insert) {
    for (uint64_t i = HomeSlot(key, slots_), n = 0; n < slots_; ++n, i = (i + 1) % slots_) {
      Slot& s = At(i);
      if (s.key == key) return &s;
      if (s.key == 0) {
        if (!insert) return nullptr;
        s.key = key;
        return &s;
      }
    }
    return nullptr;
  }

 private:
  std::vector<char*> chunks_;
  size_t chunk_slots_;
  uint64_t slots_;
};

// The keys 1..keys in the order of their home slot (counting sort by the home slot's page), so
// the fill sweeps the table once from start to end. Inserted in key order, they land on pages at
// random: with 1/4 of the table in DRAM, 3 inserts in 4 faulted a page back from the remote tier
// (at 64 MiB, 350k faults for 16k pages), and the fill of a 1 GiB table took most of 10 minutes.
// Linear probing fills the same set of slots whatever the insertion order (only which key sits in
// which slot changes), so the table the workload runs on is equivalent.
inline std::vector<uint32_t> FillOrder(uint64_t keys, uint64_t slots) {
  const uint64_t pages = (slots + kSlotsPerPage - 1) / kSlotsPerPage;
  std::vector<uint32_t> start(pages + 1, 0);
  for (uint64_t k = 1; k <= keys; ++k) ++start[HomeSlot(k, slots) / kSlotsPerPage + 1];
  for (uint64_t p = 0; p < pages; ++p) start[p + 1] += start[p];
  std::vector<uint32_t> order(keys);
  for (uint64_t k = 1; k <= keys; ++k) order[start[HomeSlot(k, slots) / kSlotsPerPage]++] = static_cast<uint32_t>(k);
  return order;
}

}  // namespace tiermem::bench::kv
