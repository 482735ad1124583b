// What the policy thread cost a benchmark setup, from the runtime's counters (RuntimeCounters:
// the thread's CPU time and its rounds' wall times), as every setup of gups and kv prints it.
#pragma once

#include <nlohmann/json.hpp>

#include "tiermem/tiermem.hpp"

namespace tiermem::bench {

// Adds to a setup's JSON object: policy_cpu_fraction (the policy thread's CPU time over
// `wall_s`, the setup's wall time so far), policy_round_p50_ms and policy_round_p99_ms (from the
// round-time histogram, exact to a bucket: about 12%), policy_interval_ms. `c` is read at the
// end of the setup, from the setup's own runtime. Where the setup started no policy thread the
// fraction is 0 and the other three are null.
inline void AddPolicyCost(nlohmann::json& setup, const RuntimeCounters& c, double wall_s) {
  const bool ran = c.policy_interval_ms > 0;
  setup["policy_cpu_fraction"] = wall_s > 0 ? static_cast<double>(c.policy_cpu_ns) / 1e9 / wall_s : 0.0;
  const bool rounds = ran && c.policy_round_time.count > 0;
  setup["policy_round_p50_ms"] = rounds ? nlohmann::json(c.policy_round_time.QuantileNs(0.5) / 1e6) : nullptr;
  setup["policy_round_p99_ms"] = rounds ? nlohmann::json(c.policy_round_time.QuantileNs(0.99) / 1e6) : nullptr;
  setup["policy_interval_ms"] = ran ? nlohmann::json(c.policy_interval_ms) : nullptr;
}

}  // namespace tiermem::bench
