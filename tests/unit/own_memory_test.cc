// The own-DRAM ledger (base/own_memory.h): buffers count what they have written, in whole pages,
// and give it back when unmapped; watched ranges (thread stacks) count what is resident of them.
#include "base/own_memory.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "base/runtime_thread.h"
#include "base/zeroed_array.h"

namespace tiermem {
namespace {

constexpr size_t kPage = 4096;

TEST(OwnMemory, AMappingCountsItsHighWaterMarkInPages) {
  const uint64_t before = OwnBufferBytes();
  OwnMapping m;
  int err = 0;
  ASSERT_NE(m.Map(64 * kPage, &err), nullptr) << err;
  EXPECT_EQ(OwnBufferBytes(), before) << "reserved, nothing written";
  m.Touched(1);
  EXPECT_EQ(OwnBufferBytes(), before + kPage);
  m.Touched(3 * kPage + 5);
  EXPECT_EQ(OwnBufferBytes(), before + 4 * kPage);
  m.Touched(2 * kPage);  // below the mark: nothing changes
  EXPECT_EQ(m.counted(), 4 * kPage);
  m.Touched(1000 * kPage);  // past the end: at most the mapping
  EXPECT_EQ(OwnBufferBytes(), before + 64 * kPage);
  OwnMapping moved = std::move(m);
  EXPECT_EQ(OwnBufferBytes(), before + 64 * kPage) << "a move keeps the count";
  moved.Release();
  EXPECT_EQ(OwnBufferBytes(), before);
}

TEST(OwnMemory, AZeroedArrayCountsTheEntriesWritten) {
  const uint64_t before = OwnBufferBytes();
  {
    ZeroedArray<uint64_t> ring;
    ASSERT_TRUE(ring.Reset(size_t{1} << 18).ok());  // 2 MiB, the relief ring's size
    for (size_t i = 0; i < 1000; ++i) ring[i] = i;   // 8000 bytes: two pages
    EXPECT_EQ(ring.counted_bytes(), 2 * kPage);
    EXPECT_EQ(OwnBufferBytes(), before + 2 * kPage);
    const ZeroedArray<uint64_t>& view = ring;
    EXPECT_EQ(view[5000], 0u);  // reading is not writing
    EXPECT_EQ(OwnBufferBytes(), before + 2 * kPage);
  }
  EXPECT_EQ(OwnBufferBytes(), before) << "unmapped: given back";
}

TEST(OwnMemory, AWatchedRangeCountsItsResidentPages) {
  OwnMapping m;  // its own count stays 0: nothing is Touched
  int err = 0;
  char* p = m.Map(64 * kPage, &err);
  ASSERT_NE(p, nullptr) << err;
  for (size_t i : {0, 7, 63}) p[i * kPage] = 1;
  const uint64_t before = OwnWatchedBytes();
  const int handle = WatchRange(p, 64 * kPage);
  ASSERT_GE(handle, 0);
  EXPECT_EQ(OwnWatchedBytes(), before + 3 * kPage) << "measured at the first call after the watch";
  UnwatchRange(handle);
  EXPECT_EQ(OwnWatchedBytes(), before);
}

void NoHook() {}

// Uses `bytes` of the calling thread's stack.
__attribute__((noinline)) void UseStack(size_t bytes) {
  auto* p = static_cast<volatile char*>(__builtin_alloca(bytes));
  for (size_t i = 0; i < bytes; i += kPage) p[i] = 1;
}

TEST(OwnMemory, ARuntimeThreadsStackCountsWhileItRuns) {
  SetRuntimeThreadHook(&NoHook);  // as the preload library does: the stack is watched
  std::atomic<int> step{0};
  std::thread t([&] {
    OnRuntimeThreadStart();
    UseStack(1 << 20);
    step.store(1);
    while (step.load() != 2) std::this_thread::yield();
  });
  while (step.load() != 1) std::this_thread::yield();
  const uint64_t running = OwnWatchedBytes();  // measured now: a stack was watched since the last
  step.store(2);
  t.join();
  SetRuntimeThreadHook(nullptr);
  const uint64_t after = OwnWatchedBytes();  // measured again: the thread exited
  EXPECT_GE(running, uint64_t{1} << 20) << "the MiB the thread used";
  EXPECT_LE(after + (uint64_t{1} << 20), running) << "its exit took it back";
}

}  // namespace
}  // namespace tiermem
