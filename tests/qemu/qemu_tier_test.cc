// Guest-side test of tiermem in the QEMU topologies (qemu/run-guest.sh): what `tiermemctl
// topology --json` reports, and placement and migration through the API on the memory-only node.
//
// The topology comes from the guest environment that run-guest.sh writes (QEMU_TOPOLOGY,
// QEMU_HMAT_*, QEMU_CXL_NODE, QEMU_RDMA_DEVICES); outside a guest every
// test skips with that reason. tiermemctl is found on PATH (the guest's /tiermem/bin).
#include <sys/mman.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/tiering/migrator.h"
#include "runtime/core/runtime_impl.h"
#include "tiermem/tiermem.hpp"
#include "tiermem/topology.hpp"

namespace tiermem {
namespace {

using nlohmann::json;

constexpr size_t kPage = 4096;
constexpr size_t kBytes = 64ull << 20;  // the 64 MiB
constexpr size_t kPages = kBytes / kPage;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string Topology() { return Env("QEMU_TOPOLOGY"); }
bool HasMemoryOnlyNode() { return Topology() == "numa" || Topology() == "cxl" || Topology() == "full"; }
bool HasCxl() { return Topology() == "cxl" || Topology() == "full"; }
bool HasRdma() { return Topology() == "rdma" || Topology() == "full"; }

// The memory-only node of the topology (run-guest.sh makes it node 1 in every topology).
int FarNode() {
  std::string n = Env("QEMU_CXL_NODE");
  return n.empty() ? 1 : std::atoi(n.c_str());
}

#define SKIP_OUTSIDE_GUEST()                                                              \
  do {                                                                                    \
    if (Topology().empty()) GTEST_SKIP() << "not in a QEMU guest (QEMU_TOPOLOGY unset)"; \
  } while (0)

// Runs a shell command and returns its stdout; fails the test on a non-zero exit.
std::string RunCommand(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) {
    ADD_FAILURE() << "popen(" << cmd << "): " << std::strerror(errno);
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  int st = pclose(f);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd << " exited with status " << st;
  return out;
}

json TopologyJson() {
  std::string text = RunCommand("tiermemctl topology --json");
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "tiermemctl topology --json printed invalid JSON:\n" << text;
  return j;
}

const json* NodeById(const json& topo, int id) {
  if (!topo.contains("nodes")) return nullptr;
  for (const json& n : topo["nodes"]) {
    if (n.value("id", -1) == id) return &n;
  }
  return nullptr;
}

// First of `keys` present in object `o` as a number, or -1.
int64_t NumberOf(const json& o, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (o.contains(k) && o[k].is_number()) return o[k].get<int64_t>();
  }
  return -1;
}

uint64_t PageWord(size_t page, size_t word) { return (page * 0x9E3779B97F4A7C15ull) ^ (word * 0x5851F42D4C957F2Dull) ^ 0xC0FFEEull; }

void Fill(void* p) {
  auto* w = static_cast<uint64_t*>(p);
  for (size_t pg = 0; pg < kPages; ++pg) {
    for (size_t i = 0; i < kPage / 8; ++i) w[pg * kPage / 8 + i] = PageWord(pg, i);
  }
}

uint64_t Checksum(const void* p) {
  const auto* w = static_cast<const uint64_t*>(p);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < kBytes / 8; ++i) h = (h ^ w[i]) * 1099511628211ull;
  return h;
}

// Pages of [p, p+kBytes) per node (-1: not resident).
std::map<int, size_t> NodeCounts(Runtime& rt, const void* p, Tier* common_tier = nullptr, bool* same_tier = nullptr) {
  std::map<int, size_t> counts;
  auto where = rt.Locate(p, kBytes);
  EXPECT_TRUE(where.ok()) << where.status().ToString();
  if (!where.ok()) return counts;
  EXPECT_EQ(where->size(), kPages);
  bool same = true;
  for (const PageLocation& loc : *where) {
    ++counts[loc.resident ? loc.node : -1];
    if (loc.tier != where->front().tier) same = false;
  }
  if (common_tier != nullptr && !where->empty()) *common_tier = where->front().tier;
  if (same_tier != nullptr) *same_tier = same;
  return counts;
}

