// ProcessStats as one line of JSON (include/tiermem/stats.hpp): the TIERMEM_STATS file, its
// timeline lines and `tiermemctl stat --json` all print this, so the keys are the same
// everywhere. And RuntimeCounters ("tiermem.counters.json"). The listed counters' keys come
// from tiermem/counter_list.hpp. Hand-written (no JSON library in the runtime: the preload library stays small).
#include <string>

#include "runtime/stats/json_writer.h"
#include "runtime/stats/stats_json.h"
#include "tiermem/stats.hpp"

namespace tiermem {

using internal::Json;

std::string ProcessStatsJson(const ProcessStats& st, uint64_t t_ns) {
  Json j;
  j.Open('{');
  if (t_ns != 0) j.U("t_ns", t_ns);
  j.U("pid", static_cast<uint64_t>(st.pid));
  j.S("command", st.command);
  j.U("layout_version", st.layout_version);
  j.B("stale", st.stale);
  j.U("started_unix_ns", st.started_unix_ns);
  j.U("page_size", st.page_size);
  j.Key("tiers");
  j.Open('[');
  for (const TierSnapshot& t : st.tiers) {
    j.Open('{');
    j.S("tier", std::string(TierName(t.tier)));
    j.B("available", t.available);
    j.U("capacity_bytes", t.capacity_bytes);
    j.U("limit_bytes", t.limit_bytes);
    j.U("allocated_bytes", t.allocated_bytes);
    j.U("pages", t.pages);
    j.Close('}');
  }
  j.Close(']');
  j.Key("nodes");
  j.Open('[');
  for (const NodeSnapshot& n : st.nodes) {
    j.Open('{');
    j.U("node", static_cast<uint64_t>(n.node));
    j.S("tier", std::string(TierName(n.tier)));
    j.U("resident_bytes", n.resident_bytes);
    j.Close('}');
  }
  j.Close(']');
  j.U("resident_bytes", st.resident_bytes);
  j.U("dram_resident_bytes", st.dram_resident_bytes);
  j.U("dram_limit_bytes", st.dram_limit_bytes);
  j.Key("moves");
  j.Open('[');
  for (const auto& row : st.moves) j.Numbers(row);
  j.Close(']');
#define TIERMEM_JSON_COUNTER_(sub, name, key, kind, unit, metric, help) j.U(#key, st.key);
  TIERMEM_COUNTERS(TIERMEM_JSON_COUNTER_)
#undef TIERMEM_JSON_COUNTER_
  j.Histogram("fault_latency", kHistogramBoundsNs, st.fault_latency.buckets, st.fault_latency.count,
              st.fault_latency.sum_ns);
  j.Histogram("fault_read_latency", kHistogramBoundsNs, st.fault_read_latency.buckets, st.fault_read_latency.count,
              st.fault_read_latency.sum_ns);
  j.Histogram("evict_latency", kHistogramBoundsNs, st.evict_latency.buckets, st.evict_latency.count,
              st.evict_latency.sum_ns);
  const DurationHistogram& rt = st.policy_round_time;
  j.Histogram("policy_round_time", rt.le_ns, rt.buckets, rt.count, rt.sum_ns);
  j.S("sampling_mode", st.sampling_mode);
  j.S("track_mode", st.track_mode);
  j.Key("servers");
  j.Open('[');
  for (const ServerSnapshot& s : st.servers) {
    j.Open('{');
    j.S("address", s.address);
    j.B("up", s.up);
    j.U("bytes_held", s.bytes_held);
    j.U("slots", s.slots);
    j.U("pages_written", s.pages_written);
    j.U("remote_faults", s.remote_faults);
    j.U("replication_debt_pages", s.replication_debt_pages);
    j.Close('}');
  }
  j.Close(']');
  j.Close('}');
  return std::move(j.str());
}

std::string RuntimeCountersJson(const RuntimeCounters& c) {
  Json j;
  j.Open('{');
#define TIERMEM_JSON_COUNTER_(sub, name, key, kind, unit, metric, help) j.U(#name, c.name);
  TIERMEM_COUNTERS(TIERMEM_JSON_COUNTER_)
#undef TIERMEM_JSON_COUNTER_
  j.U("remote_fault_ns", c.remote_fault_ns);
  j.U("remote_fault_read_ns", c.remote_fault_read_ns);
  const DurationHistogram& rt = c.policy_round_time;
  j.Histogram("policy_round_time", rt.le_ns, rt.buckets, rt.count, rt.sum_ns);
  j.S("sampling_mode", c.sampling_mode);
  j.S("track_mode", c.track_mode);
  j.Key("servers");
  j.Open('[');
  for (const RemoteServerCounters& s : c.servers) {
    j.Open('{');
    j.S("server", s.server);
    j.B("connected", s.connected);
    j.U("pages", s.pages);
    j.U("slots", s.slots);
    j.U("pages_written", s.pages_written);
    j.U("remote_faults", s.remote_faults);
    j.U("pages_fetched", s.pages_fetched);
    j.B("full", s.full);
    j.B("down", s.down);
    if (s.down) j.S("down_reason", s.down_reason);
    j.Close('}');
  }
  j.Close(']');
  j.Close('}');
  return std::move(j.str());
}

}  // namespace tiermem
