#include "tools/tiermemctl/prometheus.h"

#include <cstdio>
#include <string_view>

namespace tiermem::tools {
namespace {

// Label values escape backslash, double quote and newline (the exposition format's rule).
std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Number(double v) {
  char buf[40];
  if (v == double(uint64_t(v)) && v < 1e18) {
    std::snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.9g", v);
  }
  return buf;
}

std::string Render(const std::vector<std::pair<std::string, std::string>>& labels) {
  if (labels.empty()) return "";
  std::string s = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) s += ",";
    s += labels[i].first + "=\"" + Escape(labels[i].second) + "\"";
  }
  return s + "}";
}

std::string T(Tier t) { return std::string(TierName(t)); }

}  // namespace

Exposition::Family& Exposition::Get(const std::string& name, const std::string& help, const std::string& type) {
  auto it = families_.find(name);
  if (it == families_.end()) {
    order_.push_back(name);
    it = families_.emplace(name, Family{help, type, {}}).first;
  }
  return it->second;
}

void Exposition::Sample(const std::string& name, const std::string& help, const std::string& type,
                        const Labels& labels, double value) {
  Get(name, help, type).lines.push_back(name + Render(labels) + " " + Number(value));
}

void Exposition::AddGauge(const std::string& name, const std::string& help, double value) {
  Sample(name, help, "gauge", {}, value);
}

void Exposition::Histogram(const std::string& name, const std::string& help, const Labels& labels,
                           const LatencyHistogram& h) {
  Histogram(name, help, labels, kHistogramBoundsNs.data(), kHistogramBoundsNs.size(), h.buckets.data(), h.sum_ns);
}

void Exposition::Histogram(const std::string& name, const std::string& help, const Labels& labels,
                           const DurationHistogram& h) {
  if (h.buckets.size() != h.le_ns.size() + 1) return;  // not read from a block: nothing to show
  Histogram(name, help, labels, h.le_ns.data(), h.le_ns.size(), h.buckets.data(), h.sum_ns);
}

// `buckets` has bounds + 1 entries, the last one the events above every bound.
void Exposition::Histogram(const std::string& name, const std::string& help, const Labels& labels,
                           const uint64_t* le_ns, size_t bounds, const uint64_t* buckets, uint64_t sum_ns) {
  Family& f = Get(name, help, "histogram");
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds; ++i) {
    cumulative += buckets[i];
    Labels l = labels;
    l.emplace_back("le", i < bounds ? Number(double(le_ns[i]) / 1e9) : "+Inf");
    f.lines.push_back(name + "_bucket" + Render(l) + " " + Number(double(cumulative)));
  }
  // _count is the +Inf bucket, as the format requires: the block's own count may be an event
  // ahead of the buckets it was read with.
  f.lines.push_back(name + "_sum" + Render(labels) + " " + Number(double(sum_ns) / 1e9));
  f.lines.push_back(name + "_count" + Render(labels) + " " + Number(double(cumulative)));
}

