// The pager's slots and placement: ranges of memd slots (one per replica), which server gets a
// new page, which replica a read goes to, and marking a failed server down. Split from
// pager.cc; the repair of lost replicas is in pager_repair.cc.
#include <algorithm>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/os.h"
#include "runtime/paging/pager.h"
#include "runtime/paging/pager_internal.h"

namespace tiermem {

namespace {
// A server that refused an allocation of one slot is not asked again for this long, to lead a
// group or to join one (it may still take pages in healthy groups it leads with free slots):
// placement goes to the next one meanwhile.
constexpr uint64_t kFullRetryNs = 1000ull * 1000 * 1000;
}  // namespace

bool Pager::Locate(uint64_t slot, SlotRef* out) const {
  std::lock_guard<std::mutex> lock(slots_mu_);
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), slot,
                             [](uint64_t s, const std::unique_ptr<Range>& r) { return s < r->first; });
  if (it == ranges_.begin()) return false;
  --it;
  const Range& r = **it;
  if (slot >= r.first + r.count) return false;
  out->n = r.n;
  std::copy(r.m, r.m + r.n, out->m);
  out->has_join = r.has_join;
  out->join_of = r.join_of;
  out->join = r.join;
  out->offset = slot - r.first;
  out->range = static_cast<size_t>(it - ranges_.begin());
  return true;
}

bool Pager::Healthy(const Range& r) const {
  for (uint32_t i = 0; i < r.n; ++i) {
    if (!Usable(r.m[i].server)) return false;
  }
  return true;
}

std::string Pager::MemberNames(const SlotRef& ref) const {
  std::string out;
  for (uint32_t i = 0; i < ref.n; ++i) out += (i == 0 ? "" : ", ") + servers_[ref.m[i].server]->name;
  return out;
}

void Pager::NoteReadLatency(size_t server, uint64_t ns) {
  // An estimate for choosing among replicas: 1/8 of each new reading. Only the fault thread
  // writes it.
  std::atomic<uint64_t>& r = servers_[server]->read_ns;
  const uint64_t old = r.load(std::memory_order_relaxed);
  r.store(old == 0 ? ns : old - old / 8 + ns / 8, std::memory_order_relaxed);
}

void Pager::MarkDown(size_t server, const Status& why, bool quiet) {
  Server& s = *servers_[server];
  // The reason without the server's name where the message starts with it ("tcp://h:p: memory
  // server tcp://h:p: no reply"): the warning names the server once.
  std::string reason = why.message();
  for (const std::string& prefix : {s.name + ": ", "memory server " + s.name + ": "}) {
    if (reason.rfind(prefix, 0) == 0) reason.erase(0, prefix.size());
  }
  if (reason.empty()) reason = why.message();
  {
    // Written by the first caller only.
    std::lock_guard<std::mutex> lock(repair_mu_);
    if (s.down.load(std::memory_order_relaxed)) return;
    s.down_reason = reason;
    s.down.store(true, std::memory_order_release);
    health_gen_.fetch_add(1, std::memory_order_release);  // its groups take no new page now
    repair_wanted_ = true;
  }
  repair_cv_.notify_one();
  s.c->up.store(0, std::memory_order_relaxed);
  c_->remote_servers_down.fetch_add(1, std::memory_order_relaxed);
  if (quiet) return;
  if (code_) {
    TM_LOG_WARN("remote tier: memory server %s is down (%s): its pages are read from their other "
                "pieces (any %u of %u), and its pieces rebuilt on a server that holds none of them",
                s.name.c_str(), reason.c_str(), need_, members_);
  } else if (members_ > 1) {
    TM_LOG_WARN("remote tier: memory server %s is down (%s): its pages are read from their other "
                "replicas and copied to the remaining servers",
                s.name.c_str(), reason.c_str());
  } else {
    TM_LOG_WARN("remote tier: memory server %s is down (%s): new pages go to the others; a fault "
                "on a page kept there ends the process (TIERMEM_REPLICAS=1)",
                s.name.c_str(), reason.c_str());
  }
}

uint64_t Pager::Room(size_t k) const {
  // With replicas, slots held count (a range's slots are held on every member from the start,
  // and new groups must go where they still fit); with one copy, pages in use, as the slots a
  // server holds free are used before any new ones.
  const Server& s = *servers_[k];
  const uint64_t used = members_ > 1 ? s.c->slots.load(std::memory_order_relaxed) : s.c->pages.load(std::memory_order_relaxed);
  const uint64_t quota = s.quota.load(std::memory_order_relaxed);
  const uint64_t cap = quota != 0 ? quota : ~uint64_t(0);
  return cap > used ? cap - used : 0;
}