std::string Describe(const std::map<int, size_t>& counts) {
  std::ostringstream s;
  for (auto [node, n] : counts) s << (node < 0 ? std::string("not-resident") : "node" + std::to_string(node)) << "=" << n << " ";
  return s.str();
}

TEST(QemuTopology, TiermemctlJsonDescribesTheGuest) {
  SKIP_OUTSIDE_GUEST();
  json topo = TopologyJson();
  ASSERT_TRUE(topo.is_object());
  std::printf("tiermemctl topology --json:\n%s\n", topo.dump(2).c_str());

  const json* n0 = NodeById(topo, 0);
  ASSERT_NE(n0, nullptr) << "node 0 missing";
  EXPECT_EQ(n0->value("tier", ""), "dram");
  EXPECT_FALSE((*n0)["cpus"].empty()) << "node 0 lists no CPUs";

  if (HasMemoryOnlyNode()) {
    const json* n1 = NodeById(topo, FarNode());
    ASSERT_NE(n1, nullptr) << "node " << FarNode() << " missing";
    EXPECT_TRUE((*n1)["cpus"].empty()) << "node " << FarNode() << " should be memory-only";
    EXPECT_GT(n1->value("mem_bytes", uint64_t{0}), uint64_t{256} << 20);
    EXPECT_EQ(n1->value("tier", ""), HasCxl() ? "cxl" : "far") << n1->dump();
  } else {
    EXPECT_EQ(NodeById(topo, 1), nullptr) << "the rdma topology has one node";
  }

  if (Topology() == "numa") {
    // The HMAT figures QEMU was given, for both nodes.
    for (int id : {0, 1}) {
      const json* n = NodeById(topo, id);
      ASSERT_NE(n, nullptr);
      ASSERT_TRUE(n->contains("hmat")) << "node " << id << " has no hmat: " << n->dump();
      const json& h = (*n)["hmat"];
      std::string p = "QEMU_HMAT_NODE" + std::to_string(id);
      int64_t lat = std::atoll(Env((p + "_LATENCY_NS").c_str()).c_str());
      int64_t bw = std::atoll(Env((p + "_BANDWIDTH_MIBS").c_str()).c_str());
      EXPECT_EQ(NumberOf(h, {"read_latency_ns", "read_latency"}), lat) << h.dump();
      EXPECT_EQ(NumberOf(h, {"write_latency_ns", "write_latency"}), lat) << h.dump();
      EXPECT_EQ(NumberOf(h, {"read_bandwidth_mib_s", "read_bandwidth_mibs", "read_bandwidth"}), bw) << h.dump();
      EXPECT_EQ(NumberOf(h, {"write_bandwidth_mib_s", "write_bandwidth_mibs", "write_bandwidth"}), bw) << h.dump();
    }
  }

  if (HasCxl()) {
    // Classified through libdaxctl/libcxl, so the devices behind node 1 must be listed.
    bool dax_on_node = false;
    for (const json& d : topo.value("dax_devices", json::array())) {
      if (d.value("target_node", -1) == FarNode() && d.value("mode", "") == "system-ram") dax_on_node = true;
    }
    EXPECT_TRUE(dax_on_node) << "no system-ram dax device targeting node " << FarNode();
    EXPECT_FALSE(topo.value("cxl_devices", json::array()).empty()) << "no CXL devices listed";
  }

  std::set<std::string> rdma_names;
  for (const json& d : topo.value("rdma_devices", json::array())) {
    rdma_names.insert(d.value("name", ""));
    if (HasRdma()) {
      ASSERT_TRUE(d.contains("ports") && !d["ports"].empty()) << "no ports: " << d.dump();
      for (const json& port : d["ports"]) {
        EXPECT_EQ(port.value("state", ""), "active") << d.dump();
      }
    }
  }
  if (HasRdma()) {
    std::istringstream want(Env("QEMU_RDMA_DEVICES"));
    for (std::string name; want >> name;) EXPECT_TRUE(rdma_names.count(name)) << name << " not listed";
  } else {
    EXPECT_TRUE(rdma_names.empty());
  }
}

