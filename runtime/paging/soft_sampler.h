// Access sampling by soft eviction (TIERMEM_SAMPLE_MODE=uffd), transparent to system calls.
//
// A sampled page is claimed (kLocal -> kInFlight, with kPageSampled), write-protected through
// the pager's userfaultfd, copied to a local buffer and dropped (MADV_DONTNEED). Its next touch,
// by the program or by the kernel on the program's behalf (read(2) into it, send(2) from it), is
// a missing fault the pager's handler thread serves from the copy (UFFDIO_COPY): the access is
// recorded as a read or a write, and the kernel retries the access, so a system call succeeds
// with the right bytes where a PROT_NONE page (tracker.h) fails with EFAULT. A page untouched at
// the end of its round is installed from its copy again (or kept: carried into the next round).
// Its bytes are never anywhere but the page or the copy, and the copy is freed only once the
// page is installed.
//
// Why it needs the pager: a range can be registered with one userfaultfd only, and the pager's
// already covers every evicted run; the soft sampler registers the 2 MiB-aligned chunks around
// the pages it samples with the same one (chunks, so the mapping is not split into a VMA per
// page). Needs userfaultfd write-protect (kernel 5.7+ for anonymous memory; the copy must be the
// page's bytes at the moment it is dropped) and kernel-mode faults (not UFFD_USER_MODE_ONLY).
//
// Locks: Arm runs with the pager's io_mu_ (no eviction, FetchBack, OnDiscard or OnFree of these
// pages meanwhile) and then mu_; every other method takes mu_ only; the fault handler takes mu_
// only in OnMissing, for a page flagged kPageSampled. Nothing here allocates after construction
// except Arm and Collect (the policy thread's), so OnMissing is safe on the fault thread.
//
// Cost (docs/tiering.md, "Access tracking"): per sampled page one copy of 4 KiB and a share of
// the write-protect and madvise calls (one per run of adjacent pages) at arm time, and one
// userfaultfd round trip through the handler thread when it is touched.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "base/os.h"
#include "runtime/pages/region.h"
#include "runtime/pages/sampler.h"

namespace tiermem {

class Pager;

class UffdSampler final : public AccessSampler {
 public:
  static constexpr size_t kMaxArmed = 16384;  // 64 MiB of copies at most (replacing the pages)
  static constexpr size_t kArmChunk = 256;    // pages copied before they are dropped (Arm)

  // `pager` outlives the sampler and calls OnMissing/Drop/Freeze on it.
  explicit UffdSampler(Pager* pager);
  ~UffdSampler() override;
  UffdSampler(const UffdSampler&) = delete;
  UffdSampler& operator=(const UffdSampler&) = delete;
  // False when the copies' buffer could not be mapped (the pager then offers no sampler).
  bool ok() const { return copies_ != nullptr; }

  const char* name() const override { return "uffd"; }
  size_t max_armed() const override { return kMaxArmed; }
  bool usable() const override { return !frozen_.load(std::memory_order_acquire); }
  void Collect(uint64_t now_ns, std::vector<AccessSample>* out, std::vector<uint64_t>* untouched = nullptr,
               const std::function<bool(uint64_t)>& keep = {}) override;
  size_t Arm(const std::vector<char*>& pages, const ArmFilter& armable = {}) override;
  size_t carried() const override;
  void Release(const void* addr, size_t len) override;
  void DisarmAll() override;
  Counters counters() const override;

  // The pager's side. OnMissing: the fault handler met a missing fault on a page flagged
  // kPageSampled: when it is armed here it is installed from its copy (write-protected again
  // when it was clean and the access is a read), its access recorded, its thread woken, and true
  // is returned; false when it is not armed here (the handler goes on as for any page).
  bool OnMissing(Region& region, uint64_t index, bool write);
  // Pages of [addr, addr+len) that are armed are given up without being installed (their run is
  // being freed or discarded: the next touch must read zeros); io_mu_ held. The range may no
  // longer be registered afterwards (OnFree unregisters it): its chunks are forgotten.
  void Drop(const void* addr, size_t len, bool unregistered);
  // fork(): every armed page is installed, and nothing is armed until Thaw (the child never
  // thaws: its userfaultfd registrations are not inherited). io_mu_ held.
  void Freeze();
  void Thaw();

