// The fault handler thread's state (Pager::FaultBatch): its buffers, the reads it has out, each
// in a staging slot of its own, and what it has taken since it last called AfterFaults. A slot
// is taken when a read is posted and given back as soon as its page is installed (or its window
// is), so the handler keeps taking faults while any one read is held. Included by the fault
// thread's .cc files only (pager_fault.cc, pager_fault_intake.cc). Everything is allocated once,
// before the thread says it is ready: inside fork() glibc holds its malloc locks until this
// thread has read the fork event, so the loop allocates nothing (uffd_backlog.h).
#pragma once

#include <bit>
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
  static constexpr size_t kSlots = pager_internal::kBatch;
  static_assert(kSlots == 256, "free_bits holds four words");
  static constexpr uint16_t kNone = 0xffff;
  // Pages fetched ahead are installed in parts of this many (FetchAhead).
  static constexpr uint32_t kAheadPart = 8;
  // A page whose read is out, in staging slot j (its index in `slots`, and its cookie): a
  // fault's, or one fetched ahead for a thread's stream.
  struct Pending {
    Region* region = nullptr;
    uint64_t index = 0;
    bool write = false;
    uint64_t reported_ns = 0;  // when the fault was read from userfaultfd
    bool ahead = false;        // fetched ahead by the prefetcher: no thread waits for it
    bool arrived = false;      // ahead: read, in staging (or installed) for InstallAhead
    bool early = false;        // ahead, on a strided stream: installed as it arrives
    bool installed = false;
    bool lost = false;         // ahead: no replica could serve it (left remote)
    bool settling = false;     // served, but a piece asked for late still writes into its slot
    uint16_t window = kNone;   // ahead: the slot of its part's first page
    uint16_t next = kNone;     // ahead: the slot of its part's next page
    uint16_t left = 0;         // a part's first page: its pages neither arrived nor lost yet
    uint32_t tid = 0;          // ahead: the thread whose stream it is
    ReadReq rr{};              // its read, with the replicas tried
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
  // A free slot, cleared: `prefer` where it is free (a window's pages side by side in staging
  // are installed with one copy), else the lowest. Only with nfree > 0.
  size_t Take(size_t prefer) {
    size_t j = prefer;
    if (j >= kSlots || !((free_bits[j / 64] >> (j % 64)) & 1u)) {
      size_t w = 0;
      while (free_bits[w] == 0) ++w;
      j = w * 64 + static_cast<size_t>(std::countr_zero(free_bits[w]));
    }
    free_bits[j / 64] &= ~(uint64_t{1} << (j % 64));
    --nfree;
    slots[j] = Pending{};
    return j;
  }
  // Slot j is done with. A piece of a coded page asked for beyond the k it needed may still
  // land in it: then it is given back when that has come (Reclaim).
  void Give(size_t j) {
    if (slots[j].rr.out != 0) {
      if (!slots[j].settling) ++settling;
      slots[j].settling = true;
      return;
    }
    slots[j].region = nullptr;
    free_bits[j / 64] |= uint64_t{1} << (j % 64);
    ++nfree;
  }
  void Reclaim() {
    for (size_t j = 0; j < kSlots && settling > 0; ++j) {
      if (!slots[j].settling || slots[j].rr.out != 0 || InFree(j)) continue;
      slots[j].settling = false;
      --settling;
      Give(j);
    }
  }
  bool InFree(size_t j) const { return (free_bits[j / 64] >> (j % 64)) & 1u; }
  // The request of cookie j: null for a free slot (a late completion of a read given up on).
  ReadReq* Req(size_t j) { return j < kSlots && !InFree(j) ? &slots[j].rr : nullptr; }
  bool ReadsOut() const { return nfree < kSlots; }
  // An ahead page of slot j arrived or was lost: its part is complete when none is left.
  void PartIn(size_t j) {
    Pending& head = slots[slots[j].window];
    if (--head.left == 0) ready[nready++] = slots[j].window;
  }
  // DRAM's budget is to be checked (AfterFaults) before any more is taken: kBatch faults read,
  // pages zero-filled or reads posted (faults' and pages fetched ahead) since the last check.
  // Faults served at once let their threads fault again right away, and a stream whose window
  // fetched ahead always has reads out brings in pages with few faults: either must still meet
  // the check.
  bool Due() const {
    constexpr size_t kBatch = pager_internal::kBatch;
    return read_faults >= kBatch || zero_filled >= kBatch || reads >= kBatch;
  }
  // Room for another read of the userfaultfd's queue (up to 64 faults, each a read).
  bool Room() const { return nfree >= 64 && !Due(); }

  UffdBacklog* backlog;
  OwnMapping staging_map, spare_map;
  char* staging = nullptr;
  void* zeros = nullptr;  // the source of zero fills: never written (in no process's RSS)
  char* spare = nullptr;  // coded pages: room for the parity pieces each read may bring
  size_t spare_bytes = 0;
  std::vector<Pending> slots = std::vector<Pending>(kSlots);
  uint64_t free_bits[kSlots / 64] = {~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}};
  size_t nfree = kSlots, settling = 0;
  uint16_t ready[kSlots];  // parts of windows complete, their first slots, in order
  size_t nready = 0;
  uint16_t order[kSlots];  // FinishWindows: the slots of the ready parts, part after part
  std::vector<size_t> outstanding = std::vector<size_t>(kMaxServers);
  // Since the last AfterFaults (read_faults, zero_filled, reads), or since the last wait for
  // faults (sampled, posted, zeroed: what the spin before the next wait depends on).
  size_t read_faults = 0, zero_filled = 0, reads = 0, sampled = 0, posted = 0;
  bool zeroed = false;
  os::UffdFault faults[64];
};

}  // namespace tiermem
