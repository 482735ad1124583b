// The pager, first part: connecting to the servers, slots and placement, fetching back,
// free/discard and fork. Eviction is in pager_evict.cc, the fault handler thread in
// pager_fault.cc and pager_fault_intake.cc. System calls go through base/os.
#include "runtime/paging/pager.h"
#include "runtime/paging/pager_collect.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "base/log.h"
#include "base/os.h"
#include "base/os_pagemap.h"
#include "base/own_memory.h"
#include "runtime/pages/page_table.h"
#include "runtime/paging/pager_internal.h"
#include "runtime/paging/server_file.h"
#include "base/runtime_thread.h"

namespace tiermem {

using pager_internal::Cas;
using pager_internal::kBatch;
using pager_internal::kPage;
using pager_internal::S;


StatusOr<std::unique_ptr<Pager>> Pager::Start(PagerConfig config) {
  std::unique_ptr<Pager> p(new Pager());
  TIERMEM_RETURN_IF_ERROR(p->Init(std::move(config)));
  return p;
}

int64_t FaultSpinFromOption(const char* value) {
  int64_t n = -1;
  return ParseAutoCount(value, kMaxFaultSpinUs, false, &n) ? n : -1;
}

// Init's steps, in order; each returns the error that starts nothing.
Status Pager::Init(PagerConfig config) {
  config_ = std::move(config);
  prefetcher_ = Prefetcher(config_.prefetch_window);
  if (config_.events == nullptr) return InvalidArgument("pager: no PagingEvents (PagerConfig::events) given");
  if (config_.counters != nullptr) c_ = config_.counters;
  std::vector<remote::Endpoint> eps;
  std::vector<bool> from_file;  // per entry of eps: listed by the servers file alone
  TIERMEM_RETURN_IF_ERROR(ListServers(&eps, &from_file));
  TIERMEM_RETURN_IF_ERROR(SetRedundancy(eps.size()));
  TIERMEM_ASSIGN_OR_RETURN(os::Uffd uffd, OpenUffd());
  pagemap_fd_ = os::PagemapOpen();
  TIERMEM_RETURN_IF_ERROR(ConnectServers(eps, from_file));
  SetFaultSpin(eps);
  TIERMEM_RETURN_IF_ERROR(PrepareThreads(uffd));
  {
    NewRuntimeThreadSignals quiet;  // the program's signal handlers never run there
    thread_ = std::thread([this] {
      OnRuntimeThreadStart();  // its own allocations never come from evictable pages
      FaultLoop();
    });
    repair_thread_ = std::thread([this] {
      OnRuntimeThreadStart();
      RepairLoop();
    });
    writer_thread_ = std::thread([this] {
      OnRuntimeThreadStart();
      WriterLoop();
    });
  }
  fault_ready_.wait(false, std::memory_order_acquire);  // its allocations done (FaultLoop)
  if (code_) {
    TM_LOG_INFO("remote tier: memory servers %s, each page in %u data and %u parity pieces (write-protect tracking %s)",
                server_.c_str(), code_->shape().k, code_->shape().m, wp_ ? "on" : "off");
  } else {
    TM_LOG_INFO("remote tier: memory servers %s, %u replica%s of each page (write-protect tracking %s)",
                server_.c_str(), members_, members_ == 1 ? "" : "s", wp_ ? "on" : "off");
  }
  return Status::Ok();
}

// TIERMEM_REMOTE's list, then the servers file's entries not already in it.
Status Pager::ListServers(std::vector<remote::Endpoint>* eps_out, std::vector<bool>* from_file_out) {
  std::vector<remote::Endpoint>& eps = *eps_out;
  std::vector<bool>& from_file = *from_file_out;
  if (!config_.servers.empty() || config_.servers_file.empty()) {
    TIERMEM_ASSIGN_OR_RETURN(eps, remote::ParseEndpointList(config_.servers));
    from_file.assign(eps.size(), false);
  }
  if (!config_.servers_file.empty()) {
    // At start a file that cannot be read, or an entry that is not an address, is refused like
    // a bad TIERMEM_REMOTE (nothing starts); later reads only warn (WatchServerFile).
    const std::string& path = config_.servers_file;
    if (const int err = os::ReadWholeFile(path.c_str(), &server_file_text_); err != 0) {
      return InvalidArgument("TIERMEM_REMOTE_FILE=" + path + ": cannot be read (" + strerror(err < 0 ? -err : err) + ")");
    }
    ServerFileEntries file = ParseServerFile(server_file_text_);
    if (!file.bad.empty()) {
      return InvalidArgument("TIERMEM_REMOTE_FILE=" + path + ": " + file.bad[0] + " is not a memory server address");
    }
    for (const remote::Endpoint& ep : file.servers) {
      const bool listed = std::any_of(eps.begin(), eps.end(),
                                      [&](const remote::Endpoint& e) { return e.ToString() == ep.ToString(); });
      if (listed) continue;
      eps.push_back(ep);
      from_file.push_back(true);
    }
    if (eps.empty()) return InvalidArgument("TIERMEM_REMOTE_FILE=" + path + " lists no memory server");
  }
  return Status::Ok();
}

// Replicas or an erasure code over `listed` servers: checked before anything is opened or
// connected, so a bad count starts nothing.
Status Pager::SetRedundancy(size_t listed) {
  if (listed > kMaxServers) {
    return InvalidArgument("more than " + std::to_string(kMaxServers) + " memory servers listed (" +
                           std::to_string(listed) + ")");
  }
  if (config_.replicas < 1 || config_.replicas > kMaxReplicas) {
    return InvalidArgument("TIERMEM_REPLICAS=" + std::to_string(config_.replicas) + ": must be 1 to " +
                           std::to_string(kMaxReplicas));
  }
  if (config_.replicas > listed) {
    return InvalidArgument("TIERMEM_REPLICAS=" + std::to_string(config_.replicas) + " needs at least " +
                           std::to_string(config_.replicas) + " memory servers; TIERMEM_REMOTE lists " +
                           std::to_string(listed));
  }
  members_ = config_.replicas;
  TIERMEM_ASSIGN_OR_RETURN(CodeShape shape, ParseCodeShape(config_.code));
  if (shape.k != 0) {
    if (config_.replicas > 1) {
      return InvalidArgument("TIERMEM_REMOTE_CODE=" + config_.code + " and TIERMEM_REPLICAS=" +
                             std::to_string(config_.replicas) +
                             " exclude each other: a page is either coded or copied");
    }
    if (shape.n() > listed) {
      return InvalidArgument("TIERMEM_REMOTE_CODE=" + config_.code + " needs at least " + std::to_string(shape.n()) +
                             " memory servers (k+m, one piece on each); TIERMEM_REMOTE lists " +
                             std::to_string(listed));
    }
    TIERMEM_ASSIGN_OR_RETURN(code_, ErasureCode::Make(shape));
    members_ = shape.n();
    need_ = shape.k;
    per_slot_ = shape.k;
    piece_ = code_->piece_bytes(kPage);
  }
  return Status::Ok();
}

StatusOr<os::Uffd> Pager::OpenUffd() {
  if (config_.wp_async) {
    // The write scan's mode needs both features; without them the descriptor is opened as
    // usual and write_scan() says so (the runtime then runs without the scan).
    StatusOr<os::Uffd> a = os::UffdOpenWpAsync();
    if (a.ok() && a->move) {
      uffd_ = a->fd;
      wp_ = wp_async_ = true;
      return a;
    }
    if (a.ok()) os::Close(a->fd);
    TM_LOG_WARN("remote tier: no write scan on the pager's userfaultfd (%s)",
                a.ok() ? "the kernel offers no UFFD_FEATURE_MOVE (Linux 6.8+)" : a.status().message().c_str());
  }
  auto uffd = os::UffdOpen(config_.fork_share);
  if (!uffd.ok()) {
    return NotSupported("userfaultfd is not usable here (" + uffd.status().message() +
                        "); as non-root, set sysctl vm.unprivileged_userfaultfd=1");
  }
  uffd_ = uffd->fd;
  wp_ = uffd->write_protect;
  if (uffd->user_mode_only) {
    TM_LOG_WARN("remote tier: userfaultfd in user-mode-only (not root, and "
                "vm.unprivileged_userfaultfd=0): system calls that read an evicted buffer "
                "fail with EFAULT; run as root or set the sysctl to 1");
  }
  if (!wp_) {
    TM_LOG_WARN("remote tier: this kernel has no userfaultfd write-protect for anonymous memory: "
                "every eviction writes every touched page, and a page written while it is being "
                "evicted may lose that write");
  }
  return uffd;
}

// Two connections per listed server (placement and writes; faults), in list order; a server
// that cannot be reached is listed with its error and rejoined later (Rejoin).
Status Pager::ConnectServers(const std::vector<remote::Endpoint>& eps, const std::vector<bool>& from_file) {
  std::string tried;
  size_t connected = 0;
  for (size_t e = 0; e < eps.size(); ++e) {
    const remote::Endpoint& ep = eps[e];
    auto srv = std::make_unique<Server>();
    srv->name = ep.ToString();
    srv->ep = ep;
    srv->from_file = from_file[e];
    if (config_.server_counters != nullptr && servers_.size() < kMaxStatsServers) {
      srv->c = &config_.server_counters[servers_.size()];
    }
    auto io = remote::MakeTransport(ep);
    Status s = io.ok() ? (*io)->Connect(config_.token, config_.timeout_ms) : io.status();
    if (s.ok()) {
      s = srv->fault.Connect(ep, config_.token, (*io)->ticket(), config_.timeout_ms, config_.fault_connections);
      if (s.ok()) {
        srv->quota.store((*io)->quota_pages(), std::memory_order_relaxed);
        srv->c->capacity_pages.store((*io)->capacity_pages(), std::memory_order_relaxed);
        srv->c->up.store(1, std::memory_order_relaxed);
        srv->io = std::move(*io);
        srv->connected.store(true, std::memory_order_release);
        // Busy-polling the TCP fault connection (SetBusyPoll) saves a sleep and a wake-up per
        // fault on an idle machine but starves memd on a loaded 2-core one (p99 in milliseconds
        // seen here), so it is left at the transport's default (off for TCP; RDMA spins briefly
        // before it blocks on its completion channel).
        if (connected++ == 0) first_connected_ = servers_.size();
        server_ += (server_.empty() ? "" : ",") + srv->name;
      } else {
        (*io)->Close();
      }
    }
    if (!s.ok()) {
      srv->error = s.message();
      tried += (tried.empty() ? "" : "; ") + s.message();
    }
    const std::string name = srv->name;
    servers_.push_back(std::move(srv));  // at most kMaxServers (checked above)
    config_.events->OnServerListed(servers_.size() - 1, name);
  }
  if (connected == 0) return Unavailable("no memory server reachable: " + tried);
  if (connected < servers_.size()) {
    TM_LOG_WARN("remote tier: %zu of %zu memory servers unreachable, pages go to the others: %s",
                servers_.size() - connected, servers_.size(), tried.c_str());
  }
  if (connected < members_) {
    TM_LOG_WARN("remote tier: %zu memory servers reachable, fewer than %s needs: no page "
                "can be evicted until enough of them answer",
                connected, Redundancy().c_str());
  }
  return Status::Ok();
}

void Pager::SetFaultSpin(const std::vector<remote::Endpoint>& eps) {
  if (config_.fault_spin_us >= 0) {
    fault_spin_ns_ = static_cast<uint64_t>(config_.fault_spin_us) * 1000;
  } else {
    // auto: spin where no server's memd needs this host's cores to answer (one-sided RDMA).
    const bool all_rdma = std::all_of(eps.begin(), eps.end(), [](const remote::Endpoint& e) {
      return e.kind == remote::Endpoint::Kind::kRdma;
    });
    fault_spin_ns_ = all_rdma ? kAutoFaultSpinNs : 0;
  }
}

// The descriptors the threads wait on, the writer, fork sharing and the soft sampler: what the
// threads find ready when they start.
Status Pager::PrepareThreads(const os::Uffd& uffd) {
  TIERMEM_ASSIGN_OR_RETURN(stop_fd_, os::EventFd());
  if (wp_async_) {
    // The writer thread's scratch page for take-outs (evict_check.h): UFFDIO_MOVE puts a page
    // only into a range registered with the same descriptor.
    int err = 0;
    scratch_ = static_cast<char*>(os::Reserve(kPage, &err));
    if (scratch_ == nullptr) return ErrnoToStatus(-err, "mmap(the eviction check's scratch page)");
    (void)os::NoHugePages(scratch_, kPage);
    TIERMEM_RETURN_IF_ERROR(Register(scratch_, kPage).WithContext("the eviction check's scratch page"));
  }
  writer_ = std::make_unique<EvictWriter>();
  {
    TIERMEM_ASSIGN_OR_RETURN(int writer_fd, os::EventFd());
    writer_->set_event_fd(writer_fd);
  }
  // Sharing at fork needs write-protect too: a child's writes to pages shared write-protected
  // reach its descriptor, and its end is seen through one (os::UffdMmGone).
  if (uffd.fork_events && wp_) {
    TIERMEM_ASSIGN_OR_RETURN(fork_stop_fd_, os::EventFd());
    fork_share_ = true;
  } else if (config_.fork_share) {
    TM_LOG_INFO("remote tier: fork() brings remote pages back (userfaultfd fork events %s)",
                uffd.fork_events ? "without write-protect" : "refused: CAP_SYS_PTRACE is needed");
  }
  // The soft sampler needs write-protect (its copy is the page as dropped) and kernel-mode
  // faults (a system call on a sampled page waits for the handler instead of failing).
  // Not in write-scan mode: write faults are resolved in the kernel there, never reported.
  if (wp_ && !wp_async_ && !uffd.user_mode_only && pagemap_fd_ >= 0) {
    sampler_ = std::make_unique<UffdSampler>(this);
    if (!sampler_->ok()) sampler_.reset();
  }
  return Status::Ok();
}

Pager::~Pager() {
  if (forked_child_) {
    DestroyInChild();
    return;
  }
  ForgetAtExit();
  StopChildren();  // children still served get every page they may still read first
  if (sampler_) sampler_->DisarmAll();  // every sampled page back while the handler still runs
  if (repair_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(repair_mu_);
      repair_stop_.store(true, std::memory_order_relaxed);
    }
    repair_cv_.notify_one();
    repair_thread_.join();
  }
  if (writer_thread_.joinable()) {  // every queued write finished first (or failed)
    writer_->Stop();
    writer_thread_.join();
  }
  if (writer_ && writer_->event_fd() >= 0) os::Close(writer_->event_fd());
  if (thread_.joinable()) {
    os::EventFdSignal(stop_fd_);
    thread_.join();
  }
  for (auto& s : servers_) {
    if (s->io) s->io->Close();
    s->fault.Drop(/*release=*/false, nullptr);
  }
  if (uffd_ >= 0) os::Close(uffd_);
  if (scratch_ != nullptr) (void)os::Unmap(scratch_, kPage);
  if (stop_fd_ >= 0) os::Close(stop_fd_);
  if (fork_stop_fd_ >= 0) os::Close(fork_stop_fd_);
  if (pagemap_fd_ >= 0) os::Close(pagemap_fd_);
}

