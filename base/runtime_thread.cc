#include "base/runtime_thread.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstring>

#include "base/own_memory.h"

namespace tiermem {
namespace {
std::atomic<RuntimeThreadHook> g_hook{nullptr};
std::atomic<RuntimeThreadHook> g_enter{nullptr};
std::atomic<RuntimeThreadHook> g_leave{nullptr};
}  // namespace

void SetRuntimeCallHooks(RuntimeThreadHook enter, RuntimeThreadHook leave) {
  g_enter.store(enter, std::memory_order_release);
  g_leave.store(leave, std::memory_order_release);
}

RuntimeCallScope::RuntimeCallScope() {
  RuntimeThreadHook h = g_enter.load(std::memory_order_acquire);
  if (h != nullptr) h();
}

RuntimeCallScope::~RuntimeCallScope() {
  RuntimeThreadHook h = g_leave.load(std::memory_order_acquire);
  if (h != nullptr) h();
}

void SetRuntimeThreadHook(RuntimeThreadHook hook) { g_hook.store(hook, std::memory_order_release); }

bool RuntimeThreadHookSet() { return g_hook.load(std::memory_order_acquire) != nullptr; }

void OnRuntimeThreadStart() {
  RuntimeThreadHook h = g_hook.load(std::memory_order_acquire);
  if (h == nullptr) return;
  h();
  WatchThreadStack();  // after the hook, which makes its allocation glibc's
}

NewRuntimeThreadSignals::NewRuntimeThreadSignals() {
  static_assert(sizeof(sigset_t) <= sizeof(saved_), "sigset_t does not fit");
  sigset_t all, old;
  sigfillset(&all);
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP}) sigdelset(&all, s);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  memcpy(saved_, &old, sizeof(old));
}

NewRuntimeThreadSignals::~NewRuntimeThreadSignals() {
  sigset_t old;
  memcpy(&old, saved_, sizeof(old));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace tiermem