TEST(QemuTopology, TiermemctlTableListsRdmaDevices) {
  SKIP_OUTSIDE_GUEST();
  if (!HasRdma()) GTEST_SKIP() << "no rxe devices in topology " << Topology();
  std::string table = RunCommand("tiermemctl topology");
  std::printf("%s\n", table.c_str());
  std::istringstream want(Env("QEMU_RDMA_DEVICES"));
  for (std::string name; want >> name;) EXPECT_NE(table.find(name), std::string::npos) << name;
}

TEST(QemuTopology, DiscoveryAgreesWithGuest) {
  SKIP_OUTSIDE_GUEST();
  auto topo = DiscoverTopology();
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  EXPECT_EQ(topo->NodesOf(NodeKind::kDram), std::vector<int>{0});
  if (HasCxl()) {
    EXPECT_EQ(topo->NodesOf(NodeKind::kCxl), std::vector<int>{FarNode()});
  } else if (HasMemoryOnlyNode()) {
    EXPECT_EQ(topo->NodesOf(NodeKind::kFar), std::vector<int>{FarNode()});
  }
  if (const NumaNode* n = topo->Node(FarNode()); n != nullptr) {
    std::printf("node %d: kind %s (%s)\n", n->id, std::string(NodeKindName(n->kind)).c_str(), n->kind_reason.c_str());
  }
}

