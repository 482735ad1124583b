// OncePer: lets one caller through per interval, for messages that may come from many threads
// at once (a full remote tier is met by the evicting thread and by every allocating thread).
// One atomic timestamp, taken by compare-and-swap: no lock and no allocation, so it is safe
// inside malloc, in the fault handler thread, and with the pager's locks held.
#pragma once

#include <atomic>
#include <cstdint>

namespace tiermem {

class OncePer {
 public:
  explicit constexpr OncePer(uint64_t interval_ns) : interval_ns_(interval_ns) {}

  // True for the first call, then for the first call at least interval_ns after the last one
  // that returned true; of callers racing for the same turn exactly one gets true. `now_ns`: a
  // monotonic clock (os::MonotonicNanos), never 0.
  bool Take(uint64_t now_ns) {
    uint64_t last = last_ns_.load(std::memory_order_relaxed);
    // A racer may have taken a turn stamped after our `now`: not due then (no wrap-around).
    if (last != 0 && now_ns < last + interval_ns_) return false;
    return last_ns_.compare_exchange_strong(last, now_ns, std::memory_order_relaxed);
  }
  // Whether a turn was ever taken.
  bool taken() const { return last_ns_.load(std::memory_order_relaxed) != 0; }

 private:
  const uint64_t interval_ns_;
  std::atomic<uint64_t> last_ns_{0};
};

}  // namespace tiermem
