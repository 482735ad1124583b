// Subsystem runtime/topology: owns discovery of the machine (NUMA nodes, CXL and DAX devices,
// verbs devices) and PageNodes. It calls base/ and backends/remote/rdma's loader only; nothing
// in it keeps state after discovery returns.
//
// Pieces of topology discovery that depend on optional libraries (libcxl/libdaxctl, libibverbs).
// Each fills its part of the Topology, or records why it could not.
#pragma once

#include <string>
#include <vector>

#include "tiermem/topology.hpp"

namespace tiermem::internal {

// Parses a sysfs list ("0-3,8,10-11") into numbers; false on junk.
bool ParseCpuList(const std::string& text, std::vector<int>* out);

void DiscoverCxl(Topology* topo);   // cxl_devices, dax_devices, cxl notes
void DiscoverRdma(Topology* topo);  // rdma_devices, rdma_absent_reason

}  // namespace tiermem::internal
