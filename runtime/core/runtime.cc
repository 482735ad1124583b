#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "base/log.h"
#include "runtime/tiering/migrator.h"
#include "runtime/tiering/tracker.h"
#include "base/os.h"
#include "runtime/core/runtime_fork.h"
#include "runtime/core/runtime_impl.h"
#include "base/runtime_thread.h"
#include "runtime/topology/topology_internal.h"

namespace tiermem {

std::string_view TierName(Tier tier) {
  switch (tier) {
    case Tier::kDram: return "dram";
    case Tier::kCxl: return "cxl";
    case Tier::kRemote: return "remote";
    case Tier::kAuto: return "auto";
  }
  return "?";
}

StatusOr<Tier> ParseTier(std::string_view name) {
  if (name == "dram") return Tier::kDram;
  if (name == "cxl") return Tier::kCxl;
  if (name == "remote") return Tier::kRemote;
  if (name == "auto") return Tier::kAuto;
  return InvalidArgument("unknown tier '" + std::string(name) + "' (dram, cxl, remote or auto)");
}

namespace internal {

std::string Hex(const void* p) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}

}  // namespace internal

using internal::Hex;

// The option table's bounds (base/option_checks.h) are those of the parts that take the values.
static_assert(ProtectTracker::kMaxArmed >= kOptMaxSamplePages);


// A page-granular memory_resource on one tier: the upstream of the pool resource that
// Runtime::Resource hands out.
class Runtime::Impl::PageResource final : public std::pmr::memory_resource {
 public:
  PageResource(Impl* impl, Tier tier) : impl_(impl), tier_(tier) {}

 private:
  void* do_allocate(size_t bytes, size_t align) override {
    if (align > impl_->page_size()) throw std::bad_alloc();
    auto p = impl_->Allocate(bytes == 0 ? 1 : bytes, tier_, kAllocDefault);
    if (!p.ok()) throw std::bad_alloc();
    return *p;
  }
  void do_deallocate(void* p, size_t, size_t) override {
    Status s = impl_->Free(p);
    if (!s.ok()) TM_LOG_ERROR("pmr deallocate: %s", s.ToString().c_str());
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }
  Impl* impl_;
  Tier tier_;
};

Runtime::Impl::Impl() { sb_ = &fallback_stats_; }  // the fallback until Init makes the stats block

Runtime::Impl::~Impl() {
  Stop().IgnoreError();
  internal::UnregisterLiveRuntime(this);
}

