#include "bench/kv_oracle.h"

#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <numeric>

namespace tiermem::bench::kv {
namespace {

// Calls f(first, end) for each maximal run [first, end) of pages of chunk `c` whose placement in
// the plan is `dram` (page indices within the chunk).
template <class F>
void ForEachRun(const OraclePlan& plan, size_t c, uint64_t per_chunk, bool dram, F f) {
  const uint8_t want = dram ? 1 : 0;
  const uint8_t* in = plan.in_dram.data() + c * per_chunk;
  for (uint64_t i = 0; i < per_chunk;) {
    if (in[i] != want) {
      ++i;
      continue;
    }
    uint64_t j = i + 1;
    while (j < per_chunk && in[j] == want) ++j;
    f(i, j);
    i = j;
  }
}

}  // namespace

LookupPages::LookupPages(uint64_t keys, uint64_t slots) : extra_(keys + 1, 0) {
  const uint64_t pages = (slots + kSlotsPerPage - 1) / kSlotsPerPage;
  std::vector<uint64_t> used((slots + 63) / 64, 0);  // a bit per slot: filled
  // As Table::Find(key, true) inserts them: the first free slot from the home slot on.
  for (uint32_t key : FillOrder(keys, slots)) {
    const uint64_t home = HomeSlot(key, slots);
    uint64_t i = home;
    while ((used[i / 64] >> (i % 64)) & 1) i = (i + 1) % slots;
    used[i / 64] |= 1ull << (i % 64);
    const uint64_t extra = (i / kSlotsPerPage + pages - home / kSlotsPerPage) % pages;
    if (extra < kLong) {
      extra_[key] = static_cast<uint8_t>(extra);
    } else {
      extra_[key] = kLong;
      long_[key] = extra;
    }
  }
}

std::vector<double> PageTouchProbability(const Zipf& zipf, uint64_t keys, uint64_t slots) {
  const uint64_t pages = (slots + kSlotsPerPage - 1) / kSlotsPerPage;
  const LookupPages lookups(keys, slots);
  std::vector<double> touch(pages, 0.0);
  zipf.ForEachMass([&](uint64_t item, double p) {
    const uint64_t key = KeyOfItem(item, keys);
    const uint64_t home = HomeSlot(key, slots) / kSlotsPerPage;
    for (uint64_t e = 0, n = lookups.Extra(key); e <= n; ++e) touch[(home + e) % pages] += p;
  });
  return touch;
}

OraclePlan PlanOracle(const std::vector<double>& touch, uint64_t budget_pages) {
  OraclePlan plan;
  plan.in_dram.assign(touch.size(), 0);
  std::vector<uint32_t> order(touch.size());
  std::iota(order.begin(), order.end(), 0u);
  const size_t n = std::min<size_t>(budget_pages, touch.size());
  auto likelier = [&](uint32_t a, uint32_t b) { return touch[a] != touch[b] ? touch[a] > touch[b] : a < b; };
  if (n < order.size()) std::nth_element(order.begin(), order.begin() + static_cast<ptrdiff_t>(n), order.end(), likelier);
  for (size_t i = 0; i < n; ++i) plan.in_dram[order[i]] = 1;
  plan.dram_pages = n;
  for (size_t p = 0; p < touch.size(); ++p) {
    if (!plan.in_dram[p]) plan.expected_faults_per_op += touch[p];
  }
  return plan;
}

Status PlaceOracle(Runtime& rt, const std::vector<char*>& chunks, size_t chunk_bytes, const OraclePlan& plan) {
  const uint64_t per_chunk = chunk_bytes / kPageBytes;
  Status failed;
  for (size_t c = 0; c < chunks.size() && failed.ok(); ++c) {
    ForEachRun(plan, c, per_chunk, true, [&](uint64_t a, uint64_t b) {
      if (!failed.ok()) return;
      auto r = rt.Migrate(chunks[c] + a * kPageBytes, (b - a) * kPageBytes, Tier::kDram);
      if (!r.ok()) failed = r.status();
    });
  }
  return failed;
}

OracleEvictor::OracleEvictor(Runtime& rt, const std::vector<char*>& chunks, size_t chunk_bytes,
                             const OraclePlan& plan, uint64_t interval_ms)
    : rt_(rt), chunks_(chunks), chunk_bytes_(chunk_bytes), plan_(plan), interval_ms_(interval_ms) {
  thread_ = std::thread([this] { Run(); });
}

void OracleEvictor::Stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::string OracleEvictor::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void OracleEvictor::Run() {
  std::vector<unsigned char> resident(chunk_bytes_ / kPageBytes);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    Sweep(resident);
    timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
      cpu_ns_.store(static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec),
                    std::memory_order_relaxed);
    }
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(interval_ms_), [this] { return stop_; });
  }
}

void OracleEvictor::Sweep(std::vector<unsigned char>& resident) {
  const uint64_t per_chunk = chunk_bytes_ / kPageBytes;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    if (mincore(chunks_[c], chunk_bytes_, resident.data()) != 0) continue;
    ForEachRun(plan_, c, per_chunk, false, [&](uint64_t a, uint64_t b) {
      while (a < b && !(resident[a] & 1)) ++a;  // only the span of resident pages
      while (b > a && !(resident[b - 1] & 1)) --b;
      if (a == b) return;
      auto r = rt_.Migrate(chunks_[c] + a * kPageBytes, (b - a) * kPageBytes, Tier::kRemote);
      if (r.ok()) {
        evicted_.fetch_add(r->pages_moved, std::memory_order_relaxed);
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (error_.empty()) error_ = r.status().ToString();
    });
  }
}

}  // namespace tiermem::bench::kv