uint64_t Pager::DegradedPagesNow() const {
  // Pages in ranges with a down member (a moment's figure: slots change hands meanwhile).
  std::lock_guard<std::mutex> lock(slots_mu_);
  uint64_t pages = 0;
  for (const auto& r : ranges_) {
    if (!Healthy(*r)) pages += r->used.load(std::memory_order_relaxed);
  }
  return pages;
}

std::vector<PagerServerStats> Pager::server_stats() const {
  std::vector<PagerServerStats> out;
  const uint64_t now = Now();
  out.reserve(servers_.size());
  for (const auto& s : servers_) {
    PagerServerStats& st = out.emplace_back();
    st.server = s->name;
    st.connected = s->connected.load(std::memory_order_acquire);
    st.error = s->error;
    st.pages = s->c->pages.load(std::memory_order_relaxed);
    st.slots = s->c->slots.load(std::memory_order_relaxed);
    st.written = s->c->written.load(std::memory_order_relaxed);
    st.faults = s->c->faults.load(std::memory_order_relaxed);
    st.fetched = s->c->fetched.load(std::memory_order_relaxed);
    st.full = st.connected && s->healthy_free.load(std::memory_order_relaxed) == 0 &&
              s->full_until_ns.load(std::memory_order_relaxed) > now;
    st.down = s->down.load(std::memory_order_acquire);
    st.withdrawn = s->withdrawn.load(std::memory_order_relaxed);
    if (st.down) st.down_reason = DownReason(out.size() - 1);
    st.rejoin_tries = s->rejoin_tries.load(std::memory_order_relaxed);
  }
  return out;
}

