// tiermem-bench gups --kernel: the QEMU full guest's three-tier GUPS workload (bench/
// gups_three_tier.h) on plain mmap, without tiermem, placed by the kernel's own tiering. Its
// options sit on gups's subcommand (bench/gups.cc), which runs it when --kernel is given.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/cli.h"
#include "bench/compare_util.h"
#include "bench/gups_three_tier.h"
#include "bench/subcommands.h"
#include "tiermem/options.hpp"
#include "tiermem/topology.hpp"

namespace tiermem::bench {
namespace {

constexpr size_t kPage = 4096;

// ---- `gups --kernel`: the three-tier guest workload without tiermem, under the kernel's tiering.
//
// The working set is one plain anonymous mmap (no tiermem, no mbind), cut into the 1 MiB chunks
// of bench/gups_three_tier.h and touched exactly as the guest test touches tiermem's chunks. The
// kernel places it: with demotion enabled and numa_balancing=2 (memory tiering), cold pages are
// demoted from node 0 to the lower memory tier by kswapd when node 0 runs short, and hot pages on
// the lower tier are promoted by NUMA hinting faults. Node 0 is put under pressure by a hog: an
// mlock()ed mapping bound to node 0 (unevictable, so never demoted) that leaves `--node0-free`
// bytes above node 0's low watermarks, the same room tiermem's test gives its DRAM tier.

std::string ReadFirstLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (!f || !std::getline(f, line)) return "";
  return line;
}

// Sum of the `which` ("low", "high") watermarks (pages) of node 0's zones, from /proc/zoneinfo.
uint64_t Node0WatermarkPages(const std::string& which) {
  std::ifstream f("/proc/zoneinfo");
  std::string line;
  bool node0 = false;
  uint64_t sum = 0;
  while (std::getline(f, line)) {
    if (line.rfind("Node ", 0) == 0) {
      node0 = line.rfind("Node 0,", 0) == 0;
      continue;
    }
    std::istringstream is(line);
    std::string key;
    uint64_t v = 0;
    if (node0 && (is >> key >> v) && key == which) sum += v;
  }
  return sum;
}

uint64_t Node0FreeBytes() {
  std::ifstream f("/sys/devices/system/node/node0/meminfo");
  std::string line;
  while (std::getline(f, line)) {
    auto pos = line.find("MemFree:");
    if (pos == std::string::npos) continue;
    return std::stoull(line.substr(pos + 8)) * 1024;
  }
  return 0;
}

std::map<std::string, uint64_t> VmStat(const std::vector<std::string>& keys) {
  std::map<std::string, uint64_t> out;
  std::ifstream f("/proc/vmstat");
  std::string k;
  uint64_t v;
  while (f >> k >> v) {
    for (auto& want : keys) if (k == want) out[k] = v;
  }
  return out;
}


struct KernelPlacement {
  // [set][0]: on node 0, [1]: on a lower-tier node, [2]: elsewhere or not resident; totals.
  uint64_t n[3][3] = {};
  uint64_t total[3] = {};
  double share(int set, int where) const {
    return total[set] ? static_cast<double>(n[set][where]) / static_cast<double>(total[set]) : 0;
  }
};

KernelPlacement PlacementOf(char* const* chunks, const std::vector<int>& lower) {
  namespace tt = three_tier;
  KernelPlacement pl;
  for (int c = 0; c < tt::kChunks; ++c) {
    const int set = tt::SetOf(c);
    for (int node : PageNodes(chunks[c], tt::kChunkBytes)) {
      const int where = node == 0 ? 0 : std::find(lower.begin(), lower.end(), node) != lower.end() ? 1 : 2;
      ++pl.n[set][where];
      ++pl.total[set];
    }
  }
  return pl;
}

// Runs the workload for `seconds`; prints a progress line every `progress_s` (0: none).
uint64_t RunFor(char* const* chunks, std::mt19937_64& rng, double seconds, double progress_s,
                const std::vector<int>& lower, const char* phase) {
  const uint64_t t0 = NowNs();
  const uint64_t end = t0 + static_cast<uint64_t>(seconds * 1e9);
  uint64_t next = progress_s > 0 ? t0 + static_cast<uint64_t>(progress_s * 1e9) : UINT64_MAX;
  uint64_t updates = 0;
  for (uint64_t now = t0; now < end; now = NowNs()) {
    three_tier::Update(chunks, rng, 256);
    updates += 256;
    if (now >= next) {
      next += static_cast<uint64_t>(progress_s * 1e9);
      KernelPlacement pl = PlacementOf(chunks, lower);
      fprintf(stderr, "gups --kernel: %s t=%.0fs updates=%llu hot_on_node0=%.3f warm_on_lower=%.3f cold_on_lower=%.3f\n",
              phase, static_cast<double>(now - t0) / 1e9, static_cast<unsigned long long>(updates),
              pl.share(0, 0), pl.share(1, 1), pl.share(2, 1));
    }
  }
  return updates;
}

// The kernel demotes any process's pages, not only the benchmark's (under QEMU 7.2, whose CXL
// node read back zeros, a shell's or library's demoted page crashed its program). To compare
// like with like, only the working set should compete for node 0: this locks (mlock) every file of the
// guest's programs and libraries, so that only the kernel modules' files (left unlocked) and
// anonymous memory are candidates, and keeps this process's own memory off the lower tier: its
// mappings, present and future, are locked (never demoted) and its memory policy binds new pages
// to node 0 (a page that fell back to the CXL node when node 0 was short broke the stack canary
// once, "stack smashing detected"). The working set is exempt (ReleaseWorkingSet). Returns the
// file bytes locked.
uint64_t LockGuestPrograms() {
  uint64_t locked = 0;
  if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) != 0) perror("gups --kernel: mlockall");
  unsigned long node0 = 1;
  if (syscall(SYS_set_mempolicy, 2 /* MPOL_BIND */, &node0, sizeof(node0) * 8) != 0) {
    perror("gups --kernel: set_mempolicy(bind node 0)");
  }
  for (const char* top : {"/bin", "/sbin", "/usr", "/lib", "/lib64", "/tiermem", "/work", "/etc"}) {
    std::error_code ec;
    std::filesystem::recursive_directory_iterator it(top, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      const std::string path = it->path().string();
      if (path.rfind("/lib/modules", 0) == 0 || path.rfind("/usr/lib/modules", 0) == 0) {
        it.disable_recursion_pending();
        continue;
      }
      std::error_code e2;
      if (!it->is_regular_file(e2) || it->is_symlink(e2)) continue;
      const uint64_t size = it->file_size(e2);
      if (e2 || size == 0) continue;
      const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      void* m = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
      close(fd);
      if (m == MAP_FAILED) continue;
      if (mlock(m, size) == 0) {
        locked += size;  // stays mapped and locked until the process ends
      } else {
        munmap(m, size);
      }
    }
  }
  return locked;
}

