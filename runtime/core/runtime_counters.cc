// The public read-outs of a running Runtime (Counters, GetProperty) and pinning: thin layers over
// the pager's and the policy thread's own statistics and the page records.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "runtime/core/runtime_impl.h"
#include "runtime/tiering/migrator.h"

namespace tiermem {
namespace {

void AppendJsonString(std::string* out, const std::string& s) {
  out->push_back('"');
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      *out += buf;
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

void AppendKey(std::string* out, const char* key, uint64_t v) {
  char buf[96];
  snprintf(buf, sizeof(buf), "\"%s\":%" PRIu64 ",", key, v);
  *out += buf;
}

std::string CountersJson(const RuntimeCounters& c) {
  std::string j = "{";
  AppendKey(&j, "remote_faults", c.remote_faults);
  AppendKey(&j, "zero_fills", c.zero_fills);
  AppendKey(&j, "write_protect_faults", c.write_protect_faults);
  AppendKey(&j, "pages_evicted", c.pages_evicted);
  AppendKey(&j, "pages_written", c.pages_written);
  AppendKey(&j, "evictions_clean", c.evictions_clean);
  AppendKey(&j, "evictions_untouched", c.evictions_untouched);
  AppendKey(&j, "pages_fetched", c.pages_fetched);
  AppendKey(&j, "policy_rounds", c.policy_rounds);
  AppendKey(&j, "policy_round_ns", c.policy_round_ns);
  AppendKey(&j, "samples", c.samples);
  AppendKey(&j, "fault_samples", c.fault_samples);
  AppendKey(&j, "pages_armed", c.pages_armed);
  AppendKey(&j, "demotions", c.demotions);
  AppendKey(&j, "promotions", c.promotions);
  AppendKey(&j, "moves_failed", c.moves_failed);
  AppendKey(&j, "moves_deferred", c.moves_deferred);
  AppendKey(&j, "migrate_calls", c.migrate_calls);
  AppendKey(&j, "migrate_ns", c.migrate_ns);
  j += "\"sampling_mode\":";
  AppendJsonString(&j, c.sampling_mode);
  j += ",\"servers\":[";
  for (size_t i = 0; i < c.servers.size(); ++i) {
    const RemoteServerCounters& s = c.servers[i];
    j += i ? ",{" : "{";
    j += "\"server\":";
    AppendJsonString(&j, s.server);
    j += s.connected ? ",\"connected\":true," : ",\"connected\":false,";
    AppendKey(&j, "pages", s.pages);
    AppendKey(&j, "slots", s.slots);
    AppendKey(&j, "pages_written", s.pages_written);
    AppendKey(&j, "remote_faults", s.remote_faults);
    AppendKey(&j, "pages_fetched", s.pages_fetched);
    j += s.full ? "\"full\":true}" : "\"full\":false}";
  }
  j += "]}";
  return j;
}

std::string StatsText(const std::vector<TierStats>& tiers, const RuntimeCounters& c) {
  std::string out;
  char buf[256];
  for (const TierStats& t : tiers) {
    if (!t.available) {
      snprintf(buf, sizeof(buf), "%-6s absent: %s\n", std::string(TierName(t.tier)).c_str(),
               t.absent_reason.c_str());
    } else {
      snprintf(buf, sizeof(buf),
               "%-6s allocated %" PRIu64 " bytes of %" PRIu64 ", migrated in %" PRIu64
               " pages, out %" PRIu64 "\n",
               std::string(TierName(t.tier)).c_str(), t.allocated_bytes, t.capacity_bytes,
               t.pages_migrated_in, t.pages_migrated_out);
    }
    out += buf;
  }
  snprintf(buf, sizeof(buf),
           "remote faults %" PRIu64 " (zero fills %" PRIu64 "), evicted %" PRIu64
           " pages (written %" PRIu64 ")\n",
           c.remote_faults, c.zero_fills, c.pages_evicted, c.pages_written);
  out += buf;
  snprintf(buf, sizeof(buf),
           "policy %s: %" PRIu64 " rounds, %" PRIu64 " demotions, %" PRIu64 " promotions\n",
           c.sampling_mode.c_str(), c.policy_rounds, c.demotions, c.promotions);
  out += buf;
  return out;
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
    *value = StatsText(Stats(), Counters());
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
