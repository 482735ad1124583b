// The timeline of a benchmark setup: its runtime appends a JSON line of live stats each second
// to PREFIX-SETUP.jsonl (TIERMEM_STATS + TIERMEM_STATS_INTERVAL_MS), and `tiermemctl plot`
// draws PREFIX-SETUP.png from it after the setup (bytes per tier, faults and migrations per
// second). gups and kv take --timeline PREFIX (default and empty: none).
#pragma once

#include <string>

#include "tiermem/options.hpp"

namespace tiermem::bench {

// Adds the stats file and interval for `setup` to `o` (nothing when prefix is empty).
void AddTimeline(Options& o, const std::string& prefix, const std::string& setup);
// Runs `tiermemctl plot` on the setup's timeline; one line on stderr when it cannot.
void PlotTimeline(const std::string& prefix, const std::string& setup);

}  // namespace tiermem::bench
