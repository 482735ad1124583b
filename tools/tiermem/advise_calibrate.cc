// `tiermem advise`: the cost of a remote fault over TCP on this machine (docs/advise.md).
//
// Method (tiermem-bench remote-fault's tiered pass, short): a memd of its own on loopback; a
// runtime on it through the public API, prefetching off; kPages pages written in DRAM, evicted
// (one Migrate), then touched once each in a random order, every touch a fault. The cost is the
// touches' time per fault plus the eviction's time per page: at a DRAM limit, each page faulted
// in makes another leave, so a fault in steady state costs one read and one write.
#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

#include "tiermem/options.hpp"
#include "tiermem/tiermem.hpp"
#include "tools/tiermem/advise.h"

namespace tiermem::tools {
namespace {

constexpr size_t kPages = 4096;  // 16 MiB: about a second's faults at most

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string Token() {
  std::random_device rd;
  char buf[33];
  for (int i = 0; i < 4; ++i) snprintf(buf + 8 * i, 9, "%08x", rd());
  return buf;
}

}  // namespace

bool MeasureTcpFaultUs(const std::string& memd_binary, double* us, std::string* error) {
  const size_t page = 4096;
  LocalMemd memd;
  const std::string token = Token();
  if (!memd.Start(memd_binary, "64M", token, error)) return false;
  Options o;
  o.Set("remote", memd.url()).Set("token", token).Set("prefetch", "off").Set("sample_mode", "off");
  StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Start(o);
  if (!rt.ok()) {
    *error = "a runtime on the local memd: " + rt.status().ToString();
    return false;
  }
  if (!(*rt)->HasTier(Tier::kRemote)) {
    *error = "the local memd gave no remote tier: " + (*rt)->Stats()[2].absent_reason;
    return false;
  }
  StatusOr<void*> mem = (*rt)->Allocate(kPages * page, Tier::kDram);
  if (!mem.ok()) {
    *error = "16 MiB of DRAM for the measurement: " + mem.status().ToString();
    return false;
  }
  auto* base = static_cast<volatile uint64_t*>(*mem);
  for (size_t i = 0; i < kPages; ++i) base[i * page / 8] = i + 1;
  auto t0 = std::chrono::steady_clock::now();
  StatusOr<MigrateResult> m = (*rt)->Migrate(*mem, kPages * page, Tier::kRemote);
  const double evict_s = Since(t0);
  if (!m.ok()) {
    *error = "evicting the measurement's pages: " + m.status().ToString();
    return false;
  }
  std::vector<size_t> order(kPages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  const uint64_t faults0 = (*rt)->Counters().remote_faults;
  uint64_t sum = 0;
  t0 = std::chrono::steady_clock::now();
  for (size_t i : order) sum += base[i * page / 8];
  const double touch_s = Since(t0);
  const uint64_t faults = (*rt)->Counters().remote_faults - faults0;
  if (sum != uint64_t{kPages} * (kPages + 1) / 2 || faults == 0) {
    *error = faults == 0 ? "no remote fault was taken (the pages stayed in DRAM)" : "pages came back wrong";
    return false;
  }
  *us = (touch_s / static_cast<double>(faults) + evict_s / static_cast<double>(kPages)) * 1e6;
  (void)(*rt)->Free(*mem);
  return true;
}

}  // namespace tiermem::tools