Status Runtime::Impl::Init(const Options& o) {
  page_size_ = os::PageSize();
  LoadOptionsFromEnv(&opts_);
  // API options override the environment, through the same table entries and parsers
  // (Options::Set has checked every name and value).
  TIERMEM_RETURN_IF_ERROR(o.status());
  for (const auto& [name, value] : o.values()) {
    const OptionSpec* spec = FindOption(name);
    if (spec == nullptr || !SetOption(&opts_, *spec, value.c_str())) {
      return InvalidArgument("Options: " + name + "=\"" + value + "\" is not valid");
    }
  }
  SetLogLevel(opts_.log_level);
  on_remote_full_ = RemoteFullPolicyOf(opts_);
  TIERMEM_RETURN_IF_ERROR(CheckTrackOptions(opts_));

  TIERMEM_ASSIGN_OR_RETURN(topo_, DiscoverTopology("/sys"));
  TIERMEM_RETURN_IF_ERROR(ResolveTiers());
  stats_.Create();
  if (stats_.block() != nullptr) sb_ = stats_.block();
  allocated_ = sb_->allocated_bytes;

  regions_[0] = std::make_unique<Region>();
  Status s = regions_[0]->Init(opts_.region_size);
  if (!s.ok()) return s.WithContext("reserving the first managed region");
  PublishRegion(0);
  nregions_.store(1, std::memory_order_release);
  // The remote tier: connect, start the fault handler.
  if (opts_.remote[0] != '\0' || opts_.remote_file[0] != '\0') StartRemoteTier();
  running_.store(true, std::memory_order_release);
  PublishTopology();
  StartStatsTimeline();
  internal::RegisterLiveRuntime(this);
  for (int t = 0; t <= kNumTiers; ++t) {
    page_resources_[t] = std::make_unique<PageResource>(this, static_cast<Tier>(t));
  }
  // Automatic tiering: the policy thread starts only when a tier has a budget.
  // The preload library installs the runtime-thread hook before it starts its runtime; no
  // other runtime has one (a file name in LD_PRELOAD would say nothing about which runtime
  // this is, and a renamed copy of the library would not say it at all).
  const bool preloaded = RuntimeThreadHookSet();
  preloaded_ = preloaded;
  TieringConfig tc = TieringConfigFromOptions(opts_, page_size_, HasTier(Tier::kCxl), HasTier(Tier::kRemote),
                                              preloaded, ProtectTracker::kMaxArmed,
                                              pager_ != nullptr ? pager_->sampler() : nullptr);
  tc.clock = clock_;
  if (tc.track_scan && pager_ != nullptr) {
    // The scan goes through the pager's descriptor; where the kernel could not give it the
    // features that takes, the runtime runs without the scan (the pager said why).
    if (pager_->write_scan()) {
      scan_host_ = std::make_unique<PagerScanHost>(pager_.get());
      tc.scan_host = scan_host_.get();
    } else {
      tc.track_scan = false;
      TM_LOG_WARN("TIERMEM_TRACK=scan: off (the remote tier's userfaultfd has no write scan here)");
    }
  }
  migrator_ = std::make_unique<Migrator>(this, std::move(tc), &sb_->counters);
  if (Status ms = migrator_->Start(); !ms.ok()) TM_LOG_WARN("tiering: %s", ms.ToString().c_str());
  if (migrator_->running()) live_migrator_.store(migrator_.get(), std::memory_order_release);
  if (pager_ != nullptr) pager_->WatchClaims(migrator_->protecting_sampler());
  SmallPagesWhileTiering(*regions_[0]);
  TM_LOG_INFO("started: dram nodes %s, cxl nodes %s, region %llu MiB",
              NodeListString(tier_nodes_[0]).c_str(), NodeListString(tier_nodes_[1]).c_str(),
              static_cast<unsigned long long>(opts_.region_size >> 20));
  return Status::Ok();
}

// The pager's configuration from the options, with the runtime's PagingEvents, through which
// paging reports to the counts and the policy thread.
PagerConfig Runtime::Impl::MakePagerConfig() {
  PagerConfig pc;
  pc.servers = opts_.remote;
  pc.servers_file = opts_.remote_file;
  pc.token = opts_.token;
  pc.timeout_ms = static_cast<uint32_t>(opts_.remote_timeout_ms);
  pc.replicas = static_cast<uint32_t>(opts_.replicas);  // 1 to kMaxReplicas (the table's range)
  pc.repair_rate = opts_.repair_rate;
  pc.fork_share = strcmp(opts_.fork, "share") == 0;
  pc.wp_async = strcmp(opts_.track, "scan") == 0;  // the write scan reads the pager's ranges
  pc.code = opts_.remote_code;
  pc.prefetch_window = Prefetcher::WindowFromOption(opts_.prefetch);
  pc.fault_spin_us = FaultSpinFromOption(opts_.fault_spin_us);
  pc.fault_connections = static_cast<uint32_t>(opts_.fault_connections);  // 1 to 8 (the table's range)
  pc.events = &pager_events_;
  pc.counters = &sb_->counters;
  pc.server_counters = sb_->servers;
  pc.clock = clock_;
  return pc;
}

