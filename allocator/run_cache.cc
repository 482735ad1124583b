#include "allocator/run_cache.h"

namespace tiermem::alloc {

void RunCache::RemoveAt(int i) {
  total_pages_ -= runs_[i].pages;
  for (int j = i + 1; j < n_; ++j) runs_[j - 1] = runs_[j];
  --n_;
}

int RunCache::Expire(uint64_t now_ns, Run* out) {
  int k = 0;
  while (n_ > 0 && now_ns - runs_[0].stamp_ns > max_age_ns_) {
    out[k++] = runs_[0];
    RemoveAt(0);
  }
  return k;
}

char* RunCache::Take(uint64_t lo, uint64_t hi, bool largest, uint64_t now_ns, uint64_t* pages,
                     Run* expired, int* nexpired) {
  std::lock_guard<std::mutex> lock(mu_);
  *nexpired = Expire(now_ns, expired);
  int best = -1;
  for (int i = 0; i < n_; ++i) {
    const uint64_t p = runs_[i].pages;
    if (p < lo || p > hi) continue;
    if (best < 0 || (largest ? p > runs_[best].pages : p < runs_[best].pages)) best = i;
  }
  if (best < 0) return nullptr;
  char* start = runs_[best].start;
  *pages = runs_[best].pages;
  RemoveAt(best);
  return start;
}

int RunCache::Put(char* start, uint64_t pages, uint64_t now_ns, Run* evicted) {
  std::lock_guard<std::mutex> lock(mu_);
  int k = Expire(now_ns, evicted);
  for (int i = 0; i < n_; ++i) {
    if (runs_[i].start == start) return k;
  }
  const uint64_t max_pages = max_pages_.load(std::memory_order_relaxed);
  if (pages > max_pages) {
    evicted[k++] = Run{start, pages, now_ns};
    return k;
  }
  while (n_ > 0 && (n_ == kSlots || total_pages_ + pages > max_pages)) {
    evicted[k++] = runs_[0];
    RemoveAt(0);
  }
  runs_[n_++] = Run{start, pages, now_ns};
  total_pages_ += pages;
  return k;
}

int RunCache::Yield(uint64_t lo, uint64_t pages, Run* out) {
  std::lock_guard<std::mutex> lock(mu_);
  int k = 0;
  uint64_t given = 0;
  for (int i = 0; i < n_;) {
    const Run run = runs_[i];
    if (run.pages < lo && given + run.pages <= pages) {
      given += run.pages;
      out[k++] = run;
      RemoveAt(i);
    } else {
      ++i;
    }
  }
  return k;
}

int RunCache::TakeAll(Run* out) {
  std::lock_guard<std::mutex> lock(mu_);
  const int k = n_;
  for (int i = 0; i < n_; ++i) out[i] = runs_[i];
  n_ = 0;
  total_pages_ = 0;
  return k;
}

uint64_t RunCache::pages() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_pages_;
}

}  // namespace tiermem::alloc
