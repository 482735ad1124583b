#include "tools/tiermemctl/json.h"

namespace tiermem::tools {

using nlohmann::json;

json TopologyToJson(const Topology& topo) {
  json nodes = json::array();
  for (const NumaNode& n : topo.nodes) {
    json j = {{"id", n.id},
              {"tier", std::string(NodeKindName(n.kind))},
              {"kind_reason", n.kind_reason},
              {"memory_only", n.cpus.empty()},
              {"cpus", n.cpus},
              {"mem_bytes", n.mem_bytes},
              {"free_bytes", n.free_bytes},
              {"distances", n.distances}};
    if (n.hmat.present) {
      j["hmat"] = {{"read_latency_ns", n.hmat.read_latency_ns},
                   {"write_latency_ns", n.hmat.write_latency_ns},
                   {"read_bandwidth_mib_s", n.hmat.read_bandwidth_mib_s},
                   {"write_bandwidth_mib_s", n.hmat.write_bandwidth_mib_s},
                   {"initiators", n.hmat.initiators}};
    } else {
      j["hmat"] = nullptr;
    }
    nodes.push_back(std::move(j));
  }
  json cxl = json::array();
  for (const CxlDevice& d : topo.cxl_devices) {
    cxl.push_back({{"name", d.name}, {"type", d.type}, {"bytes", d.bytes}, {"detail", d.detail}});
  }
  json dax = json::array();
  for (const DaxDevice& d : topo.dax_devices) {
    dax.push_back({{"name", d.name},
                   {"mode", d.mode},
                   {"target_node", d.target_node},
                   {"bytes", d.bytes},
                   {"cxl_backed", d.cxl_backed},
                   {"path", d.path}});
  }
  json rdma = json::array();
  for (const RdmaDevice& d : topo.rdma_devices) {
    json ports = json::array();
    for (const RdmaPort& p : d.ports) {
      ports.push_back({{"port", p.port},
                       {"state", p.state},
                       {"link_layer", p.link_layer},
                       {"active_mtu", p.active_mtu},
                       {"gid0", p.gid0}});
    }
    rdma.push_back({{"name", d.name},
                    {"transport", d.transport},
                    {"node_guid", d.node_guid},
                    {"ports", ports}});
  }
  json out = {{"nodes", nodes},
              {"cxl_devices", cxl},
              {"dax_devices", dax},
              {"rdma_devices", rdma},
              {"absent", {{"cxl", topo.cxl_absent_reason.empty() ? json(nullptr)
                                                                 : json(topo.cxl_absent_reason)},
                          {"rdma", topo.rdma_absent_reason.empty()
                                       ? json(nullptr)
                                       : json(topo.rdma_absent_reason)}}},
              {"notes", topo.notes}};
  return out;
}

json TierStatsToJson(const std::vector<TierStats>& stats) {
  json arr = json::array();
  for (const TierStats& s : stats) {
    json j = {{"tier", std::string(TierName(s.tier))},
              {"available", s.available},
              {"nodes", s.nodes},
              {"capacity_bytes", s.capacity_bytes},
              {"limit_bytes", s.limit_bytes},
              {"allocated_bytes", s.allocated_bytes},
              {"pages_migrated_in", s.pages_migrated_in},
              {"pages_migrated_out", s.pages_migrated_out}};
    if (!s.available) j["absent_reason"] = s.absent_reason;
    arr.push_back(std::move(j));
  }
  return arr;
}

}  // namespace tiermem::tools