// Starts the pager; when no server can be reached the remote tier is absent (or, with
// TIERMEM_REMOTE_REQUIRED=1, the process ends), said once with what becomes of DRAM's limit.
void Runtime::Impl::StartRemoteTier() {
  auto pager = Pager::Start(MakePagerConfig());
  if (pager.ok()) {
    pager_ = std::move(*pager);
  } else {
    // The pager's messages about the servers file name the file themselves.
    tier_absent_[2] = (opts_.remote[0] != '\0' ? "TIERMEM_REMOTE=" + std::string(opts_.remote) + ": " : "") +
                      pager.status().message();
    remote_absent_ = true;
    if (opts_.remote_required) {
      TM_LOG_ERROR("remote tier unavailable: %s; TIERMEM_REMOTE_REQUIRED=1: exiting (status %d)",
                   tier_absent_[2].c_str(), kRemoteLostExitCode);
      ExitRemoteLost();
    }
    // Said once, here: what becomes of the DRAM limit without the tier it relied on.
    const char* limit = "";
    if (opts_.dram_limit != 0) {
      limit = on_remote_full_ == RemoteFullPolicy::kFail
                  ? "; TIERMEM_DRAM_LIMIT stays a cap (TIERMEM_ON_REMOTE_FULL=fail): allocations "
                    "past it fail with ENOMEM"
                  : "; TIERMEM_DRAM_LIMIT is not kept (TIERMEM_ON_REMOTE_FULL=overcommit): DRAM "
                    "grows past it";
    }
    TM_LOG_ERROR("remote tier unavailable: %s; running on DRAM only%s", tier_absent_[2].c_str(), limit);
  }
}

Status Runtime::Impl::ResolveTiers() {
  node_tier_.fill(-1);
  auto pick = [&](const char* env, const char* value, std::vector<int> automatic,
                  std::vector<int>* out) {
    std::string v = value;
    if (v == "auto" || v.empty()) {
      *out = std::move(automatic);
      return;
    }
    if (v == "none") {
      out->clear();
      return;
    }
    std::vector<int> list;
    bool ok = internal::ParseCpuList(v, &list) && !list.empty();
    for (int n : list) {
      const NumaNode* node = topo_.Node(n);
      if (node == nullptr || node->mem_bytes == 0) ok = false;
    }
    if (!ok) {
      TM_LOG_WARN("%s=\"%s\" names no usable NUMA node list on this machine (nodes with memory: "
                  "see `tiermemctl topology`); using the default \"auto\"",
                  env, value);
      *out = std::move(automatic);
      return;
    }
    *out = std::move(list);
  };
  pick("TIERMEM_DRAM_NODES", opts_.dram_nodes, topo_.NodesOf(NodeKind::kDram), &tier_nodes_[0]);
  std::vector<int> warm = topo_.NodesOf(NodeKind::kCxl);
  if (warm.empty()) warm = topo_.NodesOf(NodeKind::kFar);
  pick("TIERMEM_CXL_NODES", opts_.cxl_nodes, warm, &tier_nodes_[1]);
  // A node belongs to one tier: DRAM wins.
  std::erase_if(tier_nodes_[1], [&](int n) {
    return std::find(tier_nodes_[0].begin(), tier_nodes_[0].end(), n) != tier_nodes_[0].end();
  });
  if (tier_nodes_[0].empty()) {
    return Unavailable("no DRAM node: no NUMA node with both CPUs and memory was found");
  }
  for (int t = 0; t < 2; ++t) {
    uint64_t cap = 0;
    for (int n : tier_nodes_[t]) {
      if (n >= 0 && n < static_cast<int>(node_tier_.size())) node_tier_[n] = t;
      cap += topo_.Node(n)->mem_bytes;
    }
    tier_capacity_[t] = cap;
  }
  tier_limit_[0] = opts_.dram_limit;
  tier_limit_[1] = opts_.cxl_limit;
  tier_limit_[2] = 0;
  if (tier_nodes_[1].empty()) {
    std::string v = opts_.cxl_nodes;
    tier_absent_[1] = v == "none" ? "TIERMEM_CXL_NODES=none"
                                  : "no CXL or memory-only NUMA node: " + topo_.cxl_absent_reason;
  }
  tier_absent_[2] =
      "the remote tier is not configured (set TIERMEM_REMOTE=tcp://host:port and run "
      "tiermem-memd there)";
  return Status::Ok();
}

