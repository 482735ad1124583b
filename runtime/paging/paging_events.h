// PagingEvents: everything the pager tells the layer above it (runtime/core, which passes it on
// to the policy thread), as one table of calls, the way a provider of rdma-core fills an ops
// table. The pager depends only on this interface; Runtime::Impl implements it
// (runtime/core/paging_events.cc). Every call but RegionOf has an empty default, so a test that
// only needs the lookup overrides that alone.
//
// Common contract: the calls come from the pager's own threads (named on each) or from a thread
// inside a pager call; they must not call back into the pager unless said, must not allocate,
// block, or take a lock the program's threads may hold (the fault handler makes most of them,
// and inside fork() glibc holds its malloc locks until that thread has read the fork event).
// The interface outlives the pager (PagerConfig::events).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/pages/region.h"

namespace tiermem {

class PagingEvents {
 public:
  // The managed region holding `addr`, or null. Any pager thread (the fault handler for every
  // fault, the soft sampler, a forked child's server). Required.
  virtual Region* RegionOf(const void* addr) = 0;

  // Tier accounting, made while the pages are still claimed (kInFlight), so nobody can move them
  // on before the core has counted them.
  // Pages [first, first+n) of `region` are local again (kRemote -> kLocal): fetched or
  // zero-filled by the fault handler or FetchBack (`moved`), or discarded (`moved` false:
  // nothing came back; Pager::OnDiscard). Fault handler thread, or the thread in FetchBack,
  // OnDiscard or a fork's hand-over.
  virtual void OnResident(Region& region, uint64_t first, uint64_t n, bool moved) {
    (void)region, (void)first, (void)n, (void)moved;
  }
  // Page `index` of `region` is now on the remote tier (kLocal -> kRemote). Writer thread.
  virtual void OnEvicted(Region& region, uint64_t index) { (void)region, (void)index; }
  // Page `index` of `region` was written while its eviction was in flight, which called the
  // eviction off: it stays where it was (kInFlight -> kLocal, its tier unchanged), and the write
  // is an access. Writer thread.
  virtual void OnKept(Region& region, uint64_t index) { (void)region, (void)index; }
  // An eviction window is finished (its pages dropped, kept or given back; the pages that left
  // were reported by OnEvicted first): a thread waiting for DRAM to have room may look again.
  // Writer thread.
  virtual void OnWindowDone() {}
  // The fault handler served faults and woke their threads (it calls this whenever no read of
  // its own is out, and after every kBatch faults taken while some are): the core checks DRAM's
  // budget here and may hold the handler back (bounded, the one call allowed to wait) while the
  // policy thread makes room. Fault handler thread.
  virtual void AfterFaults() {}
  // No server can take a page (every connected one refused its last allocation and has no free
  // slot left): an eviction is about to fail with ResourceExhausted. The evicting thread (the
  // policy thread, or a thread in Migrate) with the pager's io lock held; it may call the
  // pager's Full() and DescribeServers() only.
  virtual void OnFull() {}
  // Server `index` of the list joined it, with its address: at start (Start's thread, before
  // the pager's threads run), later (AddServer, the servers file) before it is connected, by
  // the repair thread or AddServer's caller with the pager's io lock held. So the calls never
  // overlap and come in list order.
  virtual void OnServerListed(size_t index, const std::string& name) { (void)index, (void)name; }

 protected:
  ~PagingEvents() = default;  // not owned through this interface
};

}  // namespace tiermem
