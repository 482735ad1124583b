// A standard container whose memory lives on one tier: std::pmr::vector on the CXL tier.
//
// On a machine without a CXL (or other memory-only) NUMA node, allow_fallback places the pages
// in DRAM instead, and the program says so. Build it against an installed tiermem with
// find_package(tiermem) and target_link_libraries(... tiermem::tiermem). README shows the part
// between the README:begin and README:end lines (scripts/gen-readme.py copies it).
#include <cstdint>
#include <cstdio>
#include <memory_resource>
#include <numeric>
#include <string>
#include <vector>

#include "tiermem/tiermem.hpp"

// README:begin
int main() {
  tiermem::Options options;
  options.Set("allow_fallback", true);  // an absent tier gives DRAM rather than std::bad_alloc
  auto rt = tiermem::Runtime::Start(options);
  if (!rt.ok()) {
    std::fprintf(stderr, "tiermem: %s\n", rt.status().ToString().c_str());
    return 1;
  }
  tiermem::Runtime& runtime = **rt;

  // 64 MiB whose pages live on the CXL tier. Declared after rt, so destroyed before it.
  std::pmr::vector<uint64_t> values((64u << 20) / sizeof(uint64_t),
                                    runtime.Resource(tiermem::Tier::kCxl));
  std::iota(values.begin(), values.end(), uint64_t{0});
  // README:end

  // Where did the pages go? One PageLocation per page of the vector's storage.
  auto where = runtime.Locate(values.data(), values.size() * sizeof(uint64_t));
  if (!where.ok()) {
    std::fprintf(stderr, "tiermem: %s\n", where.status().ToString().c_str());
    return 1;
  }
  size_t pages_per_tier[tiermem::kNumTiers] = {};
  for (const tiermem::PageLocation& page : *where) pages_per_tier[static_cast<int>(page.tier)]++;
  std::printf("64 MiB vector asked for the cxl tier:");
  for (int t = 0; t < tiermem::kNumTiers; ++t) {
    std::string name(tiermem::TierName(static_cast<tiermem::Tier>(t)));
    std::printf("%s %zu pages on %s", t == 0 ? "" : ",", pages_per_tier[t], name.c_str());
  }
  std::printf("\n");
  if (!runtime.HasTier(tiermem::Tier::kCxl)) {
    for (const tiermem::TierStats& s : runtime.Stats()) {
      if (s.tier == tiermem::Tier::kCxl) {
        std::printf("no cxl tier on this machine (%s): the pages went to DRAM\n",
                    s.absent_reason.c_str());
      }
    }
  }

  const uint64_t n = values.size();
  const uint64_t sum = std::accumulate(values.begin(), values.end(), uint64_t{0});
  std::printf("sum %s\n", sum == n * (n - 1) / 2 ? "ok" : "WRONG");
  return sum == n * (n - 1) / 2 ? 0 : 1;
}