// kCxl is the memory-only node (the CXL node, or the far node of the numa topology): allocate
// 64 MiB there, check every page, migrate to DRAM and back, with the checksum and counts kept.
TEST(QemuPlacement, AllocateOnFarTierMigrateAndBack) {
  SKIP_OUTSIDE_GUEST();
  auto rt_or = Runtime::Start();
  ASSERT_TRUE(rt_or.ok()) << rt_or.status().ToString();
  Runtime& rt = **rt_or;
  if (!HasMemoryOnlyNode()) {
    EXPECT_FALSE(rt.HasTier(Tier::kCxl));
    auto p = rt.Allocate(kBytes, Tier::kCxl);
    ASSERT_FALSE(p.ok()) << "kCxl allocation succeeded without a memory-only node";
    EXPECT_EQ(p.status().code(), StatusCode::kUnavailable) << p.status().ToString();
    return;
  }
  ASSERT_TRUE(rt.HasTier(Tier::kCxl));
  const int far = FarNode();
  // Transparent huge pages change how many pages one move_pages call drags along: say which mode.
  std::string thp = RunCommand("cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown");
  std::printf("transparent_hugepage: %s", thp.c_str());

  auto p_or = rt.Allocate(kBytes, Tier::kCxl);
  ASSERT_TRUE(p_or.ok()) << p_or.status().ToString();
  void* p = *p_or;
  std::printf("allocation at %p (%zu KiB past a 2 MiB boundary)\n", p,
              static_cast<size_t>(reinterpret_cast<uintptr_t>(p) % (2u << 20)) / 1024);
  Fill(p);
  const uint64_t sum = Checksum(p);
  // What the pattern must sum to, computed in ordinary memory. A checksum compared only with
  // itself across migrations would pass even if the node dropped every write.
  std::vector<uint64_t> reference(kBytes / 8);
  Fill(reference.data());
  const uint64_t expected = Checksum(reference.data());
  // Printed for the log and asserted: memory on the far node (plain RAM in numa, the CXL device
  // in cxl and full) must return what was written to it.
  std::printf("DATA_ON_FAR_NODE_HOLDS=%d\n", sum == expected ? 1 : 0);
  ASSERT_EQ(sum, expected) << "data written to node " << far << " did not read back (topology "
                           << Topology() << ")";

  Tier tier = Tier::kAuto;
  bool same_tier = false;
  auto counts = NodeCounts(rt, p, &tier, &same_tier);
  std::printf("after Allocate(kCxl) + fill: %s\n", Describe(counts).c_str());
  EXPECT_EQ(counts[far], kPages) << "not every page on node " << far << ": " << Describe(counts);
  EXPECT_TRUE(same_tier && tier == Tier::kCxl);

  auto to_dram = rt.Migrate(p, kBytes, Tier::kDram);
  ASSERT_TRUE(to_dram.ok()) << to_dram.status().ToString();
  std::printf("Migrate -> kDram: moved %llu, already there %llu, not resident %llu, failed %llu\n",
              (unsigned long long)to_dram->pages_moved, (unsigned long long)to_dram->pages_already_there,
              (unsigned long long)to_dram->pages_not_resident, (unsigned long long)to_dram->pages_failed);
  EXPECT_EQ(to_dram->pages_moved + to_dram->pages_already_there + to_dram->pages_not_resident + to_dram->pages_failed, kPages);
  EXPECT_EQ(to_dram->pages_failed, 0u);
  EXPECT_EQ(to_dram->pages_moved, kPages);
  counts = NodeCounts(rt, p, &tier, &same_tier);
  EXPECT_EQ(counts[0], to_dram->pages_moved + to_dram->pages_already_there) << Describe(counts);
  EXPECT_EQ(counts[far], to_dram->pages_failed) << Describe(counts);
  EXPECT_TRUE(same_tier && tier == Tier::kDram);
  EXPECT_EQ(Checksum(p), expected) << "data changed by the migration to DRAM";

  auto back = rt.Migrate(p, kBytes, Tier::kCxl);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  std::printf("Migrate -> kCxl: moved %llu, failed %llu\n", (unsigned long long)back->pages_moved,
              (unsigned long long)back->pages_failed);
  EXPECT_EQ(back->pages_moved, to_dram->pages_moved) << "moved counts differ between the two directions";
  EXPECT_EQ(back->pages_failed, 0u);
  counts = NodeCounts(rt, p);
  EXPECT_EQ(counts[far], kPages) << Describe(counts);
  EXPECT_EQ(Checksum(p), expected) << "data changed by the migration back";

  // Per-tier statistics count the same pages.
  uint64_t dram_in = 0, dram_out = 0, cxl_in = 0, cxl_out = 0;
  for (const TierStats& s : rt.Stats()) {
    if (s.tier == Tier::kDram) { dram_in = s.pages_migrated_in; dram_out = s.pages_migrated_out; }
    if (s.tier == Tier::kCxl) {
      cxl_in = s.pages_migrated_in; cxl_out = s.pages_migrated_out;
      EXPECT_TRUE(s.available);
      EXPECT_EQ(s.nodes, std::vector<int>{far});
      EXPECT_GE(s.allocated_bytes, kBytes);
    }
  }
  EXPECT_EQ(dram_in, to_dram->pages_moved);
  EXPECT_EQ(cxl_out, to_dram->pages_moved);
  EXPECT_EQ(dram_out, back->pages_moved);
  EXPECT_EQ(cxl_in, back->pages_moved);

  // And to a node by number.
  auto to_node0 = rt.MigrateToNode(p, kBytes, 0);
  ASSERT_TRUE(to_node0.ok()) << to_node0.status().ToString();
  EXPECT_EQ(NodeCounts(rt, p)[0], kPages);
  EXPECT_EQ(Checksum(p), sum);
  EXPECT_FALSE(rt.MigrateToNode(p, kBytes, 7).ok()) << "migrating to a node that does not exist";

  ASSERT_TRUE(rt.Free(p).ok());
  ASSERT_TRUE(rt.Stop().ok());
}

// An allocation on kDram in a two-node guest stays on node 0.
TEST(QemuPlacement, DramStaysOnNodeZero) {
  SKIP_OUTSIDE_GUEST();
  auto rt_or = Runtime::Start();
  ASSERT_TRUE(rt_or.ok()) << rt_or.status().ToString();
  Runtime& rt = **rt_or;
  auto p = rt.Allocate(kBytes, Tier::kDram);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Fill(*p);
  auto counts = NodeCounts(rt, *p);
  EXPECT_EQ(counts[0], kPages) << Describe(counts);
  ASSERT_TRUE(rt.Free(*p).ok());
}