Status Runtime::Impl::Stop() {
  if (!running_.load(std::memory_order_acquire)) return Status::Ok();
  live_migrator_.store(nullptr, std::memory_order_release);
  if (pager_ != nullptr) pager_->WatchClaims(nullptr);
  if (migrator_) migrator_->Stop();  // no migration while the runtime goes away
  FinishStats();
  pools_ = {};  // returns their chunks while Free still works
  running_.store(false, std::memory_order_release);
  page_resources_ = {};
  pager_.reset();  // stops the fault handler before the regions go
  int n = nregions_.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) regions_[i]->Release();
  nregions_.store(0, std::memory_order_release);
  sb_->nregions.store(0, std::memory_order_release);
  stats_.Remove();
  return Status::Ok();
}

bool Runtime::Impl::HasTier(Tier tier) const {
  if (tier == Tier::kAuto) return true;
  if (tier == Tier::kRemote) return pager_ != nullptr && !pager_->forked_child();
  return !tier_nodes_[Index(tier)].empty();
}

Tier Runtime::Impl::TierOfNode(int node) const {
  if (node < 0 || node >= static_cast<int>(node_tier_.size()) || node_tier_[node] < 0) {
    return Tier::kAuto;
  }
  return static_cast<Tier>(node_tier_[node]);
}

void Runtime::Impl::NoteRemoteFull() const {
  // One thread a minute prints; the others return at once (base/once_per.h).
  if (!remote_full_warning_.Take(os::MonotonicNanos())) return;
  char servers[512] = "";
  if (pager_ != nullptr) pager_->DescribeServers(servers, sizeof(servers));
  const uint64_t limit = tier_limit_[Index(Tier::kDram)];
  const uint64_t dram = allocated_[Index(Tier::kDram)].load(std::memory_order_relaxed);
  const bool fail = on_remote_full_ == RemoteFullPolicy::kFail;
  TM_LOG_WARN("remote tier full: no memory server can take more pages (%s); DRAM holds %llu bytes, "
              "%llu over its limit of %llu (TIERMEM_DRAM_LIMIT); TIERMEM_ON_REMOTE_FULL=%s: %s",
              servers, static_cast<unsigned long long>(dram),
              static_cast<unsigned long long>(limit != 0 && dram > limit ? dram - limit : 0),
              static_cast<unsigned long long>(limit), fail ? "fail" : "overcommit",
              fail ? "allocations past the limit fail with ENOMEM"
                   : "pages stay in DRAM past the limit");
}

// The policy tracks and moves 4 KiB pages. A transparent huge page moves as a whole
// (move_pages on one of its pages migrates all 512), so under THP "always" demoting one
// confirmed-cold page took its 511 neighbours, hot ones included, to the CXL node: 512 pages of
// the hot set sat there for 15 s in the QEMU full guest. While the policy thread runs, a region's
// data gets small pages only (MADV_NOHUGEPAGE before its first touch).
void Runtime::Impl::SmallPagesWhileTiering(Region& region) {
  if (migrator_ == nullptr || !migrator_->running()) return;
  // EINVAL without THP support: nothing to prevent then.
  (void)os::NoHugePages(region.PageAddress(0), region.pages() * page_size_);
}

