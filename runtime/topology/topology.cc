#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "base/os.h"
#include "runtime/topology/topology_internal.h"
#include "tiermem/topology.hpp"

namespace tiermem {
namespace {

bool ReadFile(const std::string& path, std::string* out) { return os::ReadWholeFile(path.c_str(), out) == 0; }

bool ReadUint(const std::string& path, uint64_t* out) {
  std::string s;
  if (!ReadFile(path, &s) || s.empty()) return false;
  char* end = nullptr;
  unsigned long long v = strtoull(s.c_str(), &end, 10);
  if (end == s.c_str()) return false;
  *out = v;
  return true;
}

// "Node 0 MemTotal:       24568916 kB" -> bytes for the given key.
uint64_t MeminfoBytes(const std::string& meminfo, const std::string& key) {
  const std::string needle = " " + key + ":";
  const size_t pos = meminfo.find(needle);
  if (pos == std::string::npos) return 0;
  return strtoull(meminfo.c_str() + pos + needle.size(), nullptr, 10) * 1024;
}

}  // namespace

namespace internal {
bool ParseCpuList(const std::string& text, std::vector<int>* out) {
  out->clear();
  std::string t = text;
  t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return c == '\n' || c == ' '; }),
          t.end());
  if (t.empty()) return true;
  size_t begin = 0;
  while (begin < t.size()) {  // a trailing comma ends the list, as getline did
    size_t comma = t.find(',', begin);
    if (comma == std::string::npos) comma = t.size();
    const std::string part = t.substr(begin, comma - begin);
    begin = comma + 1;
    if (part.empty()) return false;
    char* end = nullptr;
    long a = strtol(part.c_str(), &end, 10);
    if (end == part.c_str() || a < 0) return false;
    long b = a;
    if (*end == '-') {
      const char* s = end + 1;
      b = strtol(s, &end, 10);
      if (end == s || b < a) return false;
    }
    if (*end != '\0' || b - a > 1 << 20) return false;
    for (long i = a; i <= b; ++i) out->push_back(static_cast<int>(i));
  }
  return true;
}
}  // namespace internal

std::string_view NodeKindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::kDram: return "dram";
    case NodeKind::kCxl: return "cxl";
    case NodeKind::kFar: return "far";
  }
  return "?";
}

const NumaNode* Topology::Node(int id) const {
  for (const NumaNode& n : nodes) {
    if (n.id == id) return &n;
  }
  return nullptr;
}

std::vector<int> Topology::NodesOf(NodeKind kind) const {
  std::vector<int> out;
  for (const NumaNode& n : nodes) {
    if (n.kind == kind && n.mem_bytes > 0) out.push_back(n.id);
  }
  return out;
}

namespace {

// One node's CPUs, memory, distances and HMAT attributes, from sysfs's node<id> directory.
NumaNode ReadNode(const std::string& node_dir, int id) {
  NumaNode node;
  node.id = id;
  const std::string d = node_dir + "/node" + std::to_string(id);
  std::string s;
  if (ReadFile(d + "/cpulist", &s)) internal::ParseCpuList(s, &node.cpus);
  if (ReadFile(d + "/meminfo", &s)) {
    node.mem_bytes = MeminfoBytes(s, "MemTotal");
    node.free_bytes = MeminfoBytes(s, "MemFree");
  }
  if (ReadFile(d + "/distance", &s)) {
    const char* p = s.c_str();
    for (;;) {
      char* end = nullptr;
      const long v = strtol(p, &end, 10);
      if (end == p) break;
      node.distances.push_back(static_cast<int>(v));
      p = end;
    }
  }
  const std::string acc = d + "/access0/initiators";
  uint64_t v = 0;
  if (ReadUint(acc + "/read_latency", &v)) {
    node.hmat.present = true;
    node.hmat.read_latency_ns = static_cast<uint32_t>(v);
  }
  if (ReadUint(acc + "/write_latency", &v)) node.hmat.write_latency_ns = static_cast<uint32_t>(v);
  if (ReadUint(acc + "/read_bandwidth", &v)) {
    node.hmat.present = true;
    node.hmat.read_bandwidth_mib_s = static_cast<uint32_t>(v);
  }
  if (ReadUint(acc + "/write_bandwidth", &v)) {
    node.hmat.write_bandwidth_mib_s = static_cast<uint32_t>(v);
  }
  std::vector<std::string> names;
  if (os::ListDir(acc.c_str(), &names) == 0) {
    for (const std::string& name : names) {
      int n = -1;
      if (sscanf(name.c_str(), "node%d", &n) == 1) node.hmat.initiators.push_back(n);
    }
    std::sort(node.hmat.initiators.begin(), node.hmat.initiators.end());
  }
  return node;
}

// Classify: CPUs -> dram; memory-only and targeted by a system-ram dax device -> cxl;
// any other memory-only node -> far. Says why no node is CXL when none is.
void Classify(Topology* topo_out) {
  Topology& topo = *topo_out;
  bool any_memory_only = false;
  for (NumaNode& n : topo.nodes) {
    if (!n.cpus.empty()) {
      n.kind = NodeKind::kDram;
      n.kind_reason = "has CPUs";
      continue;
    }
    any_memory_only = true;
    n.kind = NodeKind::kFar;
    n.kind_reason = "memory-only node with no CXL region or dax device behind it";
    for (const DaxDevice& dax : topo.dax_devices) {
      if (dax.target_node == n.id && dax.mode == "system-ram") {
        n.kind = NodeKind::kCxl;
        n.kind_reason = dax.name + " (system-ram" +
                        std::string(dax.cxl_backed ? ", on a CXL region" : ", kmem") +
                        ") targets this node";
        break;
      }
    }
  }
  if (topo.NodesOf(NodeKind::kCxl).empty()) {
    std::string why;
    if (!any_memory_only) {
      why = "no memory-only NUMA node (every node has CPUs)";
    } else {
      why = "memory-only nodes exist but no CXL region or system-ram dax device targets them";
    }
    if (!topo.cxl_absent_reason.empty()) why += "; " + topo.cxl_absent_reason;
    topo.cxl_absent_reason = why;
  } else {
    topo.cxl_absent_reason.clear();
  }
}

}  // namespace

StatusOr<Topology> DiscoverTopology(std::string_view sysfs_root) {
  Topology topo;
  const std::string node_dir = std::string(sysfs_root) + "/devices/system/node";
  std::string online;
  std::vector<int> ids;
  if (!ReadFile(node_dir + "/online", &online)) {
    // Kernels built without NUMA have no node directory: the whole machine is node 0.
    if (!ReadFile(node_dir + "/possible", &online)) {
      return Unavailable("cannot read " + node_dir + "/online: is sysfs mounted?");
    }
  }
  if (!internal::ParseCpuList(online, &ids) || ids.empty()) {
    return Internal("cannot parse the NUMA node list '" + online + "'");
  }
  for (int id : ids) topo.nodes.push_back(ReadNode(node_dir, id));
  internal::DiscoverCxl(&topo);
  internal::DiscoverRdma(&topo);
  Classify(&topo);
  return topo;
}

}  // namespace tiermem