bool Pager::Full() const {
  // Not full while a healthy group has a free slot (free slots of groups with a member down do
  // not count: no new page goes there), or while a new group could be formed: `replicas` usable
  // servers whose memd has not refused a slot. The counts are those of the last placement, so
  // a server lost since is taken into account by the next eviction.
  uint32_t able = 0;
  for (size_t k = 0, n = servers_.size(); k < n; ++k) {
    if (!Placeable(k)) continue;
    const Server& s = *servers_[k];
    if (s.healthy_free.load(std::memory_order_relaxed) > 0) return false;
    if (!s.refused.load(std::memory_order_relaxed)) ++able;
  }
  return able < members_;
}

uint64_t Pager::PagesStored() const {
  uint64_t pages = 0;
  for (const auto& s : servers_) pages += s->c->pages.load(std::memory_order_relaxed);
  return pages;
}

uint64_t Pager::CapacityPages() const {
  // Each page takes `replicas` slots, or k+m pieces of which a slot holds k.
  uint64_t pages = 0;
  for (size_t k = 0; k < servers_.size(); ++k) {
    if (!Usable(k)) continue;
    const Server& s = *servers_[k];
    const uint64_t cap = s.c->capacity_pages.load(std::memory_order_relaxed);
    const uint64_t quota = s.quota.load(std::memory_order_relaxed);
    // A server taken out of the servers file offers no room beyond what it holds.
    pages += s.withdrawn.load(std::memory_order_relaxed) ? s.c->pages.load(std::memory_order_relaxed)
             : quota != 0 && quota < cap                 ? quota
                                                         : cap;
  }
  return pages * per_slot_ / members_;
}