void Pager::CountHealthyFree() {
  // Counted again only after a change of health; in between, TakeSlotOn, GiveSlotNow and
  // NewRange keep the counts. A server marked down during the count moves health_gen_ again,
  // so the next call counts again.
  const uint64_t gen = health_gen_.load(std::memory_order_acquire);
  if (gen == health_counted_) return;
  health_counted_ = gen;
  std::vector<uint64_t> free(kMaxServers, 0);
  for (const auto& r : ranges_) {
    if (!r->free.empty() && Healthy(*r)) free[r->m[0].server] += r->free.size();
  }
  for (size_t k = 0, n = servers_.size(); k < n; ++k) servers_[k]->healthy_free.store(free[k], std::memory_order_relaxed);
}

bool Pager::CanLeadGroup(size_t lead, uint64_t now) const {
  uint32_t others = 0;
  for (size_t k = 0, n = servers_.size(); k < n; ++k) {
    if (k != lead && Placeable(k) && servers_[k]->full_until_ns.load(std::memory_order_relaxed) <= now) ++others;
  }
  return others + 1 >= members_;
}

size_t Pager::PickServer(const std::vector<uint8_t>* skip, bool free_only) {
  const size_t n = servers_.size();
  const uint64_t now = Now();
  size_t best = kNoServer;
  uint64_t best_room = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (next_pick_ + k) % n;
    Server& s = *servers_[i];
    if (!Placeable(i)) continue;
    if (skip != nullptr && (*skip)[i]) continue;
    const bool has_free = s.healthy_free.load(std::memory_order_relaxed) > 0;
    if (free_only && !has_free) continue;
    // Free slots only in groups with a member down, or none: it needs a new group, and cannot
    // lead one while memd refuses it or too few others could join (no round trip to find out).
    if (!has_free && (s.full_until_ns.load(std::memory_order_relaxed) > now || !CanLeadGroup(i, now))) continue;
    const uint64_t room = Room(i);
    if (best == kNoServer || room > best_room) {
      best = i;
      best_room = room;
    }
  }
  if (best != kNoServer) next_pick_ = (best + 1) % n;
  return best;
}

StatusOr<size_t> Pager::NewRange(size_t lead, bool* lead_refused) {
  *lead_refused = false;
  Server& s = *servers_[lead];
  // Fewer servers up than a group has members: no group can be formed, and nothing is asked.
  size_t usable = 0;
  for (size_t k = 0, n = servers_.size(); k < n; ++k) usable += Placeable(k) ? 1 : 0;
  if (usable < members_) {
    return ResourceExhausted("remote tier: " + std::to_string(usable) + " memory servers are up, fewer than " +
                             Redundancy() + " needs");
  }
  // Too few others that memd has not refused lately: no group can be formed, and nothing is
  // asked (they are asked again a second after they refused).
  const uint64_t now = Now();
  if (!CanLeadGroup(lead, now)) {
    return ResourceExhausted("remote tier: fewer than " + std::to_string(members_) + " memory servers can take pages (" +
                             Redundancy() + "): the others refused slots within the last second");
  }
  DrainWrites();  // the io connections are the writer thread's while writes are out
  // Ask memd for a chunk of slots; when it refuses (capacity or quota), or too few other servers
  // grant the same count for the replicas, ask for less, down to one page, before calling the
  // lead full (or the replicas unplaceable).
  Status last = ResourceExhausted("memory server " + s.name + ": quota reached");
  bool lead_granted = false;
  auto owned = std::make_unique<Range>();
  Range& range = *owned;
  uint64_t want = FirstAsk(lead);
  for (; want > 0; want /= 2) {
    c_->placement_allocs.fetch_add(1, std::memory_order_relaxed);
    auto r = s.io->AllocSlots(want);
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kResourceExhausted) {
        last = r.status();
        continue;
      }
      MarkDown(lead, r.status());
      *lead_refused = true;  // placement moves on
      return r.status();
    }
    lead_granted = true;
    range.count = r->count * per_slot_;  // pager slots: a memd slot holds per_slot_ pieces
    range.n = 1;
    range.m[0] = MemberOn(lead, *r);
    if (members_ == 1) break;
    JoinReplicas(lead, r->count, now, &range, &last);
    if (range.n == members_) break;
    for (uint32_t i = 0; i < range.n; ++i) (void)servers_[range.m[i].server]->io->FreeSlots(range.m[i].memd);
    range.n = 0;
  }
  if (want == 0) {
    if (!lead_granted) {
      s.full_until_ns.store(Now() + kFullRetryNs, std::memory_order_relaxed);
      s.refused.store(true, std::memory_order_relaxed);
      *lead_refused = true;
      return last;
    }
    return ResourceExhausted("remote tier: fewer than " + std::to_string(members_) +
                             " memory servers can take pages (" + Redundancy() + "): " + last.message());
  }
  return AddRange(std::move(owned));
}

