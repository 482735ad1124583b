// Readers of the live stats blocks (include/tiermem/stats.hpp): ListProcesses and
// ReadProcessStats, from any process of the same user (or root), and ReadBlockCounters, which
// Runtime::Counters uses on the process's own block. The block gives the counters;
// /proc/PID/numa_maps and /proc/PID/smaps give where the managed memory is resident, so the
// process itself pays nothing for that.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/os.h"
#include "runtime/stats/stats_block.h"
#include "tiermem/stats.hpp"

namespace tiermem {
namespace {

struct Range {
  uint64_t lo, hi;
};

bool Inside(const std::vector<Range>& ranges, uint64_t lo, uint64_t hi) {
  for (const Range& r : ranges) {
    if (lo >= r.lo && hi <= r.hi) return true;
  }
  return false;
}

// Adds the managed ranges' resident pages per node (numa_maps' N<node>=<pages>) and their
// resident bytes (smaps' Rss) to `st`.
void ReadResidence(int pid, const std::vector<Range>& ranges, uint64_t page, ProcessStats* st) {
  char path[64];
  std::string text;
  snprintf(path, sizeof(path), "/proc/%d/numa_maps", pid);
  if (os::ReadWholeFile(path, &text) == 0) {
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(at, end - at);
      at = end + 1;
      const uint64_t lo = strtoull(line.c_str(), nullptr, 16);
      if (!Inside(ranges, lo, lo + 1)) continue;
      for (size_t p = line.find(" N"); p != std::string::npos; p = line.find(" N", p + 2)) {
        char* e = nullptr;
        const long node = strtol(line.c_str() + p + 2, &e, 10);
        if (e == nullptr || *e != '=') continue;
        const uint64_t pages = strtoull(e + 1, nullptr, 10);
        for (NodeSnapshot& n : st->nodes) {
          if (n.node == node) n.resident_bytes += pages * page;
        }
      }
    }
  }
  snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
  if (os::ReadWholeFile(path, &text) == 0) {
    bool in = false;
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      const char* line = text.c_str() + at;
      const size_t len = end - at;
      at = end + 1;
      if (len > 0 && isxdigit(static_cast<unsigned char>(line[0])) && memchr(line, '-', len) != nullptr) {
        char* dash = nullptr;
        const uint64_t lo = strtoull(line, &dash, 16);
        const uint64_t hi = strtoull(dash + 1, nullptr, 16);
        in = Inside(ranges, lo, hi);
      } else if (in && len > 4 && strncmp(line, "Rss:", 4) == 0) {
        st->resident_bytes += strtoull(line + 4, nullptr, 10) * 1024;
      }
    }
  }
}

}  // namespace

std::vector<ProcessEntry> ListProcesses() {
  std::vector<ProcessEntry> out;
  std::vector<std::string> names;
  if (os::ListDir("/dev/shm", &names) != 0) return out;
  const uint32_t uid = os::UserId();
  for (const std::string& name : names) {
    unsigned owner = 0;
    int pid = 0;
    char tail = 0;
    if (sscanf(name.c_str(), "tiermem.%u.%d%c", &owner, &pid, &tail) != 2 || pid <= 0) continue;
    if (uid != 0 && owner != uid) continue;
    ProcessEntry e;
    e.pid = pid;
    e.path = "/dev/shm/" + name;
    auto st = ReadProcessStats(pid);
    if (st.ok()) {
      e.command = st->command;
      e.stale = st->stale;
    } else {
      e.command = "?";
      e.stale = true;
    }
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const ProcessEntry& a, const ProcessEntry& b) { return a.pid < b.pid; });
  return out;
}

void ReadBlockCounters(const StatsBlock& b, ProcessStats* st) {
  st->tiers.clear();
  st->nodes.clear();
  st->servers.clear();
  for (int t = 0; t < kNumTiers; ++t) {
    TierSnapshot ts;
    ts.tier = static_cast<Tier>(t);
    ts.available = b.tier_available[t] != 0;
    ts.capacity_bytes = b.tier_capacity_bytes[t];
    ts.limit_bytes = b.tier_limit_bytes[t];
    ts.allocated_bytes = b.allocated_bytes[t].load(std::memory_order_relaxed);
    ts.pages = b.page_size ? ts.allocated_bytes / b.page_size : 0;
    st->tiers.push_back(ts);
    for (int o = 0; o < kNumTiers; ++o) st->moves[t][o] = b.moves[t][o].load(std::memory_order_relaxed);
  }
  st->dram_limit_bytes = b.tier_limit_bytes[0];
  for (int t = 0; t < 2; ++t) {
    for (int i = 0; i < kStatsMaxNodes && b.tier_nodes[t][i] >= 0; ++i) {
      st->nodes.push_back({b.tier_nodes[t][i], static_cast<Tier>(t), 0});
    }
  }
  const CounterValues v = LoadCounters(b.counters);
#define TIERMEM_READ_COUNTER_(sub, name, key, kind, unit, metric, help) st->key = v.name;
  TIERMEM_COUNTERS(TIERMEM_READ_COUNTER_)
#undef TIERMEM_READ_COUNTER_
  const ProcessCounters& c = b.counters;
  st->fault_latency = LoadLatency(c.fault_latency);
  st->fault_read_latency = LoadLatency(c.fault_read_latency);
  st->evict_latency = LoadLatency(c.evict_latency);
  st->policy_round_time = ReadDuration(c.policy_round_time);
  st->sampling_mode.assign(c.sampling_mode, strnlen(c.sampling_mode, sizeof(c.sampling_mode)));
  st->track_mode.assign(c.track_mode, strnlen(c.track_mode, sizeof(c.track_mode)));
  const uint32_t nservers = std::min<uint32_t>(b.nservers.load(std::memory_order_acquire), kMaxStatsServers);
  for (uint32_t i = 0; i < nservers; ++i) {
    const PagerServerCounters& sc = b.servers[i];
    ServerSnapshot s;
    s.address.assign(b.server_address[i], strnlen(b.server_address[i], sizeof(b.server_address[i])));
    s.up = sc.up.load(std::memory_order_relaxed) != 0;
    s.bytes_held = sc.pages.load(std::memory_order_relaxed) * b.page_size;
    s.slots = sc.slots.load(std::memory_order_relaxed);
    s.pages_written = sc.written.load(std::memory_order_relaxed);
    s.remote_faults = sc.faults.load(std::memory_order_relaxed);
    s.replication_debt_pages = sc.debt.load(std::memory_order_relaxed);
    st->servers.push_back(std::move(s));
  }
}

