// The public read-outs of a running Runtime (Counters, GetProperty) and pinning: thin layers over
// the pager's and the policy thread's own statistics and the page records.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "runtime/core/json_writer.h"
#include "runtime/core/runtime_impl.h"
#include "runtime/tiering/migrator.h"

namespace tiermem {
namespace {

std::string CountersJson(const RuntimeCounters& c) {
  internal::Json j;
  j.Open('{');
  j.U("remote_faults", c.remote_faults);
  j.U("zero_fills", c.zero_fills);
  j.U("write_protect_faults", c.write_protect_faults);
  j.U("pages_evicted", c.pages_evicted);
  j.U("evictions_called_off", c.evictions_called_off);
  j.U("evictions_unreadable", c.evictions_unreadable);
  j.U("pages_written", c.pages_written);
  j.U("evictions_clean", c.evictions_clean);
  j.U("evictions_untouched", c.evictions_untouched);
  j.U("pages_fetched", c.pages_fetched);
  j.U("pages_prefetched", c.pages_prefetched);
  j.U("remote_fault_ns", c.remote_fault_ns);
  j.U("remote_fault_read_ns", c.remote_fault_read_ns);
  j.U("remote_servers_down", c.remote_servers_down);
  j.U("remote_failovers", c.remote_failovers);
  j.U("remote_repaired_pages", c.remote_repaired_pages);
  j.U("remote_degraded_pages", c.remote_degraded_pages);
  j.U("policy_rounds", c.policy_rounds);
  j.U("policy_round_ns", c.policy_round_ns);
  j.U("samples", c.samples);
  j.U("fault_samples", c.fault_samples);
  j.U("pages_armed", c.pages_armed);
  j.U("demotions", c.demotions);
  j.U("promotions", c.promotions);
  j.U("moves_failed", c.moves_failed);
  j.U("moves_deferred", c.moves_deferred);
  j.U("migrate_calls", c.migrate_calls);
  j.U("migrate_ns", c.migrate_ns);
  j.U("budget_relief_pages", c.budget_relief_pages);
  j.U("runtime_own_bytes", c.runtime_own_bytes);
  j.U("fault_throttle_waits", c.fault_throttle_waits);
  j.U("fault_throttle_ns", c.fault_throttle_ns);
  j.U("policy_interval_ms", c.policy_interval_ms);
  j.U("policy_cpu_ns", c.policy_cpu_ns);
  const DurationHistogram& rt = c.policy_round_time;
  j.Histogram("policy_round_time", rt.le_ns, rt.buckets, rt.count, rt.sum_ns);
  j.S("sampling_mode", c.sampling_mode);
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

}  // namespace

double DurationHistogram::QuantileNs(double q) const {
  if (count == 0 || buckets.empty()) return 0;
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(count);
  double below = 0;  // events in the buckets before b
  for (size_t b = 0; b < buckets.size(); ++b) {
    const double n = static_cast<double>(buckets[b]);
    const double lo = b == 0 ? 0.0 : static_cast<double>(le_ns[b - 1]);
    if (b >= le_ns.size()) return lo;  // the last bucket has no upper bound
    if (n > 0 && below + n >= rank) {
      return lo + (static_cast<double>(le_ns[b]) - lo) * (rank - below) / n;
    }
    below += n;
  }
  return le_ns.empty() ? 0.0 : static_cast<double>(le_ns.back());
}

Status Runtime::Impl::SetPinned(void* ptr, bool pinned) {
  Region* region = RegionOf(ptr);
  if (region == nullptr || reinterpret_cast<uintptr_t>(ptr) % page_size_ != 0 ||
      region->RunLength(region->PageIndex(ptr)) == 0) {
    return InvalidArgument(std::string(pinned ? "Pin(" : "Unpin(") + internal::Hex(ptr) +
                           "): not the start of a live tiermem allocation");
  }
  // Every page of the run carries the pin (the relief ring checks pages, not runs).
  const uint64_t first = region->PageIndex(ptr), n = region->RunLength(first);
  for (uint64_t i = first; i < first + n; ++i) {
    PageRecord& rec = region->record(i);
    if (pinned) {
      rec.flags.fetch_or(kPagePinned);
    } else {
      rec.flags.fetch_and(static_cast<uint8_t>(~kPagePinned));
    }
  }
  return Status::Ok();
}

RuntimeCounters Runtime::Impl::Counters() const {
  RuntimeCounters c;
  if (pager_ != nullptr) {
    const PagerStats p = pager_->stats();
    c.remote_faults = p.faults;
    c.zero_fills = p.zero_fills;
    c.write_protect_faults = p.wp_faults;
    c.pages_evicted = p.evicted;
    c.evictions_called_off = p.evict_called_off;
    c.evictions_unreadable = p.evict_unreadable;
    c.pages_written = p.written;
    c.evictions_clean = p.skipped_clean;
    c.evictions_untouched = p.skipped_untouched;
    c.pages_fetched = p.fetched;
    c.pages_prefetched = p.prefetched;
    c.remote_fault_ns = p.fault_ns;
    c.remote_fault_read_ns = p.fault_read_ns;
    c.remote_servers_down = p.servers_down;
    c.remote_failovers = p.failovers;
    c.remote_repaired_pages = p.repaired_pages;
    c.remote_degraded_pages = p.degraded_pages;
    for (const PagerServerStats& s : pager_->server_stats()) {
      c.servers.push_back({s.server, s.connected, s.error, s.pages, s.slots, s.written, s.faults,
                           s.fetched, s.full, s.down, s.down_reason});
    }
  }
  if (migrator_ != nullptr) {
    const MigratorStats m = migrator_->stats();
    c.sampling_mode = m.mode;
    c.pebs = m.pebs;
    c.policy_rounds = m.rounds;
    c.policy_round_ns = m.round_ns;
    c.samples = m.samples;
    c.fault_samples = m.fault_samples;
    c.pages_armed = m.pages_armed;
    c.demotions = m.demotions;
    c.promotions = m.promotions;
    c.moves_failed = m.failed;
    c.moves_deferred = m.deferred;
    c.migrate_calls = m.migrate_calls;
    c.migrate_ns = m.migrate_ns;
    c.last_move_error = m.last_error;
  }
  c.budget_relief_pages = sb_->policy.relief_pages.load(std::memory_order_relaxed);
  c.runtime_own_bytes = sb_->policy.own_bytes.load(std::memory_order_relaxed);
  c.fault_throttle_waits = sb_->policy.throttle_waits.load(std::memory_order_relaxed);
  c.fault_throttle_ns = sb_->policy.throttle_ns.load(std::memory_order_relaxed);
  // The policy thread's cost is kept in the stats block only (the thread writes it there).
  const PolicyCounters& pc = sb_->policy;
  c.policy_interval_ms = pc.interval_ms.load(std::memory_order_relaxed);
  c.policy_cpu_ns = pc.cpu_ns.load(std::memory_order_relaxed);
  c.policy_round_time = pc.round_time.Read();
  return c;
}

bool Runtime::Impl::GetProperty(std::string_view name, std::string* value) const {
  if (name == "tiermem.stats") {
    *value = StatsReportText();
  } else if (name == "tiermem.counters.json") {
    *value = CountersJson(Counters());
  } else if (name == "tiermem.sampling-mode") {
    *value = Counters().sampling_mode;
  } else {
    return false;
  }
  return true;
}

void Runtime::Impl::PublishTopology() {
  StatsBlock* b = sb_;
  for (int t = 0; t < kNumTiers; ++t) {
    b->tier_available[t] = HasTier(static_cast<Tier>(t)) ? 1 : 0;
    b->tier_capacity_bytes[t] = tier_capacity_[t];
    b->tier_limit_bytes[t] = tier_limit_[t];
  }
  for (int t = 0; t < 2; ++t) {
    size_t i = 0;
    for (; i < tier_nodes_[t].size() && i < kStatsMaxNodes; ++i) b->tier_nodes[t][i] = tier_nodes_[t][i];
    for (; i < kStatsMaxNodes; ++i) b->tier_nodes[t][i] = -1;
  }
  // The remote tier's capacity is what its connected servers offer (they said so at hello).
  if (b->tier_capacity_bytes[Index(Tier::kRemote)] == 0) {
    b->tier_capacity_bytes[Index(Tier::kRemote)] = RemoteCapacityBytes();
  }
}

void Runtime::Impl::PublishServer(size_t index, const std::string& name) {
  // By the pager as servers join its list (PagerConfig::on_server_listed: one at a time, in
  // list order), so the count only grows past a written address.
  if (index >= kMaxStatsServers) return;
  snprintf(sb_->server_address[index], sizeof(sb_->server_address[index]), "%s", name.c_str());
  if (sb_->nservers.load(std::memory_order_relaxed) < index + 1) {
    sb_->nservers.store(static_cast<uint32_t>(index + 1), std::memory_order_release);
  }
}

Status Runtime::AddRemoteServer(std::string_view address) { return impl_->AddRemoteServer(address); }

Status Runtime::Impl::AddRemoteServer(std::string_view address) {
  if (pager_ == nullptr) {
    return Unavailable("the remote tier is not running (TIERMEM_REMOTE and TIERMEM_REMOTE_FILE unset, or no "
                       "memory server reached at start): a server cannot be added");
  }
  return pager_->AddServer(std::string(address));
}

void Runtime::Impl::PublishRegion(int n) {
  if (n >= kStatsMaxRegions) return;
  sb_->region_base[n] = reinterpret_cast<uint64_t>(regions_[n]->base());
  sb_->region_bytes[n] = regions_[n]->bytes();
  sb_->nregions.store(static_cast<uint32_t>(n + 1), std::memory_order_release);
}

uint64_t Runtime::Impl::RemoteCapacityBytes() const {
  if (pager_ == nullptr) return 0;
  uint64_t pages = 0;
  const uint32_t n = sb_->nservers.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; ++i) {
    if (sb_->servers[i].up.load(std::memory_order_relaxed)) {
      pages += sb_->servers[i].capacity_pages.load(std::memory_order_relaxed);
    }
  }
  return pages * page_size_;
}

Status Runtime::Pin(void* ptr) { return impl_->SetPinned(ptr, true); }
Status Runtime::Unpin(void* ptr) { return impl_->SetPinned(ptr, false); }
RuntimeCounters Runtime::Counters() const { return impl_->Counters(); }
bool Runtime::GetProperty(std::string_view name, std::string* value) const {
  return impl_->GetProperty(name, value);
}

}  // namespace tiermem
