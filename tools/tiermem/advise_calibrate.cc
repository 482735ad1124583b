// `tiermem advise`: the cost of a remote fault over TCP on this machine (docs/advise.md).
//
// Method: a memd of its own on loopback; a runtime on it through the public API with a DRAM
// limit, as the check runs the program (budget relief, sampling, the fault handler held back
// for room); kBytes written (the excess evicted by relief), then kTouches random pages read, five times.
// The cost is the touches' time per remote fault (the median pass): a fault at a limit as the program meets it,
// with the eviction that makes its room, on this machine as loaded as it is now.
#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <thread>

#include "tiermem/options.hpp"
#include "tiermem/tiermem.hpp"
#include "tools/tiermem/advise.h"

namespace tiermem::tools {
namespace {

// 64 MiB at a 16 MiB limit: about three random touches in four fault.
constexpr size_t kBytes = size_t{64} << 20, kLimitBytes = size_t{16} << 20, kTouches = 4096;

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
  if (!memd.Start(memd_binary, "256M", token, error)) return false;
  Options o;
  // Sampling as mode auto has it under the preload library with a remote tier (soft eviction).
  o.Set("remote", memd.url()).Set("token", token).Set("dram_limit", std::to_string(kLimitBytes)).Set("sample_mode", "uffd");
  StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Start(o);
  if (!rt.ok()) {
    *error = "a runtime on the local memd: " + rt.status().ToString();
    return false;
  }
  if (!(*rt)->HasTier(Tier::kRemote)) {
    *error = "the local memd gave no remote tier: " + (*rt)->Stats()[2].absent_reason;
    return false;
  }
  StatusOr<void*> mem = (*rt)->Allocate(kBytes, Tier::kAuto);
  if (!mem.ok()) {
    *error = "64 MiB for the measurement: " + mem.status().ToString();
    return false;
  }
  const size_t pages = kBytes / page;
  auto* base = static_cast<volatile uint64_t*>(*mem);
  for (size_t i = 0; i < pages; ++i) base[i * page / 8] = i;
  // The policy thread finds the written pages by its resident counts and evicts down to the
  // limit: wait (10 s at most) until most of the excess has left.
  const uint64_t excess_pages = (kBytes - kLimitBytes) / page;
  for (int i = 0; i < 1000 && (*rt)->Counters().pages_evicted < excess_pages * 3 / 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::mt19937_64 rng(42);
  // Five passes, the median: the machine's other work comes and goes.
  std::vector<double> per_fault;
  for (int pass = 0; pass < 5; ++pass) {
    const uint64_t faults0 = (*rt)->Counters().remote_faults;
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t wrong = 0;
    for (size_t k = 0; k < kTouches; ++k) {
      const size_t i = rng() % pages;
      wrong += base[i * page / 8] != i;
    }
    const double touch_s = Since(t0);
    const uint64_t faults = (*rt)->Counters().remote_faults - faults0;
    if (wrong != 0 || faults < kTouches / 4) {
      *error = wrong != 0 ? "pages came back wrong" : "too few remote faults (" + std::to_string(faults) + ")";
      return false;
    }
    per_fault.push_back(touch_s / static_cast<double>(faults));
  }
  (void)(*rt)->Free(*mem);
  std::sort(per_fault.begin(), per_fault.end());
  *us = per_fault[per_fault.size() / 2] * 1e6;
  return true;
}

}  // namespace tiermem::tools