 private:
  enum : uint8_t { kArmed = 0, kRead = 1, kWritten = 2, kGone = 3 };
  struct Entry {
    uintptr_t page;
    Region* region;
    uint64_t index;
    uint32_t copy;  // index of its copy in copies_
    uint8_t state;  // kArmed until touched (kRead/kWritten), installed or dropped (kGone)
    bool clean;     // kPageRemoteClean when armed: installed write-protected again
  };
  // Arm's steps, on one ArmBatch. Reserve (mu_): the pages to arm (new ones, as many as there is
  // room and copies for) and their copies; false while a round is open or frozen. Claim: kLocal
  // -> kInFlight in registered chunks. Then per chunk of claimed[lo, hi): ProtectAndProbe
  // write-protects them and reads which have contents (ok), CopyClaimed copies those and gives
  // the rest back, Publish (mu_) lists them, drops the pages and wakes waiters; `last`: the
  // copies left over are freed. Returns the pages armed.
  struct Claimed {
    char* addr;
    Region* region;
    uint64_t index;
  };
  struct ArmBatch {
    std::vector<char*> fresh;
    std::vector<uint32_t> copies;
    size_t next_copy = 0;
    std::vector<Claimed> claimed;
    std::vector<uint8_t> ok;   // per page of the chunk: write-protected and populated
    std::vector<uint64_t> pm;  // the chunk's pagemap entries
    std::vector<Entry> added;  // the chunk's pages copied
    std::vector<os::Span> spans;
  };
  bool Reserve(const std::vector<char*>& pages, ArmBatch* b);
  void Claim(ArmBatch* b);
  void ProtectAndProbe(ArmBatch* b, size_t lo, size_t hi);
  void CopyClaimed(ArmBatch* b, size_t lo, size_t hi);
  size_t Publish(ArmBatch* b, bool last);
  // Under mu_. The entry of `page` in entries_ (sorted by page), or null.
  Entry* Find(uintptr_t page);
  // Puts run[0..n) back from their copies (adjacent pages with adjacent copies; one
  // UFFDIO_COPY), hands the pages back (kLocal, unflagged), frees the copies and wakes waiters;
  // entries still kArmed become kGone. mu_ held. Install: one entry.
  void InstallRun(Entry* const* run, size_t n, bool write_protect);
  void Install(Entry& e, bool write_protect);
  // Gives the page back without installing it (Drop); mu_ held.
  void Forget(Entry& e);
  // Registers the 2 MiB chunk of `region` around `page` with the pager's userfaultfd (once per
  // chunk until Drop says it was unregistered). False when it cannot be registered.
  bool RegisterChunk(Region& region, uintptr_t page);
  void FreeCopy(uint32_t copy) { free_copies_[nfree_++] = copy; }
  // Sorts the free copies for Arm (adjacent copies for adjacent pages); mu_ held. Their memory
  // was returned when they were freed (InstallRun, Forget).
  void SortFreeCopies();
  char* CopyOf(uint32_t copy) const { return copies_ + static_cast<size_t>(copy) * 4096; }

  Pager* pager_;
  // kMaxArmed pages. Not the runtime's own DRAM (own_memory.h): a copy stands in for its page,
  // which is dropped while armed, and is discarded once the page is back.
  char* copies_ = nullptr;
  mutable std::mutex mu_;
  std::vector<Entry> entries_;        // sorted by page; reserved kMaxArmed (no allocation later)
  std::vector<uint32_t> free_copies_; // a stack of kMaxArmed
  size_t nfree_ = 0;
  size_t live_ = 0;                   // entries still armed
  bool in_round_ = false;             // Arm started a round that Collect has not ended
  std::unordered_set<uintptr_t> registered_;  // chunk bases registered by RegisterChunk; io_mu_
  std::atomic<bool> frozen_{false};
  Counters counters_;
};

}  // namespace tiermem
