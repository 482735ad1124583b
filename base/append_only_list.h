// A list that only grows at its end, read by any thread without a lock while one writer at a
// time appends: a fixed array of N owning pointers and an atomic count. An entry is built whole
// before the count that covers it is published (release), so a reader that loaded size()
// (acquire) may use every entry below it; entries never move and live as long as the list.
// Appends are serialized by the caller (one lock, or one thread).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>

namespace tiermem {

template <typename T, size_t N>
class AppendOnlyList {
 public:
  static constexpr size_t kCapacity = N;

  size_t size() const { return n_.load(std::memory_order_acquire); }
  bool empty() const { return size() == 0; }
  // i < size() as the caller loaded it.
  const std::unique_ptr<T>& operator[](size_t i) const { return items_[i]; }
  // False (and `item` dropped) when the list holds N entries.
  bool push_back(std::unique_ptr<T> item) {
    const size_t n = n_.load(std::memory_order_relaxed);
    if (n == N) return false;
    items_[n] = std::move(item);
    n_.store(n + 1, std::memory_order_release);
    return true;
  }
  // The entries published when begin()/end() are called (end() loads the count once).
  const std::unique_ptr<T>* begin() const { return items_.data(); }
  const std::unique_ptr<T>* end() const { return items_.data() + size(); }

 private:
  std::array<std::unique_ptr<T>, N> items_{};
  std::atomic<size_t> n_{0};
};

}  // namespace tiermem