void Pager::DescribeServers(char* buf, size_t n) const {
  if (n == 0) return;
  buf[0] = '\0';
  size_t at = 0;
  for (size_t k = 0; k < servers_.size(); ++k) {
    const auto& s = servers_[k];
    if (!Usable(k) || at + 1 >= n) continue;
    const uint64_t cap = s->c->capacity_pages.load(std::memory_order_relaxed);
    const uint64_t q = s->quota.load(std::memory_order_relaxed);
    const uint64_t quota = q != 0 && q < cap ? q : cap;
    int w = snprintf(buf + at, n - at, "%s%s: %llu MiB%s, %llu pages used", at == 0 ? "" : "; ",
                     s->name.c_str(), static_cast<unsigned long long>(quota * kPage >> 20),
                     quota < cap ? " quota" : "",
                     static_cast<unsigned long long>(s->c->pages.load(std::memory_order_relaxed)));
    if (w < 0) break;
    at += static_cast<size_t>(w);
    if (at >= n) at = n - 1;
  }
}

Status Pager::Register(void* addr, size_t bytes) { return os::UffdRegister(uffd_, addr, bytes, wp_); }

Status Pager::RegisterForScan(void* addr, size_t bytes) {
  if (!wp_async_) return NotSupported("the remote tier's userfaultfd is not in write-scan mode");
  return Register(addr, bytes);
}