StatusOr<Region*> Runtime::Impl::AllocRunAnywhere(uint64_t npages, PageState initial,
                                                  uint64_t* first) {
  for (;;) {
    int n = nregions_.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i) {
      uint64_t f = regions_[i]->AllocRun(npages, initial);
      if (f != Region::kNoRun) {
        *first = f;
        return regions_[i].get();
      }
    }
    std::lock_guard<std::mutex> lock(grow_mu_);
    if (nregions_.load(std::memory_order_acquire) != n) continue;  // another thread grew it
    if (n == kMaxRegions) {
      return ResourceExhausted("tiermem's managed address space is full (" +
                               std::to_string(kMaxRegions) + " regions)");
    }
    uint64_t bytes = std::max<uint64_t>(opts_.region_size, npages * page_size_);
    if (regions_[n] == nullptr) regions_[n] = std::make_unique<Region>();
    Status s = regions_[n]->Init(bytes);
    if (!s.ok()) return s.WithContext("adding a managed region");
    SmallPagesWhileTiering(*regions_[n]);
    PublishRegion(n);
    nregions_.store(n + 1, std::memory_order_release);
  }
}

StatusOr<void*> Runtime::Impl::Allocate(size_t bytes, Tier tier, uint32_t flags) {
  if (!running()) return Unavailable("the tiermem runtime is stopped");
  if (bytes == 0) return InvalidArgument("Allocate: size 0");
  if (bytes > (1ull << 46)) return ResourceExhausted("Allocate: size larger than 64 TiB");
  const uint64_t npages = (bytes + page_size_ - 1) / page_size_;
  const uint64_t rounded = npages * page_size_;
  uint64_t untouched_bytes = 0;
  TIERMEM_ASSIGN_OR_RETURN(Tier chosen, ChooseTier(tier, rounded, flags, &untouched_bytes));
  const bool untouched = untouched_bytes > 0;
  // A split run: its first `head` pages untouched on DRAM, the rest on the remote tier.
  const uint64_t head = untouched ? untouched_bytes / page_size_ : 0;
  const bool split = untouched && head < npages;
  uint64_t first = 0;
  // A remote run is born claimed (kInFlight) and AdoptRemote finishes it as kRemote once it is
  // registered: nobody else (a migration working from a stale view) may claim it before then.
  // A split run is born claimed whole, and its head is let go as kLocal once its tail is adopted.
  const PageState initial = chosen == Tier::kRemote || split ? PageState::kInFlight : PageState::kLocal;
  TIERMEM_ASSIGN_OR_RETURN(Region * region, AllocRunAnywhere(npages, initial, &first));
  char* p = region->PageAddress(first);
  // Remote pages that fault back in land in DRAM.
  const Tier bind_tier = chosen == Tier::kRemote ? Tier::kDram : chosen;
  Status s = NumaBackend::BindRange(p, rounded, tier_nodes_[Index(bind_tier)]);
  if (s.ok() && chosen == Tier::kRemote) s = pager_->AdoptRemote(*region, first, npages);
  if (s.ok() && split) s = pager_->AdoptRemote(*region, first + head, npages - head);
  if (!s.ok()) {
    region->FreeRun(first);
    return s;
  }
  // Counted before the pages carry their tier: CountResident may take an untouched page out of
  // the count as soon as it reads the tier, and the count must not go below zero meanwhile.
  // An untouched run counts nothing until CountResident (the policy thread) finds its pages
  // resident and moves each, by a compare-exchange of its tier, onto DRAM's count.
  if (!untouched) allocated_[Index(chosen)].fetch_add(rounded, std::memory_order_relaxed);
  if (split) allocated_[Index(Tier::kRemote)].fetch_add((npages - head) * page_size_, std::memory_order_relaxed);
  if (!untouched && chosen == Tier::kDram && CountsResident()) unseen_pages_.fetch_add(npages);
  const uint8_t tag = untouched ? kUntouchedTier : static_cast<uint8_t>(chosen);
  for (uint64_t i = first; i < first + npages; ++i) {
    PageRecord& rec = region->record(i);
    const bool tail = split && i >= first + head;
    rec.tier.store(tail ? static_cast<uint8_t>(Tier::kRemote) : tag, std::memory_order_relaxed);
    // A split run's head, let go once its tier is set (its tail was adopted above).
    if (split && !tail) rec.state.store(static_cast<uint8_t>(PageState::kLocal), std::memory_order_release);
  }
  // Every page carries the pin, so a victim is checked without finding its run's head.
  if (flags & kAllocPin) {
    for (uint64_t i = first; i < first + npages; ++i) region->record(i).flags.fetch_or(kPagePinned);
  }
  if (migrator_) migrator_->OnAllocate(region, first, npages);  // pages to watch
  if ((flags & kAllocPopulate) && chosen != Tier::kRemote) {
    int rc = os::Populate(p, rounded);
    if (rc != 0) TM_LOG_WARN("populating %llu bytes: %s", static_cast<unsigned long long>(rounded),
                             strerror(-rc));
  }
  return static_cast<void*>(p);
}

