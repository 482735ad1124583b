// Clock: the one place the runtime's threads take the time from when they wait, pace or expire
// something: the repair thread's second and its rejoin back-off, its copy pacing, the policy
// thread's rounds (RoundPacer's schedule), budget relief's patience and its pause while the
// remote tier is full, a full server's pause, a forked child's wait for its claims. Tests give
// those parts a ManualClock, so what a test waits for is a step of time it takes itself, not a
// sleep (leveldb's Env idea, for time alone).
//
// Latency *measurements* (t0 = os::MonotonicNanos(); ... Record(os::MonotonicNanos() - t0)) stay
// on the real monotonic clock: they describe the machine, not the schedule, and a manual clock
// would make them zero.
//
// Times are nanoseconds on the clock's own monotonic scale (SystemClock(): CLOCK_MONOTONIC, the
// scale of os::MonotonicNanos), never 0 for a clock in use.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <type_traits>
#include <vector>

namespace tiermem {

class Clock {
 public:
  virtual uint64_t NowNanos() const = 0;

  // Waits on `cv` (with `lock`, of its mutex, held on entry and on return) until `done()` is
  // true or the clock reaches `deadline_ns`, whichever comes first; returns done() as last
  // seen. Spurious wake-ups are absorbed. Whoever makes done() true notifies `cv` as usual.
  // Thread-safe; allocation-free on SystemClock (the fault handler thread waits through it).
  template <typename Done>
  bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, uint64_t deadline_ns,
                 Done&& done) {
    using D = std::remove_reference_t<Done>;
    return WaitUntilImpl(cv, lock, deadline_ns, DoneRef{const_cast<void*>(static_cast<const void*>(&done)),
                                                        [](void* d) { return static_cast<bool>((*static_cast<D*>(d))()); }});
  }
  // Returns when the clock has reached `deadline_ns` (at once if it has).
  virtual void SleepUntil(uint64_t deadline_ns) = 0;

 protected:
  // Not deleted through a Clock*: the destructor stays trivial, so SystemClock() is never torn
  // down at exit while a runtime thread may still ask it the time.
  ~Clock() = default;
  // A reference to the caller's predicate that needs no allocation (std::function may).
  struct DoneRef {
    void* obj;
    bool (*call)(void*);
    bool operator()() const { return call(obj); }
  };
  virtual bool WaitUntilImpl(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, uint64_t deadline_ns,
                             DoneRef done) = 0;
};

// The real monotonic clock: the default of every part that takes a Clock. Lives for the whole
// process (a constant-initialized object: usable before main and inside malloc).
Clock& SystemClock();

// A clock that moves only when told: Advance and Set by a test, and SleepUntil, which takes no
// real time and moves the clock to its deadline, as if the sleeper were the only one running.
// WaitUntil blocks in real time until done() or until the clock is moved to its deadline.
//
// Each move wakes every waiter by notifying its cv with its mutex held, so no wake-up is lost
// between a waiter's look at the time and its wait. Contract: Advance/Set/SleepUntil are not
// called with a waiter's mutex held, and a waiter's cv and mutex outlive any move that may
// overlap its wait (a test stops the threads that wait before it destroys what they wait on).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(uint64_t start_ns = kStartNs) : now_ns_(start_ns) {}

  uint64_t NowNanos() const override;
  void SleepUntil(uint64_t deadline_ns) override;
  // Moves the clock on by `ns` / to `now_ns` (never back: an earlier time is ignored).
  void Advance(uint64_t ns);
  void Set(uint64_t now_ns);
  // Times a waiter went (back) to waiting so far: at the start of a WaitUntil, and after each
  // wake-up that did not end it. A test moves the clock, then waits (in real time, bounded) for
  // this to grow, to know the waiter has done what the move let it do and waits again.
  uint64_t waits() const;
  // Total time SleepUntil moved the clock by.
  uint64_t slept_ns() const;

  // One second: 0 stays free to mean "never" for the callers' stamps.
  static constexpr uint64_t kStartNs = 1'000'000'000;

 private:
  bool WaitUntilImpl(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, uint64_t deadline_ns,
                     DoneRef done) override;
  void MoveTo(uint64_t now_ns);
  struct Waiter {
    std::condition_variable* cv;
    std::mutex* mu;
  };
  mutable std::mutex mu_;  // guards everything below; taken after a waiter's mutex, never before
  uint64_t now_ns_;
  uint64_t waits_ = 0;
  uint64_t slept_ns_ = 0;
  std::vector<Waiter> waiters_;
};

}  // namespace tiermem
