// A runtime for the policy thread's tests: a memd of the test's as its remote tier, a DRAM limit,
// a sampling mode and a 5 ms round (policy_cpu_test.cc, sampling_rounds_test.cc).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "remote_memd_fixture.h"
#include "tiermem/tiermem.hpp"

namespace tiermem::testing {

// `policy_cpu`: TIERMEM_POLICY_CPU (0: no bound). The mode and interval go by the environment
// (set for the start only), as a program's would.
inline StatusOr<std::unique_ptr<Runtime>> StartSampled(MemdProcess& memd, const char* mode, uint64_t dram_limit,
                                                      uint64_t policy_cpu = 0) {
  setenv("TIERMEM_SAMPLE_MODE", mode, 1);
  setenv("TIERMEM_SAMPLE_INTERVAL_MS", "5", 1);
  Options o;
  o.Set("dram_limit", dram_limit);
  o.Set("remote", memd.url());
  o.Set("policy_cpu", policy_cpu);
  auto rt = Runtime::Start(o);
  unsetenv("TIERMEM_SAMPLE_MODE");
  unsetenv("TIERMEM_SAMPLE_INTERVAL_MS");
  return rt;
}

}  // namespace tiermem::testing