Status Runtime::Impl::Free(void* ptr) {
  if (ptr == nullptr) return Status::Ok();
  if (!running()) return Unavailable("the tiermem runtime is stopped");
  Region* region = RegionOf(ptr);
  if (region == nullptr) {
    return InvalidArgument("Free(" + Hex(ptr) + "): this pointer was not allocated by tiermem");
  }
  if (reinterpret_cast<uintptr_t>(ptr) % page_size_ != 0) {
    return InvalidArgument("Free(" + Hex(ptr) +
                           "): not the start of a tiermem allocation (not page-aligned)");
  }
  const uint64_t first = region->PageIndex(ptr);
  const uint64_t len = region->DetachRun(first);
  if (len == 0) {
    return InvalidArgument("Free(" + Hex(ptr) +
                           "): not the start of a live tiermem allocation (already freed, or "
                           "inside one)");
  }
  // Each page's tier is taken (exchanged for "none") so its bytes leave the count exactly once:
  // a migration working from a stale view of these pages exchanges the tier too, and moves the
  // bytes between counts only when it finds a real tier there.
  for (uint64_t i = first; i < first + len; ++i) {
    int t = region->record(i).tier.exchange(kNoTier, std::memory_order_relaxed);
    if (t < kNumTiers) allocated_[t].fetch_sub(page_size_, std::memory_order_relaxed);
  }
  if (migrator_) migrator_->OnFree(region, first, len);  // lift sampling protection
  if (pager_) pager_->OnFree(*region, first, len);  // slots back, range unregistered
  int rc = os::Discard(ptr, len * page_size_);
  if (rc != 0) TM_LOG_WARN("Free: madvise(DONTNEED) failed: %s", strerror(-rc));
  region->ReleaseRun(first, len);
  return Status::Ok();
}

Status Runtime::Impl::DiscardPages(void* p, size_t bytes) {
  Region* region = RegionOf(p);
  if (region == nullptr || bytes == 0 || reinterpret_cast<uintptr_t>(p) % page_size_ != 0 ||
      bytes % page_size_ != 0) {
    return InvalidArgument("DiscardPages: not whole pages of tiermem's managed memory");
  }
  if (pager_) {
    pager_->OnDiscard(*region, region->PageIndex(p), bytes / page_size_);
    return Status::Ok();
  }
  int rc = os::Discard(p, bytes);
  return rc == 0 ? Status::Ok() : ErrnoToStatus(-rc, "madvise(DONTNEED)");
}

StatusOr<size_t> Runtime::Impl::AllocationSize(const void* ptr) const {
  Region* region = RegionOf(ptr);
  if (region == nullptr || reinterpret_cast<uintptr_t>(ptr) % page_size_ != 0) {
    return InvalidArgument("AllocationSize(" + Hex(ptr) + "): not a tiermem allocation");
  }
  uint64_t len = region->RunLength(region->PageIndex(ptr));
  if (len == 0) return InvalidArgument("AllocationSize(" + Hex(ptr) + "): not a live allocation");
  return static_cast<size_t>(len * page_size_);
}

