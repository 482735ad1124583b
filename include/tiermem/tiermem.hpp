// tiermem: the explicit C++ API.
//
//   auto rt = tiermem::Runtime::Start();            // reads TIERMEM_* unless Options say otherwise
//   void* p = *(*rt)->Allocate(1 << 20, tiermem::Tier::kCxl);
//   (*rt)->Migrate(p, 1 << 20, tiermem::Tier::kDram);
//   auto where = (*rt)->Locate(p, 1 << 20);        // tier and node of every page
//
// Thread safety: every Runtime method may be called from any thread at any time between Start
// and Stop. Pointers returned by Allocate stay valid until Free or Stop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tiermem/options.hpp"
#include "tiermem/counter_list.hpp"
#include "tiermem/status.hpp"
#include "tiermem/topology.hpp"

namespace tiermem {

enum class Tier : uint8_t {
  kDram = 0,    // local DRAM: NUMA nodes with CPUs
  kCxl = 1,     // memory-only NUMA nodes: CXL nodes, or far nodes when the machine has no CXL
  kRemote = 2,  // pages on a memory server (tiermem-memd), fetched on fault
  kAuto = 3,    // let tiermem decide (starts in DRAM)
};
inline constexpr int kNumTiers = 3;  // kDram, kCxl, kRemote
std::string_view TierName(Tier tier);  // "dram", "cxl", "remote", "auto"
StatusOr<Tier> ParseTier(std::string_view name);

// Flags for Runtime::Allocate.
enum AllocFlags : uint32_t {
  kAllocDefault = 0,
  kAllocAllowFallback = 1u << 0,  // place in DRAM when the asked tier is absent
  kAllocPin = 1u << 1,            // the automatic policy never moves these pages
  kAllocPopulate = 1u << 2,       // fault every page in now rather than on first touch
};

struct PageLocation {
  Tier tier = Tier::kDram;  // the tier the page is on (or, when not resident, is bound to)
  int node = -1;            // NUMA node of a resident page; -1 when not resident or remote
  bool resident = false;    // mapped in this process now
};

struct MigrateResult {
  uint64_t pages_moved = 0;          // moved by this call
  uint64_t pages_already_there = 0;  // resident on a target node before the call
  uint64_t pages_not_resident = 0;   // never touched: the new policy applies at first touch
  uint64_t pages_failed = 0;         // the kernel refused to move them after retries
};

struct TierStats {
  Tier tier = Tier::kDram;
  bool available = false;
  std::string absent_reason;    // why not available
  std::vector<int> nodes;       // NUMA nodes of the tier (empty for kRemote)
  uint64_t capacity_bytes = 0;  // node memory (servers' for kRemote), or the limit when smaller
  uint64_t limit_bytes = 0;     // TIERMEM_DRAM_LIMIT / TIERMEM_CXL_LIMIT; 0 = none
  uint64_t allocated_bytes = 0; // bytes of live allocations bound to the tier
  uint64_t pages_migrated_in = 0;
  uint64_t pages_migrated_out = 0;
};

// One memory server of TIERMEM_REMOTE, as this process sees it.
struct RemoteServerCounters {
  std::string server;      // "tcp://127.0.0.1:7471"
  bool connected = false;  // reached at start (an unreachable one gets no pages)
  std::string error;       // why not, when it was not reached
  uint64_t pages = 0;      // pages whose copy is on this server now
  uint64_t slots = 0;      // slots this process holds there
  uint64_t pages_written = 0;
  uint64_t remote_faults = 0;  // pages fetched from it by the fault handler
  uint64_t pages_fetched = 0;  // pages brought back from it other than by faults (fork, FetchBack)
  bool full = false;           // it refused the last allocation
  bool down = false;           // marked down after a failure (TIERMEM_REPLICAS: docs/protocol.md)
  std::string down_reason;     // why
};

// A histogram of durations that carries its bounds: buckets[i] counts events of at most le_ns[i]
// nanoseconds, and the last bucket (buckets has one entry more than le_ns) counts the rest.
struct DurationHistogram {
  std::vector<uint64_t> le_ns;
  std::vector<uint64_t> buckets;
  uint64_t count = 0;
  uint64_t sum_ns = 0;
  // The q-quantile (0 <= q <= 1) in nanoseconds, interpolated linearly inside the bucket that
  // holds it, so it is exact to that bucket's width; the last bucket, which has no upper bound,
  // answers its lower bound. 0 for an empty histogram.
  double QuantileNs(double q) const;
};

// What the runtime has done since Start: the remote tier's pager, the policy thread and the
// tiered heap. Counters only grow (gauges, tiermem/counter_list.hpp says which, are levels);
// take two and subtract for a rate.
struct RuntimeCounters {
  // Every listed counter, by its name (tiermem/counter_list.hpp has each one's meaning and unit).
#define TIERMEM_RUNTIME_COUNTER_(sub, name, key, kind, unit, metric, help) uint64_t name = 0;
  TIERMEM_COUNTERS(TIERMEM_RUNTIME_COUNTER_)
#undef TIERMEM_RUNTIME_COUNTER_
  // Summed over remote faults: the fault handler's time from the userfaultfd report to the page
  // installed, and the part of it from the read posted to its reply in (the servers' and the
  // transport's share); per fault, divide by remote_faults. What a faulting thread waits beyond
  // the first is the wake-ups into and out of the handler (docs/protocol.md, "Where a fault's time goes").
  uint64_t remote_fault_ns = 0;
  uint64_t remote_fault_read_ns = 0;
  std::vector<RemoteServerCounters> servers;
  // Automatic tiering (the policy thread).
  std::string sampling_mode = "off";  // in effect: protect, uffd, faults or off
  std::string track_mode = "off";     // the write scan (TIERMEM_TRACK): pagemap_scan, soft_dirty or off
  std::string pebs;                   // why hardware sampling is (not) used
  std::string last_move_error;        // the latest refusal of a planned move
  // Wall time of each policy round (bounds from 10 us to 10 s, ten per decade).
  DurationHistogram policy_round_time;
};

class Runtime {
 public:
  // Discovers the topology, reserves the managed address space and starts the runtime's threads.
  static StatusOr<std::unique_ptr<Runtime>> Start(const Options& options = {});
  ~Runtime();  // stops if still running; live allocations are unmapped
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Stops threads and releases the address space. Idempotent.
  Status Stop();

