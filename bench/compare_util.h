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
#include <thread>
#include <vector>

#include "bench/memd_child.h"
#include "tiermem/tiermem.hpp"

namespace tiermem::bench {

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
