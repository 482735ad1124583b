// tiermemctl ps and tiermemctl stat PID: the processes running tiermem, and one process's block
// as text, JSON or Prometheus text, once or as rates over intervals.
#include <cstdio>
#include <iostream>
#include <string>

#include "tools/tiermemctl/commands.h"
#include "tools/tiermemctl/prometheus.h"
#include "tools/tiermemctl/stats_view.h"

namespace tiermem::tools {
namespace {

const char* Name(int tier) { return TierName(Tier(tier)).data(); }

std::string Latency(const LatencyHistogram& h) {
  if (h.count == 0) return "none";
  // The bucket holding the median, as its upper bound.
  uint64_t seen = 0;
  std::string p50 = "> 100 ms";
  for (int i = 0; i < kHistogramBuckets - 1; ++i) {
    seen += h.buckets[size_t(i)];
    if (seen * 2 >= h.count) {
      p50 = "<= " + std::to_string(kHistogramBoundsNs[size_t(i)] / 1000) + " us";
      break;
    }
  }
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%llu, mean %.1f us, median %s", (unsigned long long)h.count,
                double(h.sum_ns) / double(h.count) / 1000.0, p50.c_str());
  return buf;
}

void PrintBlock(const ProcessStats& s) {
  std::printf("pid %d (%s)  %s  layout %u  page %llu B\n", s.pid, s.command.c_str(), s.stale ? "STALE" : "live",
              s.layout_version, (unsigned long long)s.page_size);
  std::printf("\n%-7s %-9s %12s %12s %12s %10s\n", "tier", "available", "capacity", "limit", "allocated", "pages");
  for (const TierSnapshot& t : s.tiers) {
    std::printf("%-7s %-9s %12s %12s %12s %10llu\n", Name(int(t.tier)), t.available ? "yes" : "no",
                HumanBytes(t.capacity_bytes).c_str(), t.limit_bytes ? HumanBytes(t.limit_bytes).c_str() : "-",
                HumanBytes(t.allocated_bytes).c_str(), (unsigned long long)t.pages);
  }
  std::printf("\nresident %s; on DRAM %s of limit %s\n", HumanBytes(s.resident_bytes).c_str(),
              HumanBytes(s.dram_resident_bytes).c_str(),
              s.dram_limit_bytes ? HumanBytes(s.dram_limit_bytes).c_str() : "none");
  for (const NodeSnapshot& n : s.nodes) {
    std::printf("  node %-3d %-6s resident %s\n", n.node, Name(int(n.tier)), HumanBytes(n.resident_bytes).c_str());
  }
  std::printf("\npages moved  %8s %8s %8s   (from row to column)\n", Name(0), Name(1), Name(2));
  for (int f = 0; f < kNumTiers; ++f) {
    std::printf("  %-10s %8llu %8llu %8llu\n", Name(f), (unsigned long long)s.moves[f][0],
                (unsigned long long)s.moves[f][1], (unsigned long long)s.moves[f][2]);
  }
  std::printf("\nremote faults    %llu (%s)\n", (unsigned long long)s.remote_faults, Latency(s.fault_latency).c_str());
  std::printf("  of which read   %s\n", Latency(s.fault_read_latency).c_str());
  std::printf("zero fills       %llu\n", (unsigned long long)s.zero_fills);
  std::printf("prefetched       %llu pages\n", (unsigned long long)s.pages_prefetched);
  std::printf("sampling faults  %llu (mode %s)\n", (unsigned long long)s.sampling_faults,
              s.sampling_mode.empty() ? "-" : s.sampling_mode.c_str());
  if (!s.track_mode.empty() && s.track_mode != "off") {
    const double ns_per_page =
        s.track_pages_scanned > 0 ? double(s.track_scan_ns) / double(s.track_pages_scanned) : 0.0;
    std::printf("write scan       %s: %llu pages scanned (%.1f ns each), %llu found written, %llu kept "
                "out of the sample\n",
                s.track_mode.c_str(), (unsigned long long)s.track_pages_scanned, ns_per_page,
                (unsigned long long)s.track_written_pages, (unsigned long long)s.track_sample_skips);
  }
  std::printf("pages evicted    %llu, written %llu (windows: %s)\n", (unsigned long long)s.pages_evicted,
              (unsigned long long)s.pages_written, Latency(s.evict_latency).c_str());
  if (s.evictions_called_off > 0) {
    std::printf("  called off     %llu (written while in flight: kept local)\n",
                (unsigned long long)s.evictions_called_off);
  }
  if (s.evictions_unreadable > 0) {
    std::printf("  unreadable     %llu (could not be read to send: kept local)\n",
                (unsigned long long)s.evictions_unreadable);
  }
  if (s.remote_servers_down + s.remote_failovers + s.remote_repaired_pages > 0) {
    std::printf("replicas         %llu servers down, %llu failovers, %llu page copies restored, %llu pages short of a replica\n",
                (unsigned long long)s.remote_servers_down, (unsigned long long)s.remote_failovers,
                (unsigned long long)s.remote_repaired_pages, (unsigned long long)s.remote_degraded_pages);
  }
  std::printf("policy rounds    %llu, %.1f ms in all", (unsigned long long)s.policy_rounds,
              double(s.policy_round_ns) / 1e6);
  if (s.policy_round_time.count > 0) {
    const DurationHistogram& h = s.policy_round_time;
    std::printf("; CPU %.1f ms; a round p50 %.2f ms, p99 %.2f ms (interval %llu ms)", double(s.policy_cpu_ns) / 1e6,
                h.QuantileNs(0.5) / 1e6, h.QuantileNs(0.99) / 1e6, (unsigned long long)s.policy_interval_ms);
  }
  std::printf("\n");
  if (!s.servers.empty()) {
    std::printf("\n%-28s %-4s %12s %12s %10s %10s %8s\n", "server", "up", "held", "slots", "written", "faults",
                "debt");
    for (const ServerSnapshot& v : s.servers) {
      std::printf("%-28s %-4s %12s %12s %10llu %10llu %8llu\n", v.address.c_str(), v.up ? "yes" : "DOWN",
                  HumanBytes(v.bytes_held).c_str(), HumanBytes(v.slots * s.page_size).c_str(),
                  (unsigned long long)v.pages_written, (unsigned long long)v.remote_faults,
                  (unsigned long long)v.replication_debt_pages);
    }
  }
  std::printf("\nheap: segments %s (spans in use %s), large blocks %llu in %s\n",
              HumanBytes(s.heap_segment_bytes).c_str(), HumanBytes(s.heap_span_bytes).c_str(),
              (unsigned long long)s.heap_large_count, HumanBytes(s.heap_large_bytes).c_str());
  // Every listed counter that is not zero, by its JSON key (tiermem/counter_list.hpp): a counter
  // added to the list shows here with no line of its own.
  const auto values = ListedCounters(s);
  std::printf("\ncounters (not zero)\n");
  for (int i = 0; i < kNumCounters; ++i) {
    const CounterInfo& c = kCounterInfo[i];
    if (values[size_t(i)] == 0) continue;
    std::printf("  %-7s %-28s %14llu %s%s\n", c.subsystem, c.key, (unsigned long long)values[size_t(i)], c.unit,
                c.gauge ? " (now)" : "");
  }
}

// One line per interval, vmstat-style.
void PrintRateHeader() {
  std::printf("%10s %10s %10s %10s %10s %9s %9s %9s %9s %9s %9s\n", "dram", "cxl", "remote", "dram-res",
              "faults/s", "zero/s", "sample/s", "evict/s", "d>c/s", "c>d/s", "r>d/s");
}
void PrintRateLine(const ProcessStats& s, const Rates& r) {
  std::printf("%10s %10s %10s %10s %10.0f %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f\n",
              HumanBytes(TierBytes(s, Tier::kDram)).c_str(), HumanBytes(TierBytes(s, Tier::kCxl)).c_str(),
              HumanBytes(TierBytes(s, Tier::kRemote)).c_str(), HumanBytes(s.dram_resident_bytes).c_str(),
              r.remote_faults, r.zero_fills, r.sampling_faults, r.pages_evicted, r.moves[0][1], r.moves[1][0],
              r.moves[2][0]);
  std::fflush(stdout);
}

int PrintOnce(const StatArgs& a, const ProcessStats& s) {
  if (a.prometheus) {
    Exposition e;
    e.Add(s);
    std::fputs(e.Text().c_str(), stdout);
  } else if (a.json) {
    std::cout << ProcessStatsToJson(s).dump(2) << "\n";
  } else {
    PrintBlock(s);
  }
  return 0;
}

}  // namespace

