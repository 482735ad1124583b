// One run of an unmodified memcached under a setup of bench/preload_setup.h, loaded by
// bench/memcached_client.h: `tiermem-bench memcached` runs it under each setup at one DRAM
// budget, `tiermem-bench programs` at several.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "bench/memcached_client.h"
#include "bench/preload_setup.h"

namespace tiermem::bench {

struct McServerConfig {
  std::string memcached;  // the binary
  McLoad load;            // port: filled in once memcached listens
  uint64_t item_mb = 0;   // memcached -m
  int threads = 4;        // memcached -t
};

// Starts memcached under `setup`, stores every key, runs the gets (every value checked), stops
// it. The entry: gets_per_s, p50_us, p99_us, peak_rss_bytes, RSS at start, filled and end, gets,
// values_checked, misses, wrong_values, sets, fill_s, gets_s, wall_s, fault_counter,
// faults_per_get, fill_faults, verified (and tiermem's DRAM residency or the cgroup's usage);
// or made by SetupFailed.
nlohmann::json RunMemcached(const PreloadSetup& setup, const McServerConfig& c);

// memcached -m for `data_bytes` of values: room for every item with memcached's per-item header
// and slab rounding (up to 25%), so that nothing is evicted.
inline uint64_t McItemMegabytes(uint64_t data_bytes) { return data_bytes * 3 / 2 / (1 << 20) + 64; }

}  // namespace tiermem::bench
