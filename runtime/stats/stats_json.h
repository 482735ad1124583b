// The runtime's own JSON read-outs (stats_json.cc). ProcessStatsJson, the stats JSON, is public
// (tiermem/stats.hpp); this is the other one.
#pragma once

#include <string>

#include "tiermem/tiermem.hpp"

namespace tiermem {

// RuntimeCounters as one JSON object, the keys named as its fields ("tiermem.counters.json").
std::string RuntimeCountersJson(const RuntimeCounters& c);

}  // namespace tiermem