int PsCommand(bool json) {
  nlohmann::json arr = nlohmann::json::array();
  if (!json) {
    std::printf("%7s %-16s %-6s %11s %11s %11s %11s\n", "pid", "command", "state", "dram", "cxl", "remote",
                "dram-res");
  }
  for (const ProcessEntry& p : ListProcesses()) {
    auto st = ReadProcessStats(p.pid);
    if (!st.ok() && st.status().code() == StatusCode::kNotFound) continue;  // exited meanwhile
    if (json) {
      nlohmann::json j = {{"pid", p.pid}, {"command", p.command}, {"stale", p.stale}, {"path", p.path}};
      if (st.ok()) {
        j["stale"] = st->stale;
        nlohmann::json tiers = nlohmann::json::object();
        for (const TierSnapshot& t : st->tiers) tiers[std::string(TierName(t.tier))] = t.allocated_bytes;
        j["allocated_bytes"] = tiers;
        j["dram_resident_bytes"] = st->dram_resident_bytes;
      } else {
        j["error"] = st.status().message();
      }
      arr.push_back(std::move(j));
      continue;
    }
    if (!st.ok()) {
      std::printf("%7d %-16s %-6s %s\n", p.pid, p.command.c_str(), p.stale ? "stale" : "?",
                  st.status().message().c_str());
      continue;
    }
    std::printf("%7d %-16s %-6s %11s %11s %11s %11s\n", p.pid, st->command.c_str(), st->stale ? "stale" : "live",
                HumanBytes(TierBytes(*st, Tier::kDram)).c_str(), HumanBytes(TierBytes(*st, Tier::kCxl)).c_str(),
                HumanBytes(TierBytes(*st, Tier::kRemote)).c_str(), HumanBytes(st->dram_resident_bytes).c_str());
  }
  if (json) std::cout << arr.dump(2) << "\n";
  return 0;
}