void Pager::Wake(void* addr, size_t bytes) { os::UffdWake(uffd_, addr, bytes); }

// ---- evict, adopt, fetch back ----

Status Pager::AdoptRemote(Region& region, uint64_t first, uint64_t n) {
  if (forked_child_) return Unavailable(kForkedMessage);
  // The records were created kInFlight, with no slot and no flags, by Region::AllocRun: the
  // run is ours to finish, and an evictor or fetcher working from a stale view of these pages
  // cannot claim them (had they been kLocal or kRemote for a moment, it could have, and our
  // store below would overwrite its claim; a fetch before the registration would fail).
  TIERMEM_RETURN_IF_ERROR(Register(region.PageAddress(first), n * kPage));
  for (uint64_t i = first; i < first + n; ++i) {
    region.record(i).state.store(S(PageState::kRemote), std::memory_order_release);
  }
  return Status::Ok();
}

Pager::EvictScratch::EvictScratch() : pm(kBatch) {}

StatusOr<uint64_t> Pager::FetchBack(Region& region, uint64_t first, uint64_t n) {
  std::lock_guard<std::mutex> io_lock(io_mu_);
  if (forked_child_) return Unavailable(kForkedMessage);
  DrainWrites();
  return FetchBackLocked(region, first, n);
}

StatusOr<uint64_t> Pager::FetchBackLocked(Region& region, uint64_t first, uint64_t n) {
  int err = 0;
  OwnMapping staging_map;  // counted as the runtime's own DRAM as far as reads use it
  char* staging = staging_map.Map(kBatch * kPage, &err);
  if (staging == nullptr) return ErrnoToStatus(-err, "mmap staging buffer");
  const size_t spare_bytes = SpareBytes();  // coded pages: their parity pieces
  std::vector<char> spare(kBatch * spare_bytes);
  std::vector<uint64_t> idx(kBatch);
  std::vector<ReadReq> reqs(kBatch);
  std::vector<size_t> outstanding(kMaxServers);
  uint64_t fetched = 0;
  Status failure;
  for (uint64_t b = first; b < first + n && failure.ok(); b += kBatch) {
    const uint64_t m = std::min<uint64_t>(kBatch, first + n - b);
    size_t posted = 0;
    std::fill(outstanding.begin(), outstanding.end(), 0);
    for (uint64_t i = 0; i < m; ++i) {
      PageRecord& rec = region.record(b + i);
      if (!Cas(rec, PageState::kRemote, PageState::kInFlight)) continue;
      uint32_t slot1 = rec.remote_slot.load(std::memory_order_relaxed);
      if (slot1 == 0) {  // nothing on the server: a zero page
        Status z = os::UffdZeroPage(uffd_, region.PageAddress(b + i), kPage);
        if (!z.ok()) failure = z;
        rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
        config_.events->OnResident(region, b + i, 1, true);
        rec.state.store(S(PageState::kLocal), std::memory_order_release);
        region.ClearQuiet(b + i, 1);  // no longer passed over by the scan (Region::PageQuiet)
        continue;
      }
      ReadReq& r = reqs[posted];
      r = ReadReq{};
      if (!Locate(slot1 - 1, &r.ref)) {
        Fatal(region.PageAddress(b + i), first_connected_, Internal("page slot " + std::to_string(slot1 - 1) + " has no server"));
      }
      staging_map.Touched((posted + 1) * kPage);
      r.buf = staging + posted * kPage;
      r.spare = spare.data() + posted * spare_bytes;
      idx[posted] = b + i;
      if (!PostReplicaRead(false, r, posted, outstanding)) FatalAll(region.PageAddress(b + i), r.ref, r.last);
      ++posted;
    }
    CollectReads(
        false, outstanding, posted, [&](size_t j) { return j < posted ? &reqs[j] : nullptr; },
        [&](size_t j, size_t k) {
          void* dst = region.PageAddress(idx[j]);
          Status cs = os::UffdCopy(uffd_, dst, reqs[j].buf, kPage, wp_);
          if (!cs.ok()) Fatal(dst, k, cs);
          PageRecord& rec = region.record(idx[j]);
          if (wp_) rec.flags.fetch_or(kPageRemoteClean, std::memory_order_relaxed);
          else rec.flags.fetch_and(uint8_t(~kPageRemoteClean), std::memory_order_relaxed);
          config_.events->OnResident(region, idx[j], 1, true);
          rec.state.store(S(PageState::kLocal), std::memory_order_release);
          servers_[k]->c->fetched.fetch_add(1, std::memory_order_relaxed);
          ++fetched;
        },
        [&](size_t j) { FatalAll(region.PageAddress(idx[j]), reqs[j].ref, reqs[j].last); });
    Wake(region.PageAddress(b), m * kPage);
  }
  c_->pages_fetched.fetch_add(fetched, std::memory_order_relaxed);
  if (!failure.ok()) return failure;
  return fetched;
}

