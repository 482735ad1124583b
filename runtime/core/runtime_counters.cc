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
  j.U("pages_written", c.pages_written);
  j.U("evictions_clean", c.evictions_clean);
  j.U("evictions_untouched", c.evictions_untouched);
  j.U("pages_fetched", c.pages_fetched);
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
    j.Close('}');
  }
  j.Close(']');
  j.Close('}');
  return std::move(j.str());
}

}  // namespace

Status Runtime::Impl::SetPinned(void* ptr, bool pinned) {
  Region* region = RegionOf(ptr);
  if (region == nullptr || reinterpret_cast<uintptr_t>(ptr) % page_size_ != 0 ||
      region->RunLength(region->PageIndex(ptr)) == 0) {
    return InvalidArgument(std::string(pinned ? "Pin(" : "Unpin(") + internal::Hex(ptr) +
                           "): not the start of a live tiermem allocation");
  }
  PageRecord& rec = region->record(region->PageIndex(ptr));
  if (pinned) {
    rec.flags.fetch_or(kPagePinned);
  } else {
    rec.flags.fetch_and(static_cast<uint8_t>(~kPagePinned));
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
    c.pages_written = p.written;
    c.evictions_clean = p.skipped_clean;
    c.evictions_untouched = p.skipped_untouched;
    c.pages_fetched = p.fetched;
    for (const PagerServerStats& s : pager_->server_stats()) {
      c.servers.push_back({s.server, s.connected, s.error, s.pages, s.slots, s.written, s.faults,
                           s.fetched, s.full});
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
  if (pager_ != nullptr) {
    std::vector<PagerServerStats> servers = pager_->server_stats();
    const size_t n = std::min(servers.size(), kMaxStatsServers);
    for (size_t i = 0; i < n; ++i) {
      snprintf(b->server_address[i], sizeof(b->server_address[i]), "%s", servers[i].server.c_str());
    }
    b->nservers.store(static_cast<uint32_t>(n), std::memory_order_release);
  }  // The remote tier's capacity is what its connected servers offer (they said so at hello).
  if (b->tier_capacity_bytes[Index(Tier::kRemote)] == 0) {
    b->tier_capacity_bytes[Index(Tier::kRemote)] = RemoteCapacityBytes();
  }
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