void Exposition::Add(const ProcessStats& s) {
  const std::string pid = std::to_string(s.pid);
  const Labels p = {{"pid", pid}};
  Sample("tiermem_process_info", "A process running tiermem (value 1): its command and sampling mode.", "gauge",
         {{"pid", pid}, {"command", s.command}, {"sampling_mode", s.sampling_mode}, {"stale", s.stale ? "1" : "0"}},
         1);
  Sample("tiermem_process_start_time_seconds", "When the process's runtime started, seconds since the epoch.",
         "gauge", p, double(s.started_unix_ns) / 1e9);
  for (const TierSnapshot& t : s.tiers) {
    Labels l = {{"pid", pid}, {"tier", T(t.tier)}};
    Sample("tiermem_tier_available", "Whether the tier is in use in this process (1) or absent (0).", "gauge", l,
           t.available ? 1 : 0);
    Sample("tiermem_tier_capacity_bytes", "What the tier's nodes (or memory servers) offer.", "gauge", l,
           double(t.capacity_bytes));
    Sample("tiermem_tier_limit_bytes", "The tier's TIERMEM_*_LIMIT (0: none).", "gauge", l, double(t.limit_bytes));
    Sample("tiermem_tier_allocated_bytes", "Live allocations whose pages belong to the tier now.", "gauge", l,
           double(t.allocated_bytes));
  }
  for (const NodeSnapshot& n : s.nodes) {
    Sample("tiermem_node_resident_bytes", "Managed memory resident on the NUMA node.", "gauge",
           {{"pid", pid}, {"node", std::to_string(n.node)}, {"tier", T(n.tier)}}, double(n.resident_bytes));
  }
  Sample("tiermem_resident_bytes", "Managed memory resident, all nodes.", "gauge", p, double(s.resident_bytes));
  Sample("tiermem_dram_resident_bytes", "Managed memory resident on the DRAM tier's nodes.", "gauge", p,
         double(s.dram_resident_bytes));
  Sample("tiermem_dram_limit_bytes", "TIERMEM_DRAM_LIMIT (0: none).", "gauge", p, double(s.dram_limit_bytes));
  for (int f = 0; f < kNumTiers; ++f) {
    for (int t = 0; t < kNumTiers; ++t) {
      if (f == t) continue;
      Sample("tiermem_pages_moved_total", "Pages the runtime moved from one tier to another.", "counter",
             {{"pid", pid}, {"from", T(Tier(f))}, {"to", T(Tier(t))}}, double(s.moves[f][t]));
    }
  }
  // Every listed counter (tiermem/counter_list.hpp), by its metric name; nanoseconds as seconds.
  const auto values = ListedCounters(s);
  for (int i = 0; i < kNumCounters; ++i) {
    const CounterInfo& c = kCounterInfo[i];
    const bool ns = std::string_view(c.unit) == "ns";
    Sample(c.metric, c.help, c.gauge ? "gauge" : "counter", p, ns ? double(values[size_t(i)]) / 1e9 : double(values[size_t(i)]));
  }
  Histogram("tiermem_remote_fault_duration_seconds",
            "Remote faults: from the userfaultfd report to the page installed.", p, s.fault_latency);
  Histogram("tiermem_remote_fault_read_duration_seconds",
            "Remote faults: from the read posted to its reply in (part of the fault's duration).", p,
            s.fault_read_latency);
  Histogram("tiermem_evict_duration_seconds",
            "Eviction windows: from the write posted to acknowledged and dropped.", p, s.evict_latency);
  Histogram("tiermem_policy_round_duration_seconds", "Policy rounds: wall time of each (scan, plan, migrate, arm).",
            p, s.policy_round_time);
  for (const ServerSnapshot& v : s.servers) {
    Labels l = {{"pid", pid}, {"server", v.address}};
    Sample("tiermem_server_up", "Whether the memory server is connected and answering.", "gauge", l, v.up ? 1 : 0);
    Sample("tiermem_server_held_bytes", "This process's pages stored on the server.", "gauge", l,
           double(v.bytes_held));
    Sample("tiermem_server_reserved_bytes", "Slots this process holds on the server, used or free.", "gauge", l,
           double(v.slots * s.page_size));
    Sample("tiermem_server_pages_written_total", "Pages written to the server.", "counter", l,
           double(v.pages_written));
    Sample("tiermem_server_remote_faults_total", "Faults served by the server.", "counter", l,
           double(v.remote_faults));
    Sample("tiermem_server_replication_debt_bytes", "Pages short of their replicas on the server.", "gauge", l,
           double(v.replication_debt_pages * s.page_size));
  }
}

std::string Exposition::Text() const {
  std::string out;
  for (const std::string& name : order_) {
    const Family& f = families_.at(name);
    out += "# HELP " + name + " " + f.help + "\n";
    out += "# TYPE " + name + " " + f.type + "\n";
    for (const std::string& line : f.lines) out += line + "\n";
  }
  return out;
}

}  // namespace tiermem::tools