// ---- free, discard ----

void Pager::OnDiscard(Region& region, uint64_t first, uint64_t n) {
  std::lock_guard<std::mutex> io_lock(io_mu_);  // no eviction of these pages meanwhile
  if (forked_child_) return ChildDrop(region, first, n, /*discard=*/true);
  DrainWrites();  // and none of their writes in flight
  // Sampled pages of the span are given up (not put back): its next touch reads zeros.
  if (sampler_) sampler_->Drop(region.PageAddress(first), n * kPage, /*unregistered=*/false);
  for (uint64_t i = first; i < first + n; ++i) {
    while (region.record(i).state.load(std::memory_order_acquire) == S(PageState::kInFlight)) {
      std::this_thread::yield();  // a fault being served by the handler thread
    }
  }
  // Drop first, then forget the server copies: a touch in between faults (missing) on a page
  // that is still kRemote and would read the old copy; the caller owns these pages and does not
  // touch them while discarding.
  (void)os::Discard(region.PageAddress(first), n * kPage);
  for (uint64_t i = first; i < first + n; ++i) {
    PageRecord& rec = region.record(i);
    uint32_t slot1 = rec.remote_slot.exchange(0, std::memory_order_relaxed);
    if (slot1 != 0) GiveSlot(slot1 - 1);
    rec.flags.fetch_and(uint8_t(~(kPageRemoteClean | kPageAhead)), std::memory_order_relaxed);
    if (rec.state.load(std::memory_order_relaxed) == S(PageState::kRemote)) {
      config_.events->OnResident(region, i, 1, false);
      rec.state.store(S(PageState::kLocal), std::memory_order_release);
    }
  }
}