// The working set of [p, p + len) back to where the kernel's tiering may place it: unlocked,
// and bound to node 0 and the lower tier's nodes with NUMA balancing on (MPOL_F_NUMA_BALANCING:
// hint faults promote as under the default policy, and allocation takes node 0 first and falls
// back to the lower tier, as it would).
bool ReleaseWorkingSet(char* p, size_t len, const std::vector<int>& lower) {
  if (munlock(p, len) != 0) return perror("gups --kernel: munlock working set"), false;
  unsigned long mask = 1;
  for (int n : lower) {
    if (n > 0 && n < 64) mask |= 1ul << n;
  }
  constexpr int kNumaBalancing = 1 << 13;  // MPOL_F_NUMA_BALANCING (Linux 5.12)
  if (syscall(SYS_mbind, p, len, 2 /* MPOL_BIND */ | kNumaBalancing, &mask, sizeof(mask) * 8, 0) != 0) {
    return perror("gups --kernel: mbind working set (MPOL_BIND | MPOL_F_NUMA_BALANCING)"), false;
  }
  return true;
}

}  // namespace

void AddKernelGupsOptions(CLI::App& gups, CLI::Option* kernel, KernelGupsArgs& args) {
  const std::string group = "With --kernel";
  const std::vector<CLI::Option*> options = {
      AddSwitch(gups, "--no-hog", args.no_hog, "do not fill node 0 with the mlock()ed hog"),
      AddSwitch(gups, "--no-lock", args.no_lock, "do not mlock the guest's programs and libraries"),
      AddCount(gups, "--warmup", args.warmup_s, ParseUint, "0", "", "seconds of warm-up under pressure"),
      AddCount(gups, "--baseline-seconds", args.baseline_s, ParseUint, "0", "", "seconds of the all-DRAM run (0: none)"),
      AddCount(gups, "--progress", args.progress_s, ParseUint, "0", "",
               "a placement line on stderr every N s of warm-up (0: none)"),
      AddSize(gups, "--node0-free", args.node0_free, ParseSize, std::to_string(args.node0_free >> 20) + "M", "0", "",
              "bytes the hog leaves free above node 0's low watermarks")};
  for (CLI::Option* o : options) o->group(group)->needs(kernel);
  gups.footer(gups.get_footer() +
      "\n\n--kernel: the QEMU full guest's three-tier workload (bench/gups_three_tier.h) on plain mmap, no\n"
      "tiermem: the kernel's own tiering places it (set numa_balancing=2 and demotion_enabled=1 first).\n"
      "A short all-DRAM run first, then node 0 is filled by an mlock()ed hog up to --node0-free above\n"
      "its low watermarks, then warm-up and a measured window of --seconds; prints GUPS, the share of\n"
      "each set on node 0 and on the lower memory tier (move_pages), and /proc/vmstat promotion/demotion\n"
      "counts, as one JSON object (--json is accepted; the object is always printed).\n"
      "JSON keys with --kernel: mode (\"kernel\"), numa_balancing, demotion_enabled, memory_tiers (tier ->\n"
      "  nodelist), lower_tier_nodes, error (only when there is no lower tier; nothing else follows),\n"
      "  locked_program_bytes (unless --no-lock), all_dram_gups and all_dram_on_node0 (with a baseline),\n"
      "  node0_free_before_bytes, node0_low_watermark_bytes, hog_bytes, node0_free_after_hog_bytes,\n"
      "  after_fill_hot_on_node0, after_fill_warm_on_lower, after_fill_cold_on_lower, warmup_seconds,\n"
      "  seconds, updates, gups, gups_vs_all_dram (with a baseline), hot_on_node0, warm_on_node0,\n"
      "  warm_on_lower, cold_on_lower, cold_on_node0, not_placed ([hot, warm, cold] pages),\n"
      "  vmstat_delta: pgpromote_success, pgdemote_kswapd, pgdemote_direct, numa_hint_faults,\n"
      "    numa_pages_migrated, pgmigrate_success");
}

