// The machine's memory tiers as tiermem sees them: NUMA nodes classified as dram / cxl / far,
// the CXL and DAX devices behind them, and the RDMA devices the remote tier can use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tiermem/status.hpp"

namespace tiermem {

enum class NodeKind : uint8_t {
  kDram,  // has CPUs
  kCxl,   // memory-only, backed by a CXL region or a dax device onlined as system-ram (kmem)
  kFar,   // memory-only, of unknown kind
};
std::string_view NodeKindName(NodeKind kind);  // "dram", "cxl", "far"

// HMAT figures from /sys/devices/system/node/nodeN/access0/initiators/ (0 when not exposed).
struct HmatAccess {
  bool present = false;
  uint32_t read_latency_ns = 0;
  uint32_t write_latency_ns = 0;
  uint32_t read_bandwidth_mib_s = 0;
  uint32_t write_bandwidth_mib_s = 0;
  std::vector<int> initiators;  // nodes listed as access0 initiators
};

struct NumaNode {
  int id = -1;
  NodeKind kind = NodeKind::kDram;
  std::string kind_reason;  // why this kind, e.g. "dax0.0 (system-ram) targets this node"
  std::vector<int> cpus;
  uint64_t mem_bytes = 0;
  uint64_t free_bytes = 0;
  std::vector<int> distances;  // distances[i] = distance to the i-th online node (sysfs order)
  HmatAccess hmat;
};

// A CXL object (memdev or region) found through libcxl.
struct CxlDevice {
  std::string name;  // "mem0", "region0"
  std::string type;  // "memdev" or "region"
  uint64_t bytes = 0;  // pmem+ram size of a memdev, size of a region
  std::string detail;  // e.g. "pmem 512 MiB, ram 0" or "decoder0.0, interleave 1"
};

// A dax device found through libdaxctl.
struct DaxDevice {
  std::string name;   // "dax0.0"
  std::string mode;   // "system-ram" or "devdax"
  int target_node = -1;
  uint64_t bytes = 0;
  bool cxl_backed = false;  // its region sits under a CXL root decoder
  std::string path;         // resolved sysfs path
};

struct RdmaPort {
  int port = 0;
  std::string state;       // "active", "down", ...
  std::string link_layer;  // "Ethernet", "InfiniBand"
  int active_mtu = 0;
  std::string gid0;        // GID index 0, if any
};

struct RdmaDevice {
  std::string name;  // "rxe0", "mlx5_0"
  std::string node_guid;
  std::string transport;  // "InfiniBand", "iWARP", ...
  std::vector<RdmaPort> ports;
};

struct Topology {
  std::vector<NumaNode> nodes;
  std::vector<CxlDevice> cxl_devices;
  std::vector<DaxDevice> dax_devices;
  std::vector<RdmaDevice> rdma_devices;
  // Empty when the thing was looked for and found; otherwise one line saying why it is absent,
  // e.g. "no memory-only NUMA node" or "tiermem built without libibverbs".
  std::string cxl_absent_reason;
  std::string rdma_absent_reason;
  std::vector<std::string> notes;  // other things discovery could not look at, and why

  const NumaNode* Node(int id) const;
  std::vector<int> NodesOf(NodeKind kind) const;
};

// Reads the machine. Never fails because an optional library or device is absent: that is
// recorded in the *_absent_reason fields. Fails only when /sys/devices/system/node is unreadable.
// `sysfs_root` exists for tests ("/sys" normally).
StatusOr<Topology> DiscoverTopology(std::string_view sysfs_root = "/sys");

// The NUMA node of every page of [p, p + len) of this process, tiermem's memory or not (for
// comparing with the kernel's own placement); -errno (move_pages' status) for a page without
// one, e.g. -ENOENT when not resident.
//
// By frame number first: /proc/self/pagemap (frame numbers are shown to root only) and the
// memory blocks each node lists in sysfs. move_pages' query alone misses the pages the
// NUMA-balancing scanner has just made PROT_NONE to catch their next access (numa_balancing=2
// does so all the time): kernel 6.1 answers -ENOENT for those, and the scanner works through
// whole ranges, so a whole range of hot pages would read as "not resident".
std::vector<int> PageNodes(const void* p, size_t len);

}  // namespace tiermem
