#include "runtime/runtime_thread.h"

#include <atomic>

namespace tiermem {
namespace {
std::atomic<RuntimeThreadHook> g_hook{nullptr};
}  // namespace

void SetRuntimeThreadHook(RuntimeThreadHook hook) { g_hook.store(hook, std::memory_order_release); }

void OnRuntimeThreadStart() {
  RuntimeThreadHook h = g_hook.load(std::memory_order_acquire);
  if (h != nullptr) h();
}

}  // namespace tiermem
