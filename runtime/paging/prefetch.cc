#include "runtime/paging/prefetch.h"

#include <algorithm>
#include <cstring>

namespace tiermem {

uint32_t Prefetcher::WindowFromOption(const char* value) {
  int64_t n = -1;
  if (!ParseAutoCount(value, kMaxWindow, true, &n) || n < 0) return kAutoWindow;
  return static_cast<uint32_t>(n);
}

Prefetcher::Stream& Prefetcher::Find(uint32_t tid, uintptr_t region) {
  Stream* oldest = &streams_[0];
  for (Stream& s : streams_) {
    if (s.used != 0 && s.tid == tid && s.region == region) return s;
    if (s.used < oldest->used) oldest = &s;
  }
  *oldest = Stream{};
  oldest->tid = tid;
  oldest->region = region;
  return *oldest;
}

int64_t Prefetcher::Trend(const Stream& s) {
  const uint32_t n = std::min<uint32_t>(s.ndeltas, kHistory);
  if (n < 2) return 0;
  int64_t candidate = 0;
  uint32_t votes = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (votes == 0) candidate = s.deltas[i];
    votes += s.deltas[i] == candidate ? 1 : -1u;
  }
  uint32_t count = 0;
  for (uint32_t i = 0; i < n; ++i) count += s.deltas[i] == candidate;
  return count * 2 > n ? candidate : 0;
}

Prefetcher::Ahead Prefetcher::OnFault(uint32_t tid, uintptr_t region, uint64_t index) {
  if (max_window_ == 0) return {};
  Stream& s = Find(tid, region);
  const bool fresh = s.used == 0;
  s.used = ++clock_;
  s.ahead_of_reader = false;
  if (fresh) {
    s.last = index;
    return {};
  }
  const int64_t delta = static_cast<int64_t>(index - s.last);
  if (delta == 0) return {};  // the same page again (another access of one fault): no step
  s.deltas[s.next] = delta;
  s.next = (s.next + 1) % kHistory;
  s.ndeltas = std::min<uint32_t>(s.ndeltas + 1, kHistory);
  const int64_t trend = Trend(s);
  if (trend == 0 || trend > kMaxStride || trend < -kMaxStride) {
    s.depth = kStartDepth;
    s.window = 0;
    s.last = index;
    return {};
  }
  if (s.window > 0) {
    if (delta == trend) {
      s.depth = std::min(s.depth * 2, WindowFor(max_window_, trend));  // the whole window was used
    } else {
      s.depth = std::max<uint32_t>(s.depth / 2, 1);  // off the step: the window was partly wasted
    }
  }
  const uint32_t count = std::min(s.depth, WindowFor(max_window_, trend));
  s.window = count;
  s.last = index + static_cast<uint64_t>(trend * static_cast<int64_t>(count));
  return {trend, count, index};
}

Prefetcher::Stream* Prefetcher::Lookup(uint32_t tid, uintptr_t region) {
  for (Stream& c : streams_) {
    if (c.used != 0 && c.tid == tid && c.region == region) return &c;
  }
  return nullptr;
}

Prefetcher::Ahead Prefetcher::Next(Stream& s, int64_t trend) {
  s.used = ++clock_;
  const uint32_t count = std::min(s.depth, WindowFor(max_window_, trend));
  const uint64_t from = s.last;
  s.window = count;
  s.last = from + static_cast<uint64_t>(trend * static_cast<int64_t>(count));
  return {trend, count, from};
}

Prefetcher::Ahead Prefetcher::OnWindowIn(uint32_t tid, uintptr_t region, uint64_t last) {
  if (max_window_ == 0) return {};
  Stream* s = Lookup(tid, region);
  if (s == nullptr || s->window == 0 || s->last != last || s->ahead_of_reader) return {};
  const int64_t trend = Trend(*s);
  if (trend == 0 || s->depth < WindowFor(max_window_, trend)) return {};
  s->ahead_of_reader = true;
  return Next(*s, trend);
}

Prefetcher::Ahead Prefetcher::OnHit(uint32_t tid, uintptr_t region, uint64_t index) {
  if (max_window_ == 0) return {};
  Stream* s = Lookup(tid, region);
  if (s == nullptr || s->window == 0) return {};
  const int64_t trend = Trend(*s);
  if (trend == 0) return {};
  // Steps back from the window's last page: 0 .. window-1 inside it.
  const int64_t back = static_cast<int64_t>(s->last - index);
  if (back % trend != 0 || back / trend < 0 || back / trend >= static_cast<int64_t>(s->window)) return {};
  s->ahead_of_reader = false;
  return Next(*s, trend);
}

}  // namespace tiermem