void Pager::OnFree(Region& region, uint64_t first, uint64_t n) {
  // Wait for an eviction in progress (it holds io_mu_ from claim to drop): otherwise it could
  // drop pages after this run was freed and handed out again, losing the new owner's data.
  std::lock_guard<std::mutex> io_lock(io_mu_);
  if (forked_child_) return ChildDrop(region, first, n, /*discard=*/false);
  DrainWrites();  // a window of this run still being written would be dropped after the free
  // Sampled pages are given up (their run is freed), and the range is unregistered below.
  if (sampler_) sampler_->Drop(region.PageAddress(first), n * kPage, /*unregistered=*/true);
  // Each page becomes kReleasing by compare-and-swap from whatever it is, waiting while it is
  // claimed: a fault on this run may still be in flight in the handler thread (which never takes
  // io_mu_), or the handler may have claimed it as a neighbour of a first touch nearby (its zero
  // fill batch): it must install and mark the page before the run changes hands, or its late
  // "local" mark would land on the next owner's page, and its install would meet an unregistered
  // range. Once kReleasing, nobody may claim it (an evictor or fetcher with a stale view, the
  // policy thread, included) until Region::ReleaseRun: had one claimed it, the run could be
  // handed out again while it works, and its late drop would destroy what the next owner wrote.
  for (uint64_t i = first; i < first + n; ++i) {
    PageRecord& rec = region.record(i);
    for (uint8_t st = rec.state.load(std::memory_order_acquire);;) {
      if (st == S(PageState::kInFlight)) {
        std::this_thread::yield();
        st = rec.state.load(std::memory_order_acquire);
        continue;
      }
      if (rec.state.compare_exchange_weak(st, S(PageState::kReleasing), std::memory_order_acq_rel)) break;
    }
    uint32_t slot1 = rec.remote_slot.exchange(0, std::memory_order_relaxed);
    if (slot1 != 0) GiveSlot(slot1 - 1);
    rec.flags.fetch_and(uint8_t(~(kPageRemoteClean | kPageAhead)), std::memory_order_relaxed);
  }
  char* addr = region.PageAddress(first);
  (void)os::Discard(addr, n * kPage);
  // The write scan reads the whole region through this descriptor (RegisterForScan): there the
  // range stays registered, and its next owner's first touches come to the handler.
  if (!wp_async_) (void)os::UffdUnregister(uffd_, addr, n * kPage);  // never registered: fine
}

}  // namespace tiermem
