#pragma once

#include <cstddef>
#include <cstdint>

namespace tiermem::testing {

// Writes a pattern that depends on the address and a seed, one 64-bit word at a time.
inline void FillPattern(void* p, size_t bytes, uint64_t seed) {
  auto* w = static_cast<uint64_t*>(p);
  for (size_t i = 0; i < bytes / 8; ++i) w[i] = (i * 0x9E3779B97F4A7C15ull) ^ seed;
}

// Index of the first word that differs from the pattern, or SIZE_MAX.
inline size_t CheckPattern(const void* p, size_t bytes, uint64_t seed) {
  auto* w = static_cast<const uint64_t*>(p);
  for (size_t i = 0; i < bytes / 8; ++i) {
    if (w[i] != ((i * 0x9E3779B97F4A7C15ull) ^ seed)) return i;
  }
  return SIZE_MAX;
}

inline uint64_t Checksum(const void* p, size_t bytes) {
  auto* w = static_cast<const uint64_t*>(p);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes / 8; ++i) h = (h ^ w[i]) * 1099511628211ull;
  return h;
}

}  // namespace tiermem::testing
