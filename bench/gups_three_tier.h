// The three-tier GUPS workload of the QEMU `full` guest, shared by the guest test
// (tests/qemu/tiering_full_test.cc, under tiermem) and `tiermem-bench gups --kernel` (plain mmap,
// the kernel's own tiering), so both sides run exactly the same updates.
//
// 48 chunks of 1 MiB: chunks [0, 5) are the hot set (~10% of the pages, 90% of the updates),
// [5, 15) the warm set (~20%, 9%), [15, 48) the cold rest (1%). Each update xors a random 64-bit
// word of the chosen chunk with the random number that chose it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>

namespace tiermem::bench::three_tier {

constexpr size_t kChunkBytes = 1 << 20;
constexpr int kChunks = 48;
constexpr int kHot = 5;       // chunks [0, kHot)
constexpr int kWarmEnd = 15;  // chunks [kHot, kWarmEnd); the rest is cold
constexpr uint64_t kSeed = 7;

// Which set a chunk belongs to: 0 hot, 1 warm, 2 cold.
inline int SetOf(int chunk) { return chunk < kHot ? 0 : chunk < kWarmEnd ? 1 : 2; }

// Writes every word once, in address order (as GUPS initialises its table).
inline void Fill(char* const* chunks) {
  for (int c = 0; c < kChunks; ++c) {
    auto* w = reinterpret_cast<uint64_t*>(chunks[c]);
    for (size_t i = 0; i < kChunkBytes / 8; ++i) w[i] = i * 8;
  }
}

// `n` updates drawn from `rng`.
inline void Update(char* const* chunks, std::mt19937_64& rng, int n) {
  for (int k = 0; k < n; ++k) {
    const uint64_t r = rng();
    const int pick = static_cast<int>(r % 100);
    const int c = pick < 90 ? static_cast<int>((r >> 8) % kHot)
                : pick < 99 ? kHot + static_cast<int>((r >> 8) % (kWarmEnd - kHot))
                            : kWarmEnd + static_cast<int>((r >> 8) % (kChunks - kWarmEnd));
    reinterpret_cast<uint64_t*>(chunks[c])[(r >> 24) % (kChunkBytes / 8)] ^= r;
  }
}

}  // namespace tiermem::bench::three_tier
