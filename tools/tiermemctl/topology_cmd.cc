#include <cstdio>
#include <iostream>
#include <string>

#include "tiermem/options.hpp"
#include "tiermem/tiermem.hpp"
#include "tools/tiermemctl/commands.h"
#include "tools/tiermemctl/json.h"

namespace tiermem::tools {
namespace {

std::string Mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

std::string List(const std::vector<int>& v) {
  if (v.empty()) return "-";
  // Compress runs: 0-3,8
  std::string s;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(v[i]);
    if (j > i) s += "-" + std::to_string(v[j]);
    i = j + 1;
  }
  return s;
}

}  // namespace

int TopologyCommand(bool json) {
  auto topo = DiscoverTopology();
  if (!topo.ok()) {
    std::fprintf(stderr, "tiermemctl: %s\n", topo.status().ToString().c_str());
    return 1;
  }
  if (json) {
    std::cout << TopologyToJson(*topo).dump(2) << "\n";
    return 0;
  }
  std::printf("%-5s %-5s %-10s %12s %12s %-16s %s\n", "node", "tier", "cpus", "memory", "free",
              "hmat rd lat/bw", "why");
  for (const NumaNode& n : topo->nodes) {
    std::string hmat = "-";
    if (n.hmat.present) {
      hmat = std::to_string(n.hmat.read_latency_ns) + "ns/" +
             std::to_string(n.hmat.read_bandwidth_mib_s) + "MiB/s";
    }
    std::printf("%-5d %-5s %-10s %12s %12s %-16s %s\n", n.id,
                std::string(NodeKindName(n.kind)).c_str(), List(n.cpus).c_str(),
                Mib(n.mem_bytes).c_str(), Mib(n.free_bytes).c_str(), hmat.c_str(),
                n.kind_reason.c_str());
  }
  std::printf("\nCXL devices:");
  if (topo->cxl_devices.empty() && topo->dax_devices.empty()) std::printf(" none");
  std::printf("\n");
  for (const CxlDevice& d : topo->cxl_devices) {
    std::printf("  %-10s %-7s %10s  %s\n", d.name.c_str(), d.type.c_str(), Mib(d.bytes).c_str(),
                d.detail.c_str());
  }
  for (const DaxDevice& d : topo->dax_devices) {
    std::printf("  %-10s dax     %10s  mode %s, target node %d%s\n", d.name.c_str(),
                Mib(d.bytes).c_str(), d.mode.c_str(), d.target_node,
                d.cxl_backed ? ", on a CXL region" : "");
  }
  if (!topo->cxl_absent_reason.empty()) {
    std::printf("  no CXL tier: %s\n", topo->cxl_absent_reason.c_str());
  }
  std::printf("\nRDMA devices:");
  if (topo->rdma_devices.empty()) std::printf(" none");
  std::printf("\n");
  for (const RdmaDevice& d : topo->rdma_devices) {
    std::printf("  %-10s %s, guid %s\n", d.name.c_str(), d.transport.c_str(), d.node_guid.c_str());
    for (const RdmaPort& p : d.ports) {
      std::printf("    port %d: %s, %s, mtu %d, gid0 %s\n", p.port, p.state.c_str(),
                  p.link_layer.c_str(), p.active_mtu, p.gid0.c_str());
    }
  }
  if (!topo->rdma_absent_reason.empty()) {
    std::printf("  no RDMA device: %s\n", topo->rdma_absent_reason.c_str());
  }
  for (const std::string& note : topo->notes) std::printf("note: %s\n", note.c_str());
  return 0;
}

int OptionsCommand(bool json, bool markdown) {
  const std::vector<OptionInfo> table = OptionTable();
  if (markdown) {
    // README's options table is generated from this (scripts/gen-readme.py): keep it stable.
    auto cell = [](std::string text) {
      for (size_t i = 0; (i = text.find('|', i)) != std::string::npos; i += 2) text.insert(i, "\\");
      return text;
    };
    std::printf("| variable | default | meaning |\n|---|---|---|\n");
    for (const OptionInfo& o : table) {
      std::string def = o.default_value.empty() ? "\"\"" : o.default_value;
      std::printf("| `%s` | `%s` | %s |\n", o.name.c_str(), def.c_str(), cell(o.help).c_str());
    }
    return 0;
  }
  if (json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const OptionInfo& o : table) {
      arr.push_back({{"name", o.name}, {"kind", o.kind}, {"default", o.default_value}, {"help", o.help}});
    }
    std::cout << arr.dump(2) << "\n";
    return 0;
  }
  for (const OptionInfo& o : table) {
    std::printf("%-26s default \"%s\"\n    %s\n", o.name.c_str(), o.default_value.c_str(), o.help.c_str());
  }
  return 0;
}

int TiersCommand(bool json) {
  auto rt = Runtime::Start();
  if (!rt.ok()) {
    std::fprintf(stderr, "tiermemctl: %s\n", rt.status().ToString().c_str());
    return 1;
  }
  auto stats = (*rt)->Stats();
  if (json) {
    std::cout << nlohmann::json{{"tiers", TierStatsToJson(stats)}}.dump(2) << "\n";
    return 0;
  }
  for (const TierStats& s : stats) {
    std::printf("%-7s %s", std::string(TierName(s.tier)).c_str(),
                s.available ? "available" : "absent   ");
    if (s.available) {
      std::printf("  nodes %s  capacity %s%s\n", List(s.nodes).c_str(), Mib(s.capacity_bytes).c_str(),
                  s.limit_bytes != 0 ? (" (the limit; TIERMEM_" + std::string(TierName(s.tier)) + "_LIMIT)").c_str() : "");
    } else {
      std::printf("  %s\n", s.absent_reason.c_str());
    }
  }
  return 0;
}

}  // namespace tiermem::tools
