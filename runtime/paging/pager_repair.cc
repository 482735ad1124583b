// The pager's repair thread. While idle it asks each server for its stats once a second (with
// TIERMEM_REPLICAS > 1), so a server that died while nobody used it is found too. After a memory
// server is marked down, each range that had a member there gets a replacement on another
// server, filled from a surviving member, so every page has TIERMEM_REPLICAS copies again.
// Rate-limited (PagerConfig::repair_rate), one range at a time, io_mu_ held a chunk at a time so
// evictions and FetchBack go on in between.
//
// Why no write is missed: the replacement joins the range (Range::join) before the copy starts,
// and from then on every eviction that writes a slot of the range writes it there too. A chunk is
// read from the survivor and written to the replacement with io_mu_ held, so no eviction writes
// a slot of that chunk in between: what the replacement ends with is the latest copy. Slots free
// when the copy starts are not copied (a page placed there later is written to the replacement
// by its eviction).
#include <algorithm>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/os.h"
#include "base/own_memory.h"
#include "runtime/paging/pager.h"
#include "runtime/paging/pager_internal.h"

namespace tiermem {

using pager_internal::kPage;

namespace {
constexpr uint64_t kRepairChunk = 64;  // pages copied per io_mu_ hold
constexpr uint64_t kRebuildChunk = 16;  // memd slots rebuilt per io_mu_ hold (coded ranges)
}  // namespace

void Pager::RepairLoop() {
  std::unique_lock<std::mutex> lock(repair_mu_);
  while (!repair_stop_.load(std::memory_order_relaxed)) {
    // Woken by MarkDown; once a second besides, for repairs that could not be done yet (no
    // server had room for a replacement).
    // AddServer wakes it too, to connect the server it listed.
    const uint64_t second = Now() + 1'000'000'000;
    const bool woken = config_.clock->WaitUntil(repair_cv_, lock, second, [&] {
      return repair_wanted_ || rejoin_wanted_ || repair_stop_.load(std::memory_order_relaxed);
    });
    const bool rejoin = rejoin_wanted_;
    repair_wanted_ = false;
    rejoin_wanted_ = false;
    if (repair_stop_.load(std::memory_order_relaxed)) break;
    lock.unlock();
    if (!woken) {
      Probe();
      WatchServerFile();
    }
    if (!woken || rejoin) Rejoin();
    if (c_->remote_servers_down.load(std::memory_order_relaxed) == 0) {
      lock.lock();
      continue;
    }
    CountDebt();
    while (!repair_stop_.load(std::memory_order_relaxed) && RepairOne()) CountDebt();
    c_->repair_passes.fetch_add(1, std::memory_order_relaxed);
    lock.lock();
  }
}

void Pager::Probe() {
  // With one replica a lost server's pages cannot be saved, and its loss is met (and reported)
  // by the first fault on one of them: no probing then.
  if (members_ == 1) return;
  for (size_t k = 0; k < servers_.size() && !repair_stop_.load(std::memory_order_relaxed); ++k) {
    if (!Usable(k)) continue;
    std::lock_guard<std::mutex> io(io_mu_);
    if (forked_child_) return;
    DrainWrites();
    auto st = servers_[k]->io->Stats();
    if (!st.ok()) MarkDown(k, st.status());
  }
}

std::string Pager::DownReason(size_t server) const {
  std::lock_guard<std::mutex> lock(repair_mu_);
  return servers_[server]->down_reason;
}

bool Pager::Listed(size_t server) const {
  std::lock_guard<std::mutex> lock(slots_mu_);
  for (const auto& r : ranges_) {
    for (uint32_t m = 0; m < r->n; ++m) {
      if (r->m[m].server == server) return true;
    }
    if (r->has_join && r->join.server == server) return true;
  }
  return false;
}

void Pager::Rejoin() {
  for (size_t k = 0; k < servers_.size() && !repair_stop_.load(std::memory_order_relaxed); ++k) {
    if (!RejoinDue(k)) continue;
    Server& s = *servers_[k];
    const bool was_connected = s.connected.load(std::memory_order_acquire);
    s.rejoin_tries.fetch_add(1, std::memory_order_relaxed);
    std::unique_ptr<remote::Transport> io;
    FaultConns fault;
    if (!ConnectAgain(s, &io, &fault)) {
      s.rejoin_wait_ms = pager_internal::NextRejoinWaitMs(s.rejoin_wait_ms);
      s.rejoin_at_ns = Now() + uint64_t{s.rejoin_wait_ms} * 1000000;
      continue;
    }
    s.rejoin_wait_ms = 0;
    s.rejoin_at_ns = 0;
    if (!TakeBack(s, std::move(io), &fault, was_connected)) return;  // forked meanwhile
    if (was_connected) {
      TM_LOG_WARN("remote tier: memory server %s answers again: it takes new pages (a new session)", s.name.c_str());
    } else {
      TM_LOG_INFO("remote tier: memory server %s answers: it takes new pages", s.name.c_str());
    }
  }
}

bool Pager::RejoinDue(size_t k) const {
  const Server& s = *servers_[k];
  const bool was_connected = s.connected.load(std::memory_order_acquire);
  if (was_connected && !s.down.load(std::memory_order_acquire)) return false;
  // A range that still lists it holds copies there that are gone (a new session starts
  // empty): it waits until the repair has moved them all.
  if (was_connected && Listed(k)) return false;
  // Taken out of the servers file (and holding nothing, or it would be Listed): nothing to
  // connect it for until it is put back.
  if (s.withdrawn.load(std::memory_order_relaxed)) return false;
  // Backing off while it stays away (pager_internal::NextRejoinWaitMs).
  return Now() >= s.rejoin_at_ns;
}

bool Pager::ConnectAgain(const Server& s, std::unique_ptr<remote::Transport>* io, FaultConns* fault) const {
  // New connections, made without the eviction lock (a silent host costs up to a second).
  const uint32_t timeout = std::min<uint32_t>(config_.timeout_ms == 0 ? 1000 : config_.timeout_ms, 1000);
  auto made_io = remote::MakeTransport(s.ep);
  if (!made_io.ok() || !(*made_io)->Connect(config_.token, timeout).ok()) return false;
  if (!fault->Connect(s.ep, config_.token, (*made_io)->ticket(), timeout, config_.fault_connections).ok()) {
    (*made_io)->Close();
    return false;
  }
  *io = std::move(*made_io);
  return true;
}

bool Pager::TakeBack(Server& s, std::unique_ptr<remote::Transport> io, FaultConns* fault, bool was_connected) {
  std::lock_guard<std::mutex> lock(io_mu_);
  if (forked_child_) {
    fault->Drop(/*release=*/false, nullptr);
    io->Close();
    return false;
  }
  DrainWrites();
  // Nothing but this lock's holder touches a server that is down or not connected, and no range
  // lists it: its state starts again.
  if (s.io) {
    s.io->Close();
    s.retired.push_back(std::move(s.io));
  }
  s.fault.Drop(/*release=*/false, &s.retired);
  s.io = std::move(io);
  for (uint32_t c = 0; c < fault->n; ++c) s.fault.t[c] = std::move(fault->t[c]);
  s.fault.n = fault->n;
  fault->n = 0;
  s.quota.store(s.io->quota_pages(), std::memory_order_relaxed);
  s.healthy_free.store(0, std::memory_order_relaxed);  // it leads no range (not Listed)
  s.fill = SIZE_MAX;
  s.down_counted = false;
  s.full_until_ns.store(0, std::memory_order_relaxed);
  s.refused.store(false, std::memory_order_relaxed);
  s.read_ns.store(0, std::memory_order_relaxed);
  s.c->capacity_pages.store(s.io->capacity_pages(), std::memory_order_relaxed);
  s.c->pages.store(0, std::memory_order_relaxed);
  s.c->slots.store(0, std::memory_order_relaxed);
  s.c->debt.store(0, std::memory_order_relaxed);
  s.gen.fetch_add(1, std::memory_order_release);
  s.c->up.store(1, std::memory_order_relaxed);  // before it is usable: a reader that sees it usable sees it up
  if (was_connected) {
    std::lock_guard<std::mutex> rl(repair_mu_);
    s.down.store(false, std::memory_order_release);
    c_->remote_servers_down.fetch_sub(1, std::memory_order_relaxed);
  } else {
    s.connected.store(true, std::memory_order_release);
  }
  return true;
}

void Pager::CountDebt() {
  std::vector<uint64_t> debt(kMaxServers, 0);
  uint64_t degraded = 0;
  {
    std::lock_guard<std::mutex> lock(slots_mu_);
    for (const auto& r : ranges_) {
      const uint64_t used = r->used.load(std::memory_order_relaxed);
      bool short_of_one = false;
      for (uint32_t m = 0; m < r->n; ++m) {
        if (Usable(r->m[m].server)) continue;
        debt[r->m[m].server] += used;
        short_of_one = true;
      }
      if (short_of_one) degraded += used;
    }
  }
  for (size_t k = 0, n = servers_.size(); k < n; ++k) servers_[k]->c->debt.store(debt[k], std::memory_order_relaxed);
  c_->remote_degraded_pages.store(degraded, std::memory_order_relaxed);
}

// A down server's copies are gone: off the counters, once. io_mu_ held.
void Pager::ForgetDownServers() {
  for (auto& s : servers_) {
    if (s->down.load(std::memory_order_acquire) && !s->down_counted) {
      s->down_counted = true;
      s->c->pages.store(0, std::memory_order_relaxed);
      s->c->slots.store(0, std::memory_order_relaxed);
    }
  }
}

// The first range with a down member and a surviving one, or coded, k surviving ones (a range
// with fewer cannot be restored: a fault on its pages ends the process, naming its servers):
// its index and the member to replace. io_mu_ held.
bool Pager::RangeToRepair(size_t* ri, uint32_t* bad) const {
  for (size_t i = 0; i < ranges_.size(); ++i) {
    const Range& r = *ranges_[i];
    if (r.n < 2 || r.has_join) continue;
    uint32_t down = r.n, up = 0;
    for (uint32_t m = 0; m < r.n; ++m) {
      if (Usable(r.m[m].server)) ++up;
      else if (down == r.n) down = m;
    }
    if (down < r.n && up >= need_) {
      *ri = i;
      *bad = down;
      return true;
    }
  }
  return false;
}

// The replacement for a member of `r`: slots granted on the roomiest usable server that is not
// a member and not taken out of the servers file. A server that fails the request other than for
// room is marked down. io_mu_ held.
bool Pager::PickReplacement(const Range& r, Member* to) {
  std::vector<std::pair<uint64_t, size_t>> order;
  for (size_t k = 0, n = servers_.size(); k < n; ++k) {
    if (!Placeable(k)) continue;
    bool member = false;
    for (uint32_t m = 0; m < r.n; ++m) member = member || r.m[m].server == k;
    if (member) continue;
    order.emplace_back(Room(k), k);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [room, k] : order) {
    auto got = servers_[k]->io->AllocSlots(r.count / per_slot_);
    if (got.ok()) {
      *to = MemberOn(k, *got);
      return true;
    }
    if (got.status().code() != StatusCode::kResourceExhausted) MarkDown(k, got.status());
  }
  return false;
}

bool Pager::RepairOne() {
  std::unique_lock<std::mutex> io(io_mu_);
  if (forked_child_) return false;
  DrainWrites();
  ForgetDownServers();
  size_t ri = SIZE_MAX;
  uint32_t bad = 0;
  if (!RangeToRepair(&ri, &bad)) return false;
  Range& r = *ranges_[ri];
  Member to;
  if (!PickReplacement(r, &to)) return false;  // again in a second
  Server& dst = *servers_[to.server];
  {
    std::lock_guard<std::mutex> lock(slots_mu_);
    r.join = to;
    r.join_of = bad;
    r.has_join = true;
  }
  dst.c->slots.fetch_add(to.memd.count, std::memory_order_relaxed);
  dst.c->pages.fetch_add(r.used.load(std::memory_order_relaxed), std::memory_order_relaxed);
  std::vector<uint8_t> in_use(r.count, 1);
  for (uint64_t slot : r.free) in_use[slot - r.first] = 0;
  const size_t lost = r.m[bad].server;
  io.unlock();
  Status st = code_ ? RebuildRange(ri, bad, to, in_use) : CopyRange(ri, to, in_use);
  io.lock();
  if (!st.ok()) {
    {
      std::lock_guard<std::mutex> lock(slots_mu_);
      r.has_join = false;
    }
    if (!dst.down_counted) {
      dst.c->slots.fetch_sub(to.memd.count, std::memory_order_relaxed);
      dst.c->pages.fetch_sub(r.used.load(std::memory_order_relaxed), std::memory_order_relaxed);
      if (Usable(to.server)) (void)dst.io->FreeSlots(to.memd);
    }
    if (st.code() != StatusCode::kAborted) {
      TM_LOG_WARN("remote tier: restoring the replicas of %llu pages on %s failed: %s",
                  static_cast<unsigned long long>(r.used.load(std::memory_order_relaxed)),
                  dst.name.c_str(), st.message().c_str());
    }
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(slots_mu_);
    r.m[bad] = to;
    r.has_join = false;
  }
  // Its free slots may take new pages again (under a new lead when member 0 was replaced).
  health_gen_.fetch_add(1, std::memory_order_release);
  TM_LOG_INFO(code_ ? "remote tier: %llu pages of %s have all their pieces again (on %s)"
                    : "remote tier: %llu pages of %s have their replicas again (on %s)",
              static_cast<unsigned long long>(r.used.load(std::memory_order_relaxed)),
              servers_[lost]->name.c_str(), dst.name.c_str());
  return true;
}

Status Pager::CopyRange(size_t ri, const Member& to, const std::vector<uint8_t>& in_use) {
  int err = 0;
  OwnMapping mem;
  char* buf = mem.Map(kRepairChunk * kPage, &err);
  if (buf == nullptr) return ErrnoToStatus(-err, "mmap repair buffer");
  mem.Touched(mem.size());  // the runtime's own DRAM while it copies: whole chunks at a time
  const uint64_t rate = std::max<uint64_t>(config_.repair_rate, 1);
  const uint64_t start = Now();
  uint64_t copied = 0;
  Status result;
  const uint64_t count = in_use.size();
  for (uint64_t off = 0; off < count && result.ok();) {
    if (repair_stop_.load(std::memory_order_relaxed)) {
      result = Aborted("stopping");
      break;
    }
    const uint64_t end = std::min(count, off + kRepairChunk);
    {
      std::lock_guard<std::mutex> io(io_mu_);
      if (forked_child_) {
        result = Aborted("forked");
        break;
      }
      DrainWrites();  // no write of the range's slots interleaves with the copy
      const Range& r = *ranges_[ri];
      int src = -1;
      for (uint32_t m = 0; m < r.n && src < 0; ++m) {
        if (Usable(r.m[m].server)) src = static_cast<int>(m);
      }
      if (src < 0) {
        result = DataLoss("no surviving replica to copy from");
        break;
      }
      const Member& from = r.m[src];
      Server& fs = *servers_[from.server];
      Server& ts = *servers_[to.server];
      bool retry = false;
      // Runs of slots in use within the chunk: one read and one write of each.
      for (uint64_t a = off; a < end && result.ok() && !retry;) {
        if (!in_use[a]) {
          ++a;
          continue;
        }
        uint64_t b = a + 1;
        while (b < end && in_use[b]) ++b;
        Status rs = remote::ReadPagesSync(*fs.io, from.memd, from.memd.first + a, buf, b - a);
        if (!rs.ok()) {
          MarkDown(from.server, rs);  // and read the chunk from another member
          retry = true;
          break;
        }
        Status ws = remote::WritePagesSync(*ts.io, to.memd, to.memd.first + a, buf, b - a);
        if (!ws.ok()) {
          MarkDown(to.server, ws);
          result = ws;
          break;
        }
        ts.c->written.fetch_add(b - a, std::memory_order_relaxed);
        copied += b - a;
        c_->remote_repaired_pages.fetch_add(b - a, std::memory_order_relaxed);
        a = b;
      }
      if (retry) continue;
    }
    off = end;
    // The rate: `copied` pages may take copied/rate seconds at the least.
    const uint64_t due = start + copied * 1'000'000'000ull / rate;
    config_.clock->SleepUntil(due);
  }
  return result;
}

Status Pager::RebuildRange(size_t ri, uint32_t bad, const Member& to, const std::vector<uint8_t>& in_use) {
  // Coded: member `bad`'s piece of each page is decoded from k other members' pieces. Piece p of
  // pager slots [s*k, s*k+k) shares memd slot s on every member at the same offsets, so whole
  // memd slots are read from k members and decoded at once, a run of them at a time.
  const uint32_t k = code_->shape().k;
  int err = 0;
  const size_t buf_bytes = (k + 1) * kRebuildChunk * kPage;
  OwnMapping mem;
  char* bufs = mem.Map(buf_bytes, &err);  // k sources, then the rebuilt piece
  if (bufs == nullptr) return ErrnoToStatus(-err, "mmap repair buffer");
  mem.Touched(buf_bytes);  // the runtime's own DRAM while it rebuilds: whole chunks at a time
  const uint64_t rate = std::max<uint64_t>(config_.repair_rate, 1);
  const uint64_t start = Now();
  uint64_t restored = 0;
  Status result;
  const uint64_t slots = in_use.size() / k;
  auto any_in_use = [&](uint64_t s) {
    for (uint64_t q = s * k; q < s * k + k; ++q) {
      if (in_use[q]) return true;
    }
    return false;
  };
  for (uint64_t off = 0; off < slots && result.ok();) {
    if (repair_stop_.load(std::memory_order_relaxed)) {
      result = Aborted("stopping");
      break;
    }
    const uint64_t end = std::min(slots, off + kRebuildChunk);
    {
      std::lock_guard<std::mutex> io(io_mu_);
      if (forked_child_) {
        result = Aborted("forked");
        break;
      }
      DrainWrites();  // no write of the range's slots interleaves with the copy
      const Range& r = *ranges_[ri];
      uint32_t have[kMaxCodeData];
      if (!PickSources(r, bad, have)) {
        result = DataLoss("fewer than " + std::to_string(k) + " pieces left to rebuild from");
        break;
      }
      bool retry = false;
      for (uint64_t a = off; a < end && result.ok() && !retry;) {
        if (!any_in_use(a)) {
          ++a;
          continue;
        }
        uint64_t b = a + 1;
        while (b < end && any_in_use(b)) ++b;
        StatusOr<uint64_t> pages = RebuildRun(r, bad, to, have, a, b, in_use, bufs, &retry);
        if (!pages.ok()) {
          result = pages.status();
          break;
        }
        restored += *pages;
        a = b;
      }
      if (retry) continue;
    }
    off = end;
    const uint64_t due = start + restored * 1'000'000'000ull / rate;
    config_.clock->SleepUntil(due);
  }
  return result;
}

bool Pager::PickSources(const Range& r, uint32_t bad, uint32_t* have) const {
  const uint32_t k = code_->shape().k;
  uint32_t nh = 0;
  for (uint32_t m = 0; m < r.n && nh < k; ++m) {
    if (m != bad && Readable(r.m[m])) have[nh++] = m;
  }
  return nh == k;
}

StatusOr<uint64_t> Pager::RebuildRun(const Range& r, uint32_t bad, const Member& to, const uint32_t* have, uint64_t a,
                                     uint64_t b, const std::vector<uint8_t>& in_use, char* bufs, bool* retry) {
  const uint32_t k = code_->shape().k;
  const uint8_t* present[kMaxCodeData];
  for (uint32_t h = 0; h < k; ++h) {
    const Member& from = r.m[have[h]];
    char* dst = bufs + h * kRebuildChunk * kPage;
    present[h] = reinterpret_cast<const uint8_t*>(dst);
    Status rs = remote::ReadPagesSync(*servers_[from.server]->io, from.memd, from.memd.first + a, dst, b - a);
    if (!rs.ok()) {
      MarkDown(from.server, rs);  // and rebuild the chunk from other members
      *retry = true;
      return uint64_t{0};
    }
  }
  char* out_buf = bufs + k * kRebuildChunk * kPage;
  uint8_t* out[1] = {reinterpret_cast<uint8_t*>(out_buf)};
  const uint32_t want[1] = {bad};
  TIERMEM_RETURN_IF_ERROR(code_->Decode((b - a) * kPage, have, present, want, 1, out));
  Server& ts = *servers_[to.server];
  Status ws = remote::WritePagesSync(*ts.io, to.memd, to.memd.first + a, out_buf, b - a);
  if (!ws.ok()) {
    MarkDown(to.server, ws);
    return ws;
  }
  uint64_t pages = 0;
  for (uint64_t q = a * k; q < b * k; ++q) pages += in_use[q];
  ts.c->written.fetch_add(b - a, std::memory_order_relaxed);
  c_->remote_repaired_pages.fetch_add(pages, std::memory_order_relaxed);
  return pages;
}

}  // namespace tiermem
