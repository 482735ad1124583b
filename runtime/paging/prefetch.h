// The pager's prefetcher: finds sequential and strided streams in the remote faults of each
// thread and says which pages to fetch ahead (Leap, ATC'20: the majority trend of a window of
// recent faults).
//
// Pure: no OS calls, no clock; the fault handler thread feeds it every remote fault it serves
// (the faulting thread's id from userfaultfd, the page's region and index) and fetches what it
// returns. Model, per stream (a thread in one region):
// - The deltas between its last kHistory faults; a delta that is more than half of them is the
//   trend (Boyer-Moore majority vote). Pages fetched ahead count as the stream's accesses: a
//   thread that reads through a window faults next just past it, one trend step on.
// - A fault with a trend asks for the next `depth` pages along it. The depth starts at
//   kStartDepth, doubles (up to the stream's window: the one given, TIERMEM_PREFETCH, for a
//   sequential trend, kStrideWindowFactor times it for a strided one) each time the thread faults
//   exactly where the last window ended (it used the whole window), halves when a fault breaks
//   the trend's step, and a fault with no trend asks for nothing and resets it.
// - A hit: a thread that faults on a page of its stream's last window while that window is still
//   in flight is reading through it; the next window along the trend is asked for at once
//   (OnHit), so the stream keeps a window in flight ahead of the reader instead of waiting for a
//   fault past the window's end (Leap fetches ahead on hits to prefetched pages the same way).
// - A window in: when the last window of a stream at full depth (its reader used every window
//   so far) is installed, the next one is asked for at once (OnWindowIn), one window beyond the
//   reader's last fault or hit at most, so a reader that stops costs one window.
// - Streams are kept for kStreams threads, the least recently faulting replaced first.
//
// Thread safety: none; the fault handler thread owns it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "base/option_checks.h"

namespace tiermem {

class Prefetcher {
 public:
  static constexpr size_t kHistory = 8;
  static constexpr size_t kStreams = 32;
  static constexpr uint32_t kStartDepth = 4;
  static constexpr int64_t kMaxStride = 512;  // pages (2 MiB): larger jumps are not a stream

  // `max_window`: the most pages one fault asks for; 0 turns prefetching off.
  explicit Prefetcher(uint32_t max_window) : max_window_(max_window) {}

  // Pages to fetch: from + stride * k for k = 1..count (the caller skips those that are not
  // remote, or outside the region).
  struct Ahead {
    int64_t stride = 0;
    uint32_t count = 0;
    uint64_t from = 0;
  };
  // A remote fault on page `index` of the region `region` by thread `tid` (0: unknown, one
  // stream for every thread of the region).
  Ahead OnFault(uint32_t tid, uintptr_t region, uint64_t index);
  // A fault by `tid` on page `index` of `region` that is being fetched ahead (in flight): when
  // the page is in the stream's last window, the next window along its trend (once per window:
  // later hits in a window already followed ask for nothing); else nothing.
  Ahead OnHit(uint32_t tid, uintptr_t region, uint64_t index);
  // The window of `tid`'s stream in `region` whose last page is `last` is installed: the next
  // window when that is the stream's latest, it is at full depth, and nothing was asked for
  // this way since the stream's last fault or hit; else nothing.
  Ahead OnWindowIn(uint32_t tid, uintptr_t region, uint64_t last);

  uint32_t max_window() const { return max_window_; }

  static constexpr uint32_t kAutoWindow = 32;
  static constexpr uint32_t kMaxWindow = kOptMaxPrefetch;  // half a fault batch's staging
  // A strided window's pages cost the fault handler one UFFDIO_COPY each (a sequential part is
  // one copy for all its pages), so a strided window takes longer to install and its reader
  // more often runs past the windows asked for; twice the requests in flight keep it ahead
  // (the figures: docs/results/NOTES.md, 2026-12-05). A reader that stops costs that bigger
  // window.
  static constexpr uint32_t kStrideWindowFactor = 2;
  // The most pages one window of a stream with step `trend` asks for, given the window
  // `max_window` (TIERMEM_PREFETCH): `max_window` for steps of 1 and -1, else
  // kStrideWindowFactor times it, at most kMaxWindow (or `max_window` when that is larger).
  static constexpr uint32_t WindowFor(uint32_t max_window, int64_t trend) {
    if (trend == 1 || trend == -1) return max_window;
    const uint32_t cap = max_window > kMaxWindow ? max_window : kMaxWindow;
    return max_window * kStrideWindowFactor < cap ? max_window * kStrideWindowFactor : cap;
  }
  // TIERMEM_PREFETCH's value, as the option table accepts it (auto, off or N up to kMaxWindow),
  // as a window: auto kAutoWindow, off or 0 none, else N.
  static uint32_t WindowFromOption(const char* value);

 private:
  struct Stream {
    uint32_t tid = 0;
    uintptr_t region = 0;
    uint64_t used = 0;          // last use (a counter), 0: free
    uint64_t last = 0;          // the last page accessed: faulted, or the end of a window
    uint32_t window = 0;        // pages asked for by the last fault
    uint32_t depth = kStartDepth;
    std::array<int64_t, kHistory> deltas{};
    uint32_t ndeltas = 0;       // deltas recorded, up to kHistory (ring at ndeltas % kHistory)
    uint32_t next = 0;          // ring position of the next delta
    bool ahead_of_reader = false;  // a window was asked for by OnWindowIn since the last fault or hit
  };
  Stream& Find(uint32_t tid, uintptr_t region);
  Stream* Lookup(uint32_t tid, uintptr_t region);
  // The next window after the stream's last one (its depth), and the stream moved past it.
  Ahead Next(Stream& s, int64_t trend);
  // The majority delta of the stream's history, 0 when there is none.
  static int64_t Trend(const Stream& s);

  uint32_t max_window_;
  uint64_t clock_ = 0;
  std::array<Stream, kStreams> streams_{};
};

}  // namespace tiermem
