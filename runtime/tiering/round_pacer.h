// RoundPacer: when the policy thread's next round may start, so that the thread's CPU time stays
// within a share of one CPU (TIERMEM_POLICY_CPU) however much a round costs.
//
// Pure: no clock of its own, every call takes the time (monotonic ns) and the thread's CPU time
// (ns, CLOCK_THREAD_CPUTIME_ID), so tests drive it with made-up numbers (round_pacer_test.cc).
//
// A token bucket of CPU time: credit accrues at `share` ns of CPU per ns of wall time, up to a
// few intervals' worth, and whatever the thread spent (rounds and the budget relief between them
// alike) is taken from it. The earnings of a period are capped before what it used is taken, so
// the share is never exceeded over any stretch longer than the bucket. The debt is bounded too
// (kMaxPaybackIntervals): relief is not held back, so a storm of faults could otherwise leave a
// debt that kept rounds away long after it ended. A round may start when the credit is not negative and its interval
// has passed since the last round ended; after a round that cost more than the credit, the next
// waits until the credit is back at zero: a 50 ms round at a 5% share is followed by 950 ms
// without rounds. Relief is never held back (keeping the DRAM limit is not optional); its CPU
// time delays the rounds after it (the next round's start is set when a round ends, so relief
// during that wait delays the one after).
#pragma once

#include <algorithm>
#include <cstdint>

namespace tiermem {

class RoundPacer {
 public:
  // share_percent: percent of one CPU (1-99); 0, or 100 and above: no bound, rounds every
  // interval as before. interval_ns: the least time from a round's end to the next's start.
  RoundPacer(uint64_t share_percent, uint64_t interval_ns)
      : share_(share_percent == 0 || share_percent >= 100 ? 0.0 : static_cast<double>(share_percent) / 100.0),
        interval_ns_(interval_ns),
        max_credit_ns_(share_ * static_cast<double>(interval_ns) * kBurstIntervals),
        max_debt_ns_(share_ * static_cast<double>(interval_ns) * kMaxPaybackIntervals) {}

  bool bounded() const { return share_ > 0; }

  // Starts the accounting at (now_ns, cpu_ns) with a full bucket.
  void Start(uint64_t now_ns, uint64_t cpu_ns) {
    last_ns_ = now_ns;
    last_cpu_ns_ = cpu_ns;
    credit_ns_ = max_credit_ns_;
  }

  // A round ended at now_ns with the thread's CPU time at cpu_ns; `idle` rounds (nothing
  // sampled, planned or moved) wait five intervals, as before the pacer. Returns the earliest
  // time the next round may start.
  uint64_t NextRound(uint64_t now_ns, uint64_t cpu_ns, bool idle) {
    Account(now_ns, cpu_ns);
    const uint64_t gap = idle ? interval_ns_ * 5 : interval_ns_;
    if (!bounded() || credit_ns_ >= 0) return now_ns + gap;
    const auto payback = static_cast<uint64_t>(-credit_ns_ / share_);
    return now_ns + std::max(gap, payback);
  }

  // The credit in ns of CPU time (negative: owed), after accounting up to (now_ns, cpu_ns).
  double Credit(uint64_t now_ns, uint64_t cpu_ns) {
    Account(now_ns, cpu_ns);
    return credit_ns_;
  }

  // Bucket size in intervals: a short burst of costly rounds after a quiet spell is not delayed.
  static constexpr double kBurstIntervals = 4;
  // The longest wait a debt buys, in intervals (2 s at the default 20 ms).
  static constexpr double kMaxPaybackIntervals = 100;

 private:
  void Account(uint64_t now_ns, uint64_t cpu_ns) {
    if (!bounded()) return;
    const uint64_t wall = now_ns > last_ns_ ? now_ns - last_ns_ : 0;
    const uint64_t used = cpu_ns > last_cpu_ns_ ? cpu_ns - last_cpu_ns_ : 0;
    credit_ns_ = std::max(-max_debt_ns_, std::min(max_credit_ns_, credit_ns_ + share_ * static_cast<double>(wall)) -
                                             static_cast<double>(used));
    last_ns_ = std::max(last_ns_, now_ns);
    last_cpu_ns_ = std::max(last_cpu_ns_, cpu_ns);
  }

  double share_;
  uint64_t interval_ns_;
  double max_credit_ns_;
  double max_debt_ns_;
  uint64_t last_ns_ = 0, last_cpu_ns_ = 0;
  double credit_ns_ = 0;
};

}  // namespace tiermem