  // Allocates `bytes` (rounded up to whole pages) on `tier`. Fails with Unavailable when the tier
  // is absent (unless kAllocAllowFallback or TIERMEM_ALLOW_FALLBACK), ResourceExhausted when the
  // tier's limit or the address space is full, InvalidArgument for 0 bytes.
  StatusOr<void*> Allocate(size_t bytes, Tier tier, uint32_t flags = kAllocDefault);
  // Frees a pointer returned by Allocate. InvalidArgument for anything else (nothing is freed).
  Status Free(void* ptr);
  // Size of the allocation that starts at ptr (a whole number of pages).
  StatusOr<size_t> AllocationSize(const void* ptr) const;

  // Moves the pages of [ptr, ptr+len) to `tier` (the range may cover several allocations but
  // must lie inside tiermem's allocations). Pages not yet touched are bound to the tier.
  StatusOr<MigrateResult> Migrate(void* ptr, size_t len, Tier tier);
  // Same, to one NUMA node; NotFound when the node does not exist or has no memory.
  StatusOr<MigrateResult> MigrateToNode(void* ptr, size_t len, int node);
  // Tier and node of every page of [ptr, ptr+len).
  StatusOr<std::vector<PageLocation>> Locate(const void* ptr, size_t len) const;

  // Keeps the automatic policy from moving the pages of an allocation (as kAllocPin does at
  // allocation time), or lets it move them again. `ptr` must be the start of a live allocation
  // (InvalidArgument otherwise). Explicit Migrate calls still move pinned pages.
  Status Pin(void* ptr);
  Status Unpin(void* ptr);

  // Lists one more memory server for the remote tier while the program runs ("tcp://host:port"
  // or "rdma://host:port"; TIERMEM_REMOTE_FILE does the same from a file): the runtime connects
  // to it within a second (and again, backing off, while it does not answer); from then on it
  // takes new pages and the copies that restore lost replicas (docs/protocol.md). Ok once it is
  // listed; InvalidArgument for a malformed address or one listed already; Unavailable when the
  // remote tier is not running (no server list, or no server reached at start) and in a child
  // after fork(); ResourceExhausted past 64 servers.
  Status AddRemoteServer(std::string_view address);

  bool HasTier(Tier tier) const;
  std::vector<TierStats> Stats() const;
  RuntimeCounters Counters() const;
  // Named properties, as text (leveldb's GetProperty): "tiermem.stats" (per-tier usage and the
  // counters, the report TIERMEM_STATS prints), "tiermem.counters.json" (Counters() as one JSON
  // object), "tiermem.sampling-mode". False, with `value` untouched, for any other name.
  bool GetProperty(std::string_view name, std::string* value) const;
  const Topology& topology() const;

  // A memory resource that allocates on `tier` (with the fallback rule of Options). Owned by the
  // runtime; valid until Stop. Allocation failure throws std::bad_alloc, as pmr requires.
  std::pmr::memory_resource* Resource(Tier tier);

  class Impl;

 private:
  friend struct RuntimeAccess;  // the project's own layers (allocator, tests): runtime_impl.h
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tiermem
