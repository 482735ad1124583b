// The policy configuration the policy's unit tests start from: budgets as given, watermarks at
// 1.0 (a tier is relieved as soon as it is over), a 100 ms half-life, a 50 ms residence and no
// rate limit, so each test sees the decision it drives and nothing else.
#pragma once

#include <cstdint>

#include "runtime/tiering/policy.h"

namespace tiermem {

inline PolicyConfig TestPolicyConfig(uint64_t dram, uint64_t cxl, bool has_cxl, bool has_remote) {
  PolicyConfig c;
  c.budget_pages = {dram, cxl, 0};
  c.present = {true, has_cxl, has_remote};
  c.high_watermark = 1.0;
  c.low_watermark = 1.0;
  c.half_life_ms = 100;
  c.promote_heat = 1.5;
  c.swap_margin = 1.0;
  c.min_residence_ms = 50;
  c.max_moves_per_s = 1e9;
  c.max_burst = 1e9;
  return c;
}

}  // namespace tiermem
