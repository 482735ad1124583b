// A fixed-size array of a trivial type on its own anonymous mapping, zero from the start and
// committed page by page as it is written (os::Reserve: MAP_NORESERVE, never touched here). A
// ring sized for the worst case (the migrator's relief ring: 2 MiB for 1 GiB of pages) then
// costs the process resident memory only for the entries it has used, where a std::vector
// filled with zeros is resident whole from the start. Not thread-safe; movable, not copyable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "base/os.h"
#include "tiermem/status.hpp"

namespace tiermem {

template <typename T>
class ZeroedArray {
  static_assert(std::is_trivial_v<T>, "ZeroedArray holds trivial types (zero bytes are a valid value)");

 public:
  ZeroedArray() = default;
  ZeroedArray(const ZeroedArray&) = delete;
  ZeroedArray& operator=(const ZeroedArray&) = delete;
  ZeroedArray(ZeroedArray&& o) noexcept { *this = std::move(o); }
  ZeroedArray& operator=(ZeroedArray&& o) noexcept {
    if (this != &o) {
      Release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~ZeroedArray() { Release(); }

  // Maps `n` elements, all zero (what was held before is unmapped). ResourceExhausted when the
  // address space cannot be had; the array is then empty.
  Status Reset(size_t n) {
    Release();
    if (n == 0) return Status::Ok();
    if (n > SIZE_MAX / sizeof(T)) return ResourceExhausted(std::to_string(n) + " elements do not fit the address space");
    int err = 0;
    void* p = os::Reserve(n * sizeof(T), &err);
    if (p == nullptr) {
      return ResourceExhausted("mapping " + std::to_string(n * sizeof(T)) + " bytes: " + std::strerror(-err));
    }
    data_ = static_cast<T*>(p);
    size_ = n;
    return Status::Ok();
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  void Release() {
    if (data_ != nullptr) (void)os::Unmap(data_, size_ * sizeof(T));
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tiermem