// Pages under access sampling are protected (PROT_NONE) until their next touch; the guest's
// kernel (6.1) answers move_pages' query for such a page with -ENOENT. Locate must still report
// them resident on their node (before this was handled, qemu.full.tiering read up to 95% of a
// hot set that never left DRAM as "not resident": its check sampled Locate right after a round
// had armed the hot pages).
TEST(QemuPlacement, PagesUnderSamplingAreSeenAndMovedWhereTheyAre) {
  SKIP_OUTSIDE_GUEST();
  constexpr size_t kSampled = 512;
  setenv("TIERMEM_SAMPLE_MODE", "protect", 1);  // sampling with no budget: every page a candidate
  setenv("TIERMEM_SAMPLE_PAGES", "4096", 1);
  setenv("TIERMEM_SAMPLE_INTERVAL_MS", "500", 1);  // armed pages stay protected ~0.5 s untouched
  auto rt_or = Runtime::Start();
  unsetenv("TIERMEM_SAMPLE_MODE");
  unsetenv("TIERMEM_SAMPLE_PAGES");
  unsetenv("TIERMEM_SAMPLE_INTERVAL_MS");
  ASSERT_TRUE(rt_or.ok()) << rt_or.status().ToString();
  Runtime& rt = **rt_or;
  Migrator* m = ImplOf(rt)->migrator();
  ASSERT_TRUE(m->running());
  auto p = rt.Allocate(kSampled * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  // Small pages, as a working set under tiering has (protecting a whole transparent huge page
  // leaves it mapped by one PMD, which the query still finds; the guests run THP "always").
  ASSERT_EQ(madvise(*p, kSampled * kPage, MADV_NOHUGEPAGE), 0) << std::strerror(errno);
  std::memset(*p, 0x5a, kSampled * kPage);
  // Wait (bounded) until a round armed every page, then ask at once, touching nothing.
  bool armed = false;
  for (int i = 0; i < 3000 && !armed; ++i) {
    armed = m->counters().pages_armed >= kSampled;
    if (!armed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(armed) << "no round armed the pages: " << m->counters().pages_armed;
  auto where = rt.Locate(*p, kSampled * kPage);
  ASSERT_TRUE(where.ok()) << where.status().ToString();
  size_t on_node0 = 0;
  for (const PageLocation& l : *where) on_node0 += l.resident && l.node == 0 && l.tier == Tier::kDram;
  EXPECT_EQ(on_node0, kSampled) << "pages under sampling not seen on node 0";
  for (size_t i = 0; i < kSampled * kPage; ++i) {
    if (static_cast<unsigned char*>(*p)[i] != 0x5a) {
      ADD_FAILURE() << "byte " << i << " changed";
      break;
    }
  }
  // The same for a move through the API: pages under sampling move with the rest (the kernel
  // skipped them as "not resident" before the runtime lifted their protection first).
  if (rt.HasTier(Tier::kCxl)) {
    const uint64_t before = m->counters().pages_armed;
    armed = false;
    for (int i = 0; i < 3000 && !armed; ++i) {
      armed = m->counters().pages_armed >= before + kSampled;
      if (!armed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(armed) << "no second round armed the pages";
    auto moved = rt.Migrate(*p, kSampled * kPage, Tier::kCxl);
    ASSERT_TRUE(moved.ok()) << moved.status().ToString();
    EXPECT_EQ(moved->pages_not_resident, 0u);
    EXPECT_EQ(moved->pages_moved + moved->pages_failed, kSampled);
    auto after = rt.Locate(*p, kSampled * kPage);
    ASSERT_TRUE(after.ok()) << after.status().ToString();
    size_t on_far = 0;
    for (const PageLocation& l : *after) on_far += l.resident && l.node == FarNode();
    EXPECT_EQ(on_far, moved->pages_moved) << "pages reported moved are not on node " << FarNode();
    EXPECT_GE(on_far, kSampled * 9 / 10) << "pages under sampling were not moved";
  }
  ASSERT_TRUE(rt.Free(*p).ok());
  ASSERT_TRUE(rt.Stop().ok());
}

}  // namespace
}  // namespace tiermem