std::vector<TierStats> Runtime::Impl::Stats() const {
  std::vector<TierStats> out;
  for (int t = 0; t < kNumTiers; ++t) {
    TierStats s;
    s.tier = static_cast<Tier>(t);
    s.available = HasTier(s.tier);
    if (!s.available) s.absent_reason = tier_absent_[t];
    s.nodes = tier_nodes_[t];
    s.capacity_bytes = tier_capacity_[t];
    s.limit_bytes = tier_limit_[t];
    if (tier_limit_[t] != 0 && (s.capacity_bytes == 0 || tier_limit_[t] < s.capacity_bytes)) {
      s.capacity_bytes = tier_limit_[t];
    }
    s.allocated_bytes = allocated_[t].load(std::memory_order_relaxed);
    for (int o = 0; o < kNumTiers; ++o) {
      s.pages_migrated_in += sb_->moves[o][t].load(std::memory_order_relaxed);
      s.pages_migrated_out += sb_->moves[t][o].load(std::memory_order_relaxed);
    }
    if (t == Index(Tier::kRemote) && s.capacity_bytes == 0) s.capacity_bytes = RemoteCapacityBytes();
    out.push_back(std::move(s));
  }
  return out;
}

std::pmr::memory_resource* Runtime::Impl::Resource(Tier tier) {
  int t = Index(tier);
  if (t > kNumTiers || !page_resources_[t]) return nullptr;
  // An absent tier gets the page resource itself, whose every allocation throws bad_alloc (a
  // pool would fail already while building its bookkeeping).
  if (tier != Tier::kAuto && !HasTier(tier) && !opts_.allow_fallback) {
    return page_resources_[t].get();
  }
  std::lock_guard<std::mutex> lock(grow_mu_);
  if (!pools_[t]) {
    pools_[t] = std::make_unique<std::pmr::synchronized_pool_resource>(page_resources_[t].get());
  }
  return pools_[t].get();
}

// ---- Runtime (public) ----

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

StatusOr<std::unique_ptr<Runtime>> Runtime::Start(const Options& options) {
  return RuntimeAccess::Start(options, &SystemClock());
}

StatusOr<std::unique_ptr<Runtime>> RuntimeAccess::Start(const Options& options, Clock* clock) {
  auto impl = std::make_unique<Runtime::Impl>();
  impl->clock_ = clock;
  TIERMEM_RETURN_IF_ERROR(impl->Init(options));
  return std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
}

Status Runtime::Stop() { return impl_->Stop(); }
StatusOr<void*> Runtime::Allocate(size_t bytes, Tier tier, uint32_t flags) {
  return impl_->Allocate(bytes, tier, flags);
}
Status Runtime::Free(void* ptr) { return impl_->Free(ptr); }
StatusOr<size_t> Runtime::AllocationSize(const void* ptr) const {
  return impl_->AllocationSize(ptr);
}
StatusOr<MigrateResult> Runtime::Migrate(void* ptr, size_t len, Tier tier) {
  return impl_->Migrate(ptr, len, tier);
}
StatusOr<MigrateResult> Runtime::MigrateToNode(void* ptr, size_t len, int node) {
  return impl_->MigrateToNode(ptr, len, node);
}
StatusOr<std::vector<PageLocation>> Runtime::Locate(const void* ptr, size_t len) const {
  return impl_->Locate(ptr, len);
}
bool Runtime::HasTier(Tier tier) const { return impl_->HasTier(tier); }
std::vector<TierStats> Runtime::Stats() const { return impl_->Stats(); }
const Topology& Runtime::topology() const { return impl_->topology(); }
std::pmr::memory_resource* Runtime::Resource(Tier tier) { return impl_->Resource(tier); }

}  // namespace tiermem