// The first chunk NewRange asks `lead` for: config_.slot_chunk, less with replicas or a quota.
uint64_t Pager::FirstAsk(size_t lead) const {
  const Server& s = *servers_[lead];
  const uint64_t held = s.c->slots.load(std::memory_order_relaxed);
  const uint64_t quota = s.quota.load(std::memory_order_relaxed);
  uint64_t want = config_.slot_chunk;
  if (members_ > 1) {
    // Smaller groups, so copies spread over every pairing of servers (and a lost server's
    // pages are restored from, and to, several) rather than two servers filling in step.
    want = std::min(want, kReplicaRangeSlots / per_slot_);
    if (quota != 0) want = std::min(want, std::max<uint64_t>(quota / 4, 256));
  }
  if (quota != 0) want = std::min(want, quota > held ? quota - held : 0);
  return want;
}

// The other members of a new range: the roomiest usable servers that grant `count` memd slots
// too (and did not refuse a single slot within the last second), until the range has members_.
// A refusal is kept in *last; a server that refuses one slot is not asked again for a second.
void Pager::JoinReplicas(size_t lead, uint64_t count, uint64_t now, Range* range, Status* last) {
  std::vector<std::pair<uint64_t, size_t>> order;  // (room, server)
  for (size_t k = 0; k < servers_.size(); ++k) {
    if (k == lead || !Placeable(k) || servers_[k]->full_until_ns.load(std::memory_order_relaxed) > now) continue;
    order.emplace_back(Room(k), k);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [room, k] : order) {
    if (range->n == members_) break;
    c_->placement_allocs.fetch_add(1, std::memory_order_relaxed);
    auto got = servers_[k]->io->AllocSlots(count);
    if (got.ok()) {
      range->m[range->n++] = MemberOn(k, *got);
      continue;
    }
    *last = got.status();
    if (got.status().code() != StatusCode::kResourceExhausted) {
      MarkDown(k, got.status());
    } else if (count == 1) {
      // Not one slot: full at memd, as a lead that refuses one is. Not asked to join (or
      // lead) a group for a second, so the pages that follow do not ask it again each.
      servers_[k]->full_until_ns.store(Now() + kFullRetryNs, std::memory_order_relaxed);
      servers_[k]->refused.store(true, std::memory_order_relaxed);
    }
  }
}