namespace {

// Whether `b`, found under `pid`'s name, is stale: its writer is gone. *reused: the pid names a
// live process all the same, one that did not write it (an earlier process of that pid did).
bool BlockIsStale(const StatsBlock& b, int pid, bool* reused) {
  const bool alive = os::ProcessExists(pid) == 0;
  *reused = alive && (b.pid != pid || ProcStartTicks(pid) != b.proc_start_ticks);
  return !alive || *reused;
}

}  // namespace

StatusOr<ProcessStats> ReadProcessStats(int pid) {
  if (pid <= 0) return InvalidArgument("pid " + std::to_string(pid) + " is not a process id");
  // Our own user's block first; root may read anyone's.
  std::string path = StatsBlockPath(os::UserId(), pid);
  size_t bytes = 0;
  int err = 0;
  const void* map = os::MapFileReadOnly(path.c_str(), sizeof(StatsBlock) + 4096, &bytes, &err);
  if (map == nullptr && err == -ENOENT && os::UserId() == 0) {
    std::vector<std::string> names;
    if (os::ListDir("/dev/shm", &names) == 0) {
      const std::string suffix = "." + std::to_string(pid);
      for (const std::string& n : names) {
        if (n.rfind("tiermem.", 0) == 0 && n.size() > suffix.size() &&
            n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
          path = "/dev/shm/" + n;
          map = os::MapFileReadOnly(path.c_str(), sizeof(StatsBlock) + 4096, &bytes, &err);
          break;
        }
      }
    }
  }
  if (map == nullptr) {
    if (err == -ENOENT) {
      const bool exists = os::ProcessExists(pid) == 0;
      return NotFound("pid " + std::to_string(pid) +
                      (exists ? " is not a tiermem process (no stats block " + path + ")"
                              : " does not exist (and has no stats block)"));
    }
    if (err == -EACCES || err == -EPERM) {
      return PermissionDenied(path + " belongs to another user (stats blocks are mode 0600)");
    }
    return ErrnoToStatus(-err, "reading " + path);
  }
  // Copy it out, then check what we have.
  StatsBlock* copy = static_cast<StatsBlock*>(calloc(1, sizeof(StatsBlock)));
  if (copy == nullptr) {
    os::Unmap(const_cast<void*>(map), bytes);
    return ResourceExhausted("no memory for a stats block copy");
  }
  memcpy(static_cast<void*>(copy), map, std::min(bytes, sizeof(StatsBlock)));
  os::Unmap(const_cast<void*>(map), bytes);
  struct Free {
    StatsBlock* p;
    ~Free() { free(p); }
  } free_copy{copy};
  const StatsBlock& b = *copy;
  if (bytes < 16 || b.magic != kStatsMagic) {
    return NotSupported(path + " is not a tiermem stats block");
  }
  if (b.layout_version != kStatsLayoutVersion || b.size != sizeof(StatsBlock) || bytes < sizeof(StatsBlock)) {
    return NotSupported(path + " has stats layout version " + std::to_string(b.layout_version) +
                              " (" + std::to_string(bytes) + " bytes); this build reads version " +
                              std::to_string(kStatsLayoutVersion) + " (" + std::to_string(sizeof(StatsBlock)) +
                              " bytes): use the tiermemctl of the program's tiermem");
  }
  if (b.counter_list_hash != kCounterListHash) {
    return NotSupported(path + " was written by a build with other counters (list " +
                        std::to_string(b.counter_list_hash) + ", this build's " + std::to_string(kCounterListHash) +
                        "): use the tiermemctl of the program's tiermem");
  }
  ProcessStats st;
  st.pid = b.pid;
  st.command.assign(b.command, strnlen(b.command, sizeof(b.command)));
  st.layout_version = b.layout_version;
  st.stale = BlockIsStale(b, pid, &st.pid_reused);
  st.started_unix_ns = b.started_unix_ns;
  st.page_size = b.page_size;
  ReadBlockCounters(b, &st);
  if (!st.stale) {
    std::vector<Range> ranges;
    const uint32_t nr = std::min<uint32_t>(b.nregions.load(std::memory_order_acquire), kStatsMaxRegions);
    for (uint32_t i = 0; i < nr; ++i) ranges.push_back({b.region_base[i], b.region_base[i] + b.region_bytes[i]});
    ReadResidence(pid, ranges, b.page_size, &st);
    for (const NodeSnapshot& n : st.nodes) {
      if (n.tier == Tier::kDram) st.dram_resident_bytes += n.resident_bytes;
    }
  }
  return st;
}

}  // namespace tiermem
