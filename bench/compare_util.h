// Helpers shared by tiermem-bench's compare, gups and kv subcommands: a memd child on loopback
// (bench/memd_child.h), percentiles, timing, and the runtime started with TIERMEM_* settings for
// one measurement.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/memd_child.h"
#include "tiermem/tiermem.hpp"

namespace tiermem::bench {

// NUMA nodes of a tier as the runtime reports them (empty when the tier is absent).
inline std::vector<int> TierNodes(const Runtime& rt, Tier tier) {
  for (const TierStats& s : rt.Stats()) {
    if (s.tier == tier) return s.nodes;
  }
  return {};
}

// A decimal count ("20"); false on junk or overflow. (Sizes: tiermem::ParseSize.)
inline bool ParseUint(std::string_view text, uint64_t* out) {
  if (text.empty()) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9' || v > (UINT64_MAX - static_cast<uint64_t>(c - '0')) / 10) return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

// The benchmarks' clock: std::chrono's steady clock (CLOCK_MONOTONIC), the same one
// base/os.h's MonotonicNanos reads for the library.
inline uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

inline double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Starts a Runtime with extra TIERMEM_* variables set only while it reads its options.
inline StatusOr<std::unique_ptr<Runtime>> StartWithEnv(
    const Options& o, const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> saved;
  for (auto& [k, v] : env) {
    if (const char* old = getenv(k.c_str())) saved[k] = old;
    setenv(k.c_str(), v.c_str(), 1);
  }
  auto rt = Runtime::Start(o);
  for (auto& [k, v] : env) {
    if (saved.count(k)) {
      setenv(k.c_str(), saved[k].c_str(), 1);
    } else {
      unsetenv(k.c_str());
    }
  }
  return rt;
}

}  // namespace tiermem::bench