int StatCommand(const StatArgs& a) {
  auto first = ReadForDisplay(a.pid, a.allow_stale);
  if (!first.ok()) return 1;
  if (a.interval_ms == 0) return PrintOnce(a, *first);
  if (a.prometheus) {
    std::fprintf(stderr, "tiermemctl: --prometheus prints one snapshot; leave out --interval (or scrape serve-metrics)\n");
    return 2;
  }
  InstallStopHandler();
  ProcessStats before = std::move(*first);
  double t0 = NowSeconds();
  if (!a.json) PrintRateHeader();
  std::fflush(stdout);
  for (uint32_t i = 0; a.count == 0 || i < a.count; ++i) {
    if (!SleepMs(a.interval_ms)) break;
    // One read per sample: a block that vanishes between two reads would otherwise be taken for
    // "not a tiermem process".
    auto read = ReadProcessStats(a.pid);
    if (read.status().code() == StatusCode::kNotFound) {
      // A clean exit removes the block: the watch is over, not a mistake.
      std::fprintf(stderr, "tiermemctl: pid %d exited\n", a.pid);
      return 0;
    }
    auto now = ForDisplay(a.pid, std::move(read), a.allow_stale);
    if (!now.ok()) return 1;
    double t1 = NowSeconds();
    Rates r = ComputeRates(before, *now, t1 - t0);
    if (a.json) {
      nlohmann::json j = ProcessStatsToJson(*now);
      j["rates"] = RatesToJson(r);
      std::cout << j.dump() << std::endl;
    } else {
      PrintRateLine(*now, r);
    }
    before = std::move(*now);
    t0 = t1;
  }
  return 0;
}

}  // namespace tiermem::tools
