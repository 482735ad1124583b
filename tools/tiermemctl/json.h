// JSON forms of the runtime's public structures, shared by tiermemctl and tiermem-bench.
#pragma once

#include <nlohmann/json.hpp>

#include "tiermem/tiermem.hpp"
#include "tiermem/topology.hpp"

namespace tiermem::tools {

nlohmann::json TopologyToJson(const Topology& topo);
nlohmann::json TierStatsToJson(const std::vector<TierStats>& stats);

}  // namespace tiermem::tools
