// Size classes of the tiered heap: 16-byte steps up to 128 bytes, then four classes per power of
// two (25% spacing at most) up to kMaxSmall. Larger requests are page runs (see heap_core.h).
// Every class size is a multiple of 16; every power of two from 16 to kMaxSmall is a class, so
// an aligned request up to kMaxSmall always finds a class whose objects are naturally aligned
// (spans start on 64 KiB boundaries).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tiermem::alloc {

inline constexpr size_t kMaxSmall = 128 * 1024;
inline constexpr int kNumClasses = 48;
inline constexpr size_t kGranule = 64 * 1024;  // span unit and span-map granularity
inline constexpr int kGranuleShift = 16;

inline constexpr size_t ClassSize(int cls) {
  if (cls < 8) return static_cast<size_t>(cls + 1) * 16;
  const int k = 7 + (cls - 8) / 4;
  const size_t idx = static_cast<size_t>((cls - 8) % 4);
  return (size_t{1} << k) + (idx + 1) * (size_t{1} << (k - 2));
}
static_assert(ClassSize(kNumClasses - 1) == kMaxSmall);

// Class index by computation (any size up to kMaxSmall; 0 is treated as 1).
inline constexpr int SizeClassSlow(size_t size) {
  if (size <= 128) return size == 0 ? 0 : static_cast<int>((size + 15) / 16) - 1;
  const int k = 63 - __builtin_clzll(size - 1);  // 2^k < size <= 2^(k+1)
  const size_t idx = (size - 1 - (size_t{1} << k)) >> (k - 2);
  return 8 + (k - 7) * 4 + static_cast<int>(idx);
}

// Every class size is a multiple of 16, so up to kTableMax the class depends only on
// ceil(size / 16): one byte load on the malloc fast path instead of a bit scan and shifts.
inline constexpr size_t kClassTableMax = 1024;
struct ClassTable {
  uint8_t cls[kClassTableMax / 16 + 1];
};
inline constexpr ClassTable kClassTable = [] {
  ClassTable t{};
  for (size_t i = 0; i <= kClassTableMax / 16; ++i) {
    t.cls[i] = static_cast<uint8_t>(SizeClassSlow(i * 16));
  }
  return t;
}();

// Class index for a request of `size` bytes (0 is treated as 1); size <= kMaxSmall.
inline int SizeClass(size_t size) {
  if (__builtin_expect(size <= kClassTableMax, 1)) return kClassTable.cls[(size + 15) >> 4];
  return SizeClassSlow(size);
}

// Granules (64 KiB) per span of a class: at least 8 objects per span.
inline constexpr uint32_t SpanGranules(int cls) {
  const size_t want = ClassSize(cls) * 8;
  return static_cast<uint32_t>(want <= kGranule ? 1 : (want + kGranule - 1) / kGranule);
}

// Objects moved between a thread cache and the central list at once (tcmalloc's rule).
inline constexpr uint32_t BatchSize(int cls) {
  const size_t n = 64 * 1024 / ClassSize(cls);
  return static_cast<uint32_t>(n < 2 ? 2 : n > 32 ? 32 : n);
}

}  // namespace tiermem::alloc
