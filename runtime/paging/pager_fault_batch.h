// The fault handler thread's state for one batch of faults (Pager::FaultBatch): its buffers,
// the faults whose reads are out, and what the batch has done so far. Included by the fault
// thread's .cc files only (pager_fault.cc, pager_fault_intake.cc). Everything is allocated once,
// before the thread says it is ready: inside fork() glibc holds its malloc locks until this
// thread has read the fork event, so the loop allocates nothing (uffd_backlog.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/os.h"
#include "base/own_memory.h"
#include "runtime/paging/pager.h"
#include "runtime/paging/pager_internal.h"
#include "runtime/paging/uffd_backlog.h"

namespace tiermem {

namespace pager_internal {
// The handler thread cannot go on (its descriptors or buffers failed): no fault could be served
// again, so the process ends as when a page is lost (pager_fault.cc).
[[noreturn]] void HandlerFails(const Status& why);
}  // namespace pager_internal

struct Pager::FaultBatch {
  // A page whose read is out: a fault's, or one fetched ahead for a thread's stream.
  struct Pending {
    Region* region;
    uint64_t index;
    bool write;
    uint64_t reported_ns;  // when the fault was read from userfaultfd
    bool ahead;            // fetched ahead by the prefetcher: no thread waits for it
    bool arrived = false;  // ahead: read, in staging (or installed) for InstallAhead
    bool early = false;    // ahead, on a strided stream: installed as it arrives
    bool installed = false;
    bool lost = false;     // ahead: no replica could serve it (left remote)
    bool woken = false;    // ahead: handed to InstallAhead (installed and woken, or left remote)
    size_t window = 0;     // ahead: its part of a window (the part's first index in `pending`)
    uint32_t tid = 0;      // ahead: the thread whose stream it is
    ReadReq rr{};          // its read, with the replicas tried
  };

  explicit FaultBatch(UffdBacklog* log) : backlog(log) {}

  // Staging page j (and its share of `spare`) for a read: counted as the runtime's own DRAM as
  // far as reads have used them.
  void Stage(ReadReq& rr, size_t j) {
    staging_map.Touched((j + 1) * pager_internal::kPage);
    if (spare != nullptr) spare_map.Touched((j + 1) * spare_bytes);
    rr.buf = staging + j * pager_internal::kPage;
    rr.spare = spare + j * spare_bytes;
  }
  // Room for another read of the userfaultfd's queue. A batch ends after kBatch pages
  // zero-filled or kBatch faults read: faults served at once let their threads fault again
  // right away, and a batch that took those too would not reach after_faults (DRAM's budget
  // check) while a thread streams through fresh memory.
  bool Room() const {
    constexpr size_t kBatch = pager_internal::kBatch;
    return pending.size() + 64 <= kBatch && read_faults < kBatch && zero_filled < kBatch;
  }
  // A new batch: nothing out, nothing counted.
  void Reset() {
    pending.clear();
    std::fill(outstanding.begin(), outstanding.end(), 0);
    read_faults = zero_filled = sampled = 0;
  }

  UffdBacklog* backlog;
  OwnMapping staging_map, spare_map;
  char* staging = nullptr;
  void* zeros = nullptr;  // the source of zero fills: never written (in no process's RSS)
  char* spare = nullptr;  // coded pages: room for the parity pieces each read may bring
  size_t spare_bytes = 0;
  std::vector<Pending> pending;
  std::vector<bool> window_open;  // per batch: the windows with a read still out
  std::vector<size_t> outstanding = std::vector<size_t>(kMaxServers);
  size_t read_faults = 0, zero_filled = 0, sampled = 0;
  os::UffdFault faults[64];
};

}  // namespace tiermem
