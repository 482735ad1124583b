// SystemClock (the real monotonic clock) and ManualClock (tests'): base/clock.h.
#include "base/clock.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/os.h"

namespace tiermem {
namespace {

class RealClock final : public Clock {
 public:
  constexpr RealClock() = default;
  uint64_t NowNanos() const override { return os::MonotonicNanos(); }
  void SleepUntil(uint64_t deadline_ns) override {
    const uint64_t now = NowNanos();
    if (deadline_ns > now) std::this_thread::sleep_for(std::chrono::nanoseconds(deadline_ns - now));
  }

 private:
  bool WaitUntilImpl(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, uint64_t deadline_ns,
                     DoneRef done) override {
    // A relative wait from a fresh reading each time: no assumption that steady_clock's epoch
    // is CLOCK_MONOTONIC's.
    while (!done()) {
      const uint64_t now = NowNanos();
      if (now >= deadline_ns) return done();
      cv.wait_for(lock, std::chrono::nanoseconds(deadline_ns - now));
    }
    return true;
  }
};

constinit RealClock g_real_clock;

}  // namespace

Clock& SystemClock() { return g_real_clock; }

uint64_t ManualClock::NowNanos() const {
  std::lock_guard<std::mutex> lock(mu_);
  return now_ns_;
}

uint64_t ManualClock::waits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waits_;
}

uint64_t ManualClock::slept_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slept_ns_;
}

void ManualClock::Advance(uint64_t ns) {
  uint64_t to;
  {
    std::lock_guard<std::mutex> lock(mu_);
    to = now_ns_ + ns;
  }
  MoveTo(to);
}

void ManualClock::Set(uint64_t now_ns) { MoveTo(now_ns); }

void ManualClock::SleepUntil(uint64_t deadline_ns) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (deadline_ns <= now_ns_) return;
    slept_ns_ += deadline_ns - now_ns_;
  }
  MoveTo(deadline_ns);
}

void ManualClock::MoveTo(uint64_t now_ns) {
  std::vector<Waiter> waiters;
  {
    std::lock_guard<std::mutex> lock(mu_);
    now_ns_ = std::max(now_ns_, now_ns);
    waiters = waiters_;
  }
  // With the waiter's mutex held: a waiter that read the old time is inside cv.wait by now.
  for (const Waiter& w : waiters) {
    std::lock_guard<std::mutex> lock(*w.mu);
    w.cv->notify_all();
  }
}

bool ManualClock::WaitUntilImpl(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                                uint64_t deadline_ns, DoneRef done) {
  {
    std::lock_guard<std::mutex> g(mu_);
    waiters_.push_back(Waiter{&cv, lock.mutex()});
  }
  bool result = done();
  for (;;) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (result || now_ns_ >= deadline_ns) break;
      ++waits_;  // counted before the wait, with the waiter's mutex held: a move after sees it
    }
    cv.wait(lock);
    result = done();
  }
  std::lock_guard<std::mutex> g(mu_);
  auto it = std::find_if(waiters_.begin(), waiters_.end(), [&](const Waiter& w) { return w.cv == &cv; });
  if (it != waiters_.end()) waiters_.erase(it);
  return result;
}

}  // namespace tiermem
