// What ps, stat, top and serve-metrics share: reading a block with a clear error, rates between
// two snapshots, the JSON form of a block, byte counts for people.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tiermem/stats.hpp"

namespace tiermem::tools {

// Reads pid's block. On failure (or a stale block when !allow_stale) prints one line saying why
// to stderr and returns the error. A stale block with allow_stale is returned.
StatusOr<ProcessStats> ReadForDisplay(int pid, bool allow_stale);
// What ReadForDisplay does with a block already read: says on stderr why it cannot be shown.
StatusOr<ProcessStats> ForDisplay(int pid, StatusOr<ProcessStats> read, bool allow_stale);

// Events per second between two snapshots of one process, `seconds` apart (counters that went
// backwards, a new process with the same pid, count as 0).
struct Rates {
  double seconds = 0;
  double remote_faults = 0;
  double zero_fills = 0;
  double sampling_faults = 0;
  double pages_evicted = 0;
  double pages_written = 0;
  double policy_rounds = 0;
  std::array<std::array<double, kNumTiers>, kNumTiers> moves{};  // pages/s, [from][to]
  double moves_total() const;
};
Rates ComputeRates(const ProcessStats& before, const ProcessStats& after, double seconds);

// The block as the runtime's timeline writes it (ProcessStatsJson, t_ns the time of this call),
// so `stat --json --interval` output is a timeline `plot` draws.
nlohmann::json ProcessStatsToJson(const ProcessStats& s);
nlohmann::json RatesToJson(const Rates& r);

// "12.3 MiB", "1.0 GiB", "512 B".
std::string HumanBytes(uint64_t bytes);
// The tier's allocated bytes, 0 when the block has no entry for it.
uint64_t TierBytes(const ProcessStats& s, Tier tier);
// Seconds since an unspecified point (steady clock), for intervals.
double NowSeconds();
// Sleeps; returns false when interrupted by SIGINT/SIGTERM (InstallStopHandler).
bool SleepMs(uint32_t ms);
void InstallStopHandler();
bool StopRequested();

}  // namespace tiermem::tools
