#include "runtime/core/runtime_fork.h"


#include <atomic>
#include <mutex>

#include "base/log.h"
#include "runtime/tiering/migrator.h"
#include "base/os.h"
#include "runtime/core/runtime_impl.h"
#include "base/runtime_thread.h"

namespace tiermem {

namespace {
// Live runtimes, for the fork handlers. Plain array + mutex: no allocation.
std::mutex g_live_mu;
Runtime::Impl* g_live[16];

void ForkPrepare() {
  g_live_mu.lock();
  for (Runtime::Impl* rt : g_live) {
    if (rt != nullptr) rt->PrepareFork();
  }
}
void ForkParent() {
  for (Runtime::Impl* rt : g_live) {
    if (rt != nullptr) rt->AfterFork(false);
  }
  g_live_mu.unlock();
}
void ForkChild() {
  for (Runtime::Impl* rt : g_live) {
    if (rt != nullptr) rt->AfterFork(true);
  }
  g_live_mu.unlock();
}

}  // namespace

namespace internal {

void RegisterLiveRuntime(Runtime::Impl* rt) {
  static std::atomic<bool> atfork_done{false};
  // Registered before any heap's handlers (heaps are created on a started runtime), so this
  // prepare runs after the heaps have taken their locks: lock order heap -> runtime.
  if (!atfork_done.exchange(true)) os::AtFork(&ForkPrepare, &ForkParent, &ForkChild);
  std::lock_guard<std::mutex> lock(g_live_mu);
  for (Runtime::Impl*& slot : g_live) {
    if (slot == nullptr) {
      slot = rt;
      return;
    }
  }
  TM_LOG_WARN("more than 16 live runtimes: fork() in this process will not bring remote pages "
              "back for the newest");
}

void UnregisterLiveRuntime(Runtime::Impl* rt) {
  std::lock_guard<std::mutex> lock(g_live_mu);
  for (Runtime::Impl*& slot : g_live) {
    if (slot == rt) slot = nullptr;
  }
}

}  // namespace internal

void Runtime::Impl::PrepareFork() {
  RuntimeCallScope scope;  // our allocations here must not go to the heap (its locks are held)
  if (pager_) {
    Region* regions[kMaxRegions];
    const int n = nregions_.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i) regions[i] = regions_[i].get();
    pager_->PrepareFork(regions, n);
  }
  grow_mu_.lock();
  int n = nregions_.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) regions_[i]->LockForFork();
}

void Runtime::Impl::AfterFork(bool child) {
  RuntimeCallScope scope;  // the heaps' locks are still held (the pager may start a thread)
  int n = nregions_.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) regions_[i]->UnlockAfterFork();
  grow_mu_.unlock();
  // The child's counters go to a private copy before its pager starts the thread that serves
  // its remote pages (and counts what it reads).
  if (child) stats_.AfterForkInChild();
  if (pager_) pager_->AfterFork(child);
  if (child && migrator_) migrator_->AbandonAfterFork();
}


}  // namespace tiermem