// Numbers a range whose members all granted their slots, and lists it; its index. Its members
// are no longer refused. ResourceExhausted (its slots given back) past 2^32 pager slots.
StatusOr<size_t> Pager::AddRange(std::unique_ptr<Range> owned) {
  Range& range = *owned;
  for (uint32_t i = 0; i < range.n; ++i) servers_[range.m[i].server]->refused.store(false, std::memory_order_relaxed);
  if (next_slot_ + range.count >= (1ull << 32)) {
    for (uint32_t i = 0; i < range.n; ++i) (void)servers_[range.m[i].server]->io->FreeSlots(range.m[i].memd);
    return ResourceExhausted("remote tier: more than 2^32 pages on memory servers");
  }
  range.first = next_slot_;
  range.free.reserve(range.count);
  for (uint64_t k = range.count; k > 0; --k) range.free.push_back(next_slot_ + k - 1);
  next_slot_ += range.count;
  for (uint32_t i = 0; i < range.n; ++i) {
    servers_[range.m[i].server]->c->slots.fetch_add(range.m[i].memd.count, std::memory_order_relaxed);
  }
  servers_[range.m[0].server]->healthy_free.fetch_add(range.count, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(slots_mu_);
  ranges_.push_back(std::move(owned));
  return ranges_.size() - 1;
}

StatusOr<uint64_t> Pager::TakeSlotOn(size_t si, bool* lead_refused) {
  *lead_refused = false;
  Server& s = *servers_[si];
  // The range it fills now, or another healthy one it leads with free slots, or a new one.
  auto fits = [&](size_t i) {
    return i < ranges_.size() && ranges_[i]->m[0].server == si && !ranges_[i]->free.empty() && Healthy(*ranges_[i]);
  };
  if (!fits(s.fill)) {
    s.fill = SIZE_MAX;
    if (s.healthy_free.load(std::memory_order_relaxed) > 0) {
      for (size_t i = 0; i < ranges_.size(); ++i) {
        if (fits(i)) {
          s.fill = i;
          break;
        }
      }
    }
    if (s.fill == SIZE_MAX) {
      auto got = NewRange(si, lead_refused);
      if (!got.ok()) return got.status();
      s.fill = *got;
    }
  }
  Range& r = *ranges_[s.fill];
  const uint64_t slot = r.free.back();
  r.free.pop_back();
  if (s.healthy_free.load(std::memory_order_relaxed) > 0) s.healthy_free.fetch_sub(1, std::memory_order_relaxed);
  r.used.fetch_add(1, std::memory_order_relaxed);
  for (uint32_t i = 0; i < r.n; ++i) servers_[r.m[i].server]->c->pages.fetch_add(1, std::memory_order_relaxed);
  if (r.has_join) servers_[r.join.server]->c->pages.fetch_add(1, std::memory_order_relaxed);
  return slot;
}

StatusOr<uint64_t> Pager::TakeSlot(size_t* placement, bool announce_full) {
  // With replicas a new group is led by the roomiest server (so leads, which reads try first
  // among equals, rotate too); with one copy the placement stays until its server is full.
  CountHealthyFree();
  if (*placement >= servers_.size() || !Placeable(*placement) ||
      (members_ > 1 && servers_[*placement]->healthy_free.load(std::memory_order_relaxed) == 0)) {
    *placement = PickServer();
  }
  // Each server is tried at most once per call: a server that refuses (full at memd, or no
  // group can be formed with it) is not picked again until the next page, so the loop ends
  // even where the counts that PickServer goes by are behind (a server marked down meanwhile).
  std::vector<uint8_t> tried;
  for (;;) {
    if (*placement >= servers_.size()) {
      if (announce_full) config_.events->OnFull();
      return ResourceExhausted("remote tier: every memory server is full (" + UsableNames() + ")");
    }
    bool lead_refused = false;
    auto slot = TakeSlotOn(*placement, &lead_refused);
    if (slot.ok()) return slot;
    if (tried.empty()) tried.assign(kMaxServers, 0);
    tried[*placement] = 1;
    const size_t refused = *placement;
    if (!lead_refused) {
      // Not the lead's fault: too few other servers could take a new group with it. A server
      // that leads a group with free slots can still take the page; none left: the tier is full.
      *placement = PickServer(&tried, /*free_only=*/true);
      if (*placement < servers_.size()) continue;
      if (slot.status().code() == StatusCode::kResourceExhausted && announce_full) config_.events->OnFull();
      return slot.status();
    }
    *placement = PickServer(&tried);  // the one refused is marked full (or down) now
    if (*placement < servers_.size()) {
      TM_LOG_INFO("remote tier: %s is full, placing on %s", servers_[refused]->name.c_str(),
                  servers_[*placement]->name.c_str());
    }
  }
}

void Pager::GiveSlot(uint64_t slot) {
  // A forked child may still read it: freed when the child lets go (ReleaseSnapshot).
  if (!holds_.empty() && holds_.Defer(slot)) return;
  GiveSlotNow(slot);
}

void Pager::GiveSlotNow(uint64_t slot) {
  SlotRef ref;
  if (!Locate(slot, &ref)) return;
  Range& r = *ranges_[ref.range];
  r.free.push_back(slot);
  r.used.fetch_sub(1, std::memory_order_relaxed);
  if (Healthy(r)) servers_[r.m[0].server]->healthy_free.fetch_add(1, std::memory_order_relaxed);
  // A down server's pages were taken off its count when the repair thread noticed it.
  for (uint32_t i = 0; i < r.n; ++i) {
    Server& s = *servers_[r.m[i].server];
    if (!s.down_counted) s.c->pages.fetch_sub(1, std::memory_order_relaxed);
  }
  if (r.has_join && !servers_[r.join.server]->down_counted) {
    servers_[r.join.server]->c->pages.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace tiermem
