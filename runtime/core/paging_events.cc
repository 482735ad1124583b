// Runtime::Impl::PagerEvents: the core's side of runtime/paging/paging_events.h. The pager's
// reports become the tier counts (OnResident, OnEvicted), the stats block's server list and the
// remote-full warning, and reach the policy thread once it runs (live_migrator_: relief's ring,
// its wake-ups and the fault handler's budget check). Each call keeps the interface's contract:
// no allocation, no blocking (AfterFaults' bounded hold aside), no lock a program thread holds.
#include "runtime/core/runtime_impl.h"
#include "runtime/tiering/migrator.h"

namespace tiermem {

Region* Runtime::Impl::PagerEvents::RegionOf(const void* addr) { return rt_->RegionOf(addr); }

void Runtime::Impl::PagerEvents::OnResident(Region& region, uint64_t first, uint64_t n, bool moved) {
  rt_->OnResident(region, first, n, moved);
}

void Runtime::Impl::PagerEvents::OnEvicted(Region& region, uint64_t index) { rt_->OnEvicted(region, index); }

void Runtime::Impl::PagerEvents::OnKept(Region& region, uint64_t index) {
  if (Migrator* m = rt_->live_migrator_.load(std::memory_order_acquire)) m->OnResident(&region, index, 1);
}

void Runtime::Impl::PagerEvents::OnWindowDone() {
  if (Migrator* m = rt_->live_migrator_.load(std::memory_order_acquire)) m->OnLeftDram();
}

void Runtime::Impl::PagerEvents::AfterFaults() {
  if (Migrator* m = rt_->live_migrator_.load(std::memory_order_acquire)) m->AfterFaults();
}

void Runtime::Impl::PagerEvents::OnFull() { rt_->NoteRemoteFull(); }

void Runtime::Impl::PagerEvents::OnServerListed(size_t index, const std::string& name) {
  rt_->PublishServer(index, name);
}

}  // namespace tiermem
