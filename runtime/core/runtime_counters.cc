// The public read-outs of a running Runtime (Counters, GetProperty) and pinning: Counters reads
// the process's own stats block through the stats reader (runtime/stats/).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "runtime/core/runtime_impl.h"
#include "runtime/stats/stats_json.h"
#include "runtime/tiering/migrator.h"

namespace tiermem {

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
  // The process's own block, read as another process reads it.
  ProcessStats st;
  ReadBlockCounters(*sb_, &st);
  RuntimeCounters c;
#define TIERMEM_OWN_COUNTER_(sub, name, key, kind, unit, metric, help) c.name = st.key;
  TIERMEM_COUNTERS(TIERMEM_OWN_COUNTER_)
#undef TIERMEM_OWN_COUNTER_
  c.remote_fault_ns = st.fault_latency.sum_ns;
  c.remote_fault_read_ns = st.fault_read_latency.sum_ns;
  c.policy_round_time = std::move(st.policy_round_time);
  if (pager_ != nullptr) {
    // Live figures the block does not keep: pages short of a replica now, and each server's state.
    c.remote_degraded_pages = pager_->DegradedPagesNow();
    for (const PagerServerStats& s : pager_->server_stats()) {
      c.servers.push_back({s.server, s.connected, s.error, s.pages, s.slots, s.written, s.faults,
                           s.fetched, s.full, s.down, s.down_reason});
    }
  }
  if (migrator_ != nullptr) {
    const MigratorStats m = migrator_->stats();
    c.sampling_mode = m.mode;
    c.track_mode = m.track;
    c.pebs = m.pebs;
    c.last_move_error = m.last_error;
  }
  return c;
}

bool Runtime::Impl::GetProperty(std::string_view name, std::string* value) const {
  if (name == "tiermem.stats") {
    *value = StatsReportText();
  } else if (name == "tiermem.counters.json") {
    *value = RuntimeCountersJson(Counters());
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
  // By the pager as servers join its list (PagingEvents::OnServerListed: one at a time, in
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
