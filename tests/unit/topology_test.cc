// Topology discovery against fake sysfs trees built in a temporary directory.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "runtime/topology/topology_internal.h"
#include "tiermem/topology.hpp"

namespace tiermem {
namespace {

namespace fs = std::filesystem;

class FakeSysfs {
 public:
  FakeSysfs() {
    char tmpl[] = "/tmp/tiermem-sysfs-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  ~FakeSysfs() { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  void Node(int id, const std::string& cpus, uint64_t kb, const std::string& distance) {
    std::string d = "devices/system/node/node" + std::to_string(id);
    Write(d + "/cpulist", cpus + "\n");
    Write(d + "/meminfo", "Node " + std::to_string(id) + " MemTotal:  " + std::to_string(kb) +
                              " kB\nNode " + std::to_string(id) + " MemFree:   " +
                              std::to_string(kb / 2) + " kB\n");
    Write(d + "/distance", distance + "\n");
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(CpuList, Parses) {
  std::vector<int> v;
  EXPECT_TRUE(internal::ParseCpuList("0-3,8,10-11\n", &v));
  EXPECT_EQ(v, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_TRUE(internal::ParseCpuList("", &v));
  EXPECT_TRUE(v.empty());
  EXPECT_FALSE(internal::ParseCpuList("3-1", &v));
  EXPECT_FALSE(internal::ParseCpuList("a", &v));
  EXPECT_FALSE(internal::ParseCpuList("1,,2", &v));
  EXPECT_FALSE(internal::ParseCpuList(",0", &v));
  EXPECT_TRUE(internal::ParseCpuList("0,1,", &v));
  EXPECT_EQ(v, (std::vector<int>{0, 1}));
  EXPECT_TRUE(internal::ParseCpuList("5 \n", &v));
  EXPECT_EQ(v, (std::vector<int>{5}));
}

TEST(Topology, OneDramNode) {
  FakeSysfs s;
  s.Write("devices/system/node/online", "0\n");
  s.Node(0, "0-1", 1048576, "10");
  auto t = DiscoverTopology(s.root());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->nodes.size(), 1u);
  EXPECT_EQ(t->nodes[0].kind, NodeKind::kDram);
  EXPECT_EQ(t->nodes[0].cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(t->nodes[0].mem_bytes, 1ull << 30);
  EXPECT_EQ(t->nodes[0].free_bytes, 1ull << 29);
  EXPECT_FALSE(t->nodes[0].hmat.present);
  EXPECT_TRUE(t->NodesOf(NodeKind::kCxl).empty());
  EXPECT_NE(t->cxl_absent_reason.find("no memory-only NUMA node"), std::string::npos);
}

TEST(Topology, MemoryOnlyNodeWithHmatIsFar) {
  FakeSysfs s;
  s.Write("devices/system/node/online", "0-1\n");
  s.Node(0, "0-1", 1048576, "10 20");
  s.Node(1, "", 1048576, "20 10");
  s.Write("devices/system/node/node1/access0/initiators/read_latency", "250\n");
  s.Write("devices/system/node/node1/access0/initiators/read_bandwidth", "10240\n");
  fs::create_directories(fs::path(s.root()) / "devices/system/node/node1/access0/initiators/node0");
  auto t = DiscoverTopology(s.root());
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->nodes.size(), 2u);
  const NumaNode* n1 = t->Node(1);
  ASSERT_NE(n1, nullptr);
  EXPECT_EQ(n1->kind, NodeKind::kFar);  // no dax device targets it in this fake tree
  EXPECT_TRUE(n1->cpus.empty());
  EXPECT_TRUE(n1->hmat.present);
  EXPECT_EQ(n1->hmat.read_latency_ns, 250u);
  EXPECT_EQ(n1->hmat.read_bandwidth_mib_s, 10240u);
  EXPECT_EQ(n1->hmat.initiators, (std::vector<int>{0}));
  EXPECT_EQ(n1->distances, (std::vector<int>{20, 10}));
  EXPECT_EQ(t->NodesOf(NodeKind::kFar), (std::vector<int>{1}));
}

TEST(Topology, MissingSysfsIsAClearError) {
  auto t = DiscoverTopology("/nonexistent-sysfs");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("/nonexistent-sysfs/devices/system/node"),
            std::string::npos);
}

TEST(Topology, RealMachineHasADramNode) {
  auto t = DiscoverTopology();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_FALSE(t->NodesOf(NodeKind::kDram).empty());
  // Every absence is explained.
  if (t->NodesOf(NodeKind::kCxl).empty()) {
    EXPECT_FALSE(t->cxl_absent_reason.empty());
  }
  if (t->rdma_devices.empty()) {
    EXPECT_FALSE(t->rdma_absent_reason.empty());
  }
}

}  // namespace
}  // namespace tiermem