int KernelGups(const KernelGupsArgs& args, uint64_t seconds_arg) {
  namespace tt = three_tier;
  const uint64_t leave = args.node0_free;
  const bool hog = !args.no_hog, lock = !args.no_lock;
  // Seconds as doubles, as the JSON has always carried them.
  const double warmup_s = static_cast<double>(args.warmup_s), seconds = static_cast<double>(seconds_arg);
  const double baseline_s = static_cast<double>(args.baseline_s), progress_s = static_cast<double>(args.progress_s);
  nlohmann::json j;
  j["mode"] = "kernel";
  j["numa_balancing"] = ReadFirstLine("/proc/sys/kernel/numa_balancing");
  j["demotion_enabled"] = ReadFirstLine("/sys/kernel/mm/numa/demotion_enabled");
  // Memory tiers: the nodes of the tier holding node 0 are the top tier; the others are lower.
  std::vector<int> lower;
  nlohmann::json tiers = nlohmann::json::object();
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/sys/devices/virtual/memory_tiering", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("memory_tier", 0) != 0) continue;
    const std::string nodes = ReadFirstLine(e.path().string() + "/nodelist");
    tiers[name] = nodes;
  }
  j["memory_tiers"] = tiers;
  {
    // Tiers are numbered by abstract distance: the lowest-numbered tier is the top one.
    int best = INT32_MAX;
    std::string top;
    for (auto& [name, nodes] : tiers.items()) {
      int id = atoi(name.c_str() + strlen("memory_tier"));
      if (id < best) best = id, top = nodes.get<std::string>();
    }
    for (auto& [name, nodes] : tiers.items()) {
      if (nodes.get<std::string>() == top) continue;
      // nodelist is "1" or "1-2" or "1,3"
      std::string s = nodes.get<std::string>();
      for (size_t pos = 0; pos < s.size();) {
        size_t end = s.find(',', pos);
        std::string part = s.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        int a = atoi(part.c_str()), b = a;
        if (auto d = part.find('-'); d != std::string::npos) b = atoi(part.c_str() + d + 1);
        for (int n = a; n <= b; ++n) lower.push_back(n);
        pos = end == std::string::npos ? s.size() : end + 1;
      }
    }
  }
  j["lower_tier_nodes"] = lower;
  if (lower.empty()) {
    j["error"] = "no lower memory tier: the kernel has nowhere to demote to";
    printf("%s\n", j.dump(1).c_str());
    return 1;
  }
  if (lock) {
    const uint64_t locked = LockGuestPrograms();
    j["locked_program_bytes"] = locked;
    fprintf(stderr, "gups --kernel: locked %llu MiB of program and library files (and this process)\n",
            static_cast<unsigned long long>(locked >> 20));
  }
  const size_t ws = tt::kChunks * tt::kChunkBytes;
  auto map_ws = [&]() -> char* {
    void* p = mmap(nullptr, ws, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    if (lock && !ReleaseWorkingSet(static_cast<char*>(p), ws, lower)) {
      munmap(p, ws);
      return nullptr;
    }
    return static_cast<char*>(p);
  };
  // 1. All in DRAM: node 0 has room, nothing to tier (the reference for the ratios).
  if (baseline_s > 0) {
    char* base = map_ws();
    if (base == nullptr) return perror("gups --kernel: mmap"), 1;
    char* chunks[tt::kChunks];
    for (int c = 0; c < tt::kChunks; ++c) chunks[c] = base + c * tt::kChunkBytes;
    tt::Fill(chunks);
    std::mt19937_64 rng(tt::kSeed);
    RunFor(chunks, rng, 2, 0, lower, "all_dram warm-up");
    const uint64_t t0 = NowNs();
    const uint64_t u = RunFor(chunks, rng, baseline_s, 0, lower, "all_dram");
    const double dt = static_cast<double>(NowNs() - t0) / 1e9;
    KernelPlacement pl = PlacementOf(chunks, lower);
    j["all_dram_gups"] = static_cast<double>(u) / dt / 1e9;
    fprintf(stderr, "gups --kernel: all_dram %.6f GUPS\n", j["all_dram_gups"].get<double>());
    j["all_dram_on_node0"] = (static_cast<double>(pl.n[0][0] + pl.n[1][0] + pl.n[2][0])) /
                             static_cast<double>(pl.total[0] + pl.total[1] + pl.total[2]);
    munmap(base, ws);
  }
  // 2. Node 0 under pressure.
  // Below node 0's low watermarks, new pages go to the lower tier: leave `leave` bytes above them.
  const uint64_t high = Node0WatermarkPages("low") * kPage;
  const uint64_t free_before = Node0FreeBytes();
  uint64_t hog_bytes = 0;
  // The hog grows in mlock()ed steps until node 0's free memory stays at `leave` above its low
  // watermarks; between steps kswapd may demote what else is reclaimable on node 0 (the guest's
  // unused initramfs files: the kernel's choice), which frees room that the next step takes.
  if (hog) {
    for (int step = 0, quiet = 0; step < 200 && quiet < 3; ++step) {
      const uint64_t free_now = Node0FreeBytes();
      if (free_now <= high + leave + (2u << 20)) {
        ++quiet;
        usleep(300 * 1000);
        continue;
      }
      quiet = 0;
      const uint64_t bytes = std::min<uint64_t>((free_now - high - leave) / kPage * kPage, 256u << 20);
      void* h = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (h == MAP_FAILED) return perror("gups --kernel: mmap hog"), 1;
      unsigned long mask = 1;  // node 0
      if (syscall(SYS_mbind, h, bytes, 2 /* MPOL_BIND */, &mask, sizeof(mask) * 8, 0) != 0) {
        perror("gups --kernel: mbind hog to node 0");
      }
      if (mlock(h, bytes) != 0) return perror("gups --kernel: mlock hog"), 1;
      hog_bytes += bytes;
      usleep(300 * 1000);
    }
  }
  fprintf(stderr, "gups --kernel: node 0 had %llu MiB free (low watermarks %llu MiB); hog %llu MiB mlock()ed there, %llu MiB free now\n",
          static_cast<unsigned long long>(free_before >> 20), static_cast<unsigned long long>(high >> 20),
          static_cast<unsigned long long>(hog_bytes >> 20), static_cast<unsigned long long>(Node0FreeBytes() >> 20));
  j["node0_free_before_bytes"] = free_before;
  j["node0_low_watermark_bytes"] = high;
  j["hog_bytes"] = hog_bytes;
  j["node0_free_after_hog_bytes"] = Node0FreeBytes();
  const std::vector<std::string> keys = {"pgpromote_success", "pgdemote_kswapd", "pgdemote_direct",
                                         "numa_hint_faults", "numa_pages_migrated", "pgmigrate_success"};
  auto vm0 = VmStat(keys);
  char* base = map_ws();
  if (base == nullptr) return perror("gups --kernel: mmap"), 1;
  char* chunks[tt::kChunks];
  for (int c = 0; c < tt::kChunks; ++c) chunks[c] = base + c * tt::kChunkBytes;
  tt::Fill(chunks);
  KernelPlacement filled = PlacementOf(chunks, lower);
  j["after_fill_hot_on_node0"] = filled.share(0, 0);
  j["after_fill_warm_on_lower"] = filled.share(1, 1);
  j["after_fill_cold_on_lower"] = filled.share(2, 1);
  fprintf(stderr, "gups --kernel: filled: hot on node 0 %.3f, warm on the lower tier %.3f, cold there %.3f\n",
          filled.share(0, 0), filled.share(1, 1), filled.share(2, 1));
  std::mt19937_64 rng(tt::kSeed);
  RunFor(chunks, rng, warmup_s, progress_s, lower, "warm-up");
  const uint64_t t0 = NowNs();
  const uint64_t u = RunFor(chunks, rng, seconds, 0, lower, "measure");
  const double dt = static_cast<double>(NowNs() - t0) / 1e9;
  KernelPlacement pl = PlacementOf(chunks, lower);
  auto vm1 = VmStat(keys);
  j["warmup_seconds"] = warmup_s;
  j["seconds"] = seconds;
  j["updates"] = u;
  j["gups"] = static_cast<double>(u) / dt / 1e9;
  if (j.contains("all_dram_gups") && j["all_dram_gups"].get<double>() > 0) {
    j["gups_vs_all_dram"] = j["gups"].get<double>() / j["all_dram_gups"].get<double>();
  }
  j["hot_on_node0"] = pl.share(0, 0);
  j["warm_on_node0"] = pl.share(1, 0);
  j["warm_on_lower"] = pl.share(1, 1);
  j["cold_on_lower"] = pl.share(2, 1);
  j["cold_on_node0"] = pl.share(2, 0);
  j["not_placed"] = {pl.n[0][2], pl.n[1][2], pl.n[2][2]};
  for (auto& k : keys) j["vmstat_delta"][k] = vm1[k] - vm0[k];
  printf("%s\n", j.dump(1).c_str());
  munmap(base, ws);
  return 0;
}

}  // namespace tiermem::bench
