// A fixed-size array of a trivial type on its own anonymous mapping, zero from the start and
// committed page by page as it is written (os::Reserve: MAP_NORESERVE, never touched here). A
// ring sized for the worst case (the migrator's relief ring: 2 MiB for 1 GiB of pages) then
// costs the process resident memory only for the entries it has used, where a std::vector
// filled with zeros is resident whole from the start, and the runtime counts it as its own DRAM
// as far as it has been written (OwnMapping). Not thread-safe; movable, not copyable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "base/own_memory.h"
#include "tiermem/status.hpp"

namespace tiermem {

template <typename T>
class ZeroedArray {
  static_assert(std::is_trivial_v<T>, "ZeroedArray holds trivial types (zero bytes are a valid value)");

 public:
  // Maps `n` elements, all zero (what was held before is unmapped). ResourceExhausted when the
  // address space cannot be had; the array is then empty.
  Status Reset(size_t n) {
    mem_.Release();
    if (n == 0) return Status::Ok();
    if (n > SIZE_MAX / sizeof(T)) return ResourceExhausted(std::to_string(n) + " elements do not fit the address space");
    int err = 0;
    if (mem_.Map(n * sizeof(T), &err) == nullptr) {
      return ResourceExhausted("mapping " + std::to_string(n * sizeof(T)) + " bytes: " + std::strerror(-err));
    }
    return Status::Ok();
  }

  size_t size() const { return mem_.size() / sizeof(T); }
  bool empty() const { return mem_.size() == 0; }
  // Writable access counts the array as resident up to element i (the runtime's own DRAM,
  // own_memory.h): its users fill it from the start and wrap around, so the high-water mark is
  // what is resident.
  T& operator[](size_t i) {
    mem_.Touched((i + 1) * sizeof(T));
    return data()[i];
  }
  const T& operator[](size_t i) const { return data()[i]; }
  // Bytes counted as resident so far (whole pages).
  size_t counted_bytes() const { return mem_.counted(); }

 private:
  T* data() const { return reinterpret_cast<T*>(mem_.data()); }

  OwnMapping mem_;  // movable, not copyable; unmapped on destruction
};

}  // namespace tiermem
