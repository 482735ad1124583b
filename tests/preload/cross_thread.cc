// Threads allocate blocks (malloc and new, many sizes), hand them to other threads through
// queues, and the receivers check the contents and free them. Prints deterministic totals. Then
// operator new fails and throws std::bad_alloc through the allocator (under the preload library
// the exception unwinds through its code: its unwind tables sit after .text, see
// allocator/preload/unwind-after-text.lds).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

struct Queue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<unsigned char*, size_t>> items;
  int producers_done = 0;
};

// Odd sizes came from malloc, even sizes from new[].
void Release(unsigned char* b, size_t m) {
  if (m & 1) {
    free(b);
  } else {
    delete[] b;
  }
}

int main() {
  constexpr int kThreads = 6, kPer = 200000;
  std::vector<Queue> q(kThreads);
  std::vector<unsigned long long> sums(kThreads), counts(kThreads);
  std::vector<std::thread> th;
  for (int t = 0; t < kThreads; ++t) {
    th.emplace_back([&, t] {
      unsigned seed = 12345 + t;
      Queue& out = q[(t + 1) % kThreads];
      Queue& in = q[t];
      for (int i = 0; i < kPer; ++i) {
        seed = seed * 1103515245 + 12345;
        size_t n = (seed >> 8) % 1000 < 990 ? (seed >> 12) % 300 + 1 : (seed >> 12) % 300000 + 1;
        unsigned char* p = (n & 1) ? static_cast<unsigned char*>(malloc(n)) : new unsigned char[n];
        memset(p, static_cast<int>(n & 0xff), n);
        {
          std::lock_guard<std::mutex> l(out.mu);
          out.items.emplace_back(p, n);
        }
        out.cv.notify_one();
        std::vector<std::pair<unsigned char*, size_t>> got;
        {
          std::lock_guard<std::mutex> l(in.mu);
          while (!in.items.empty() && got.size() < 64) {
            got.push_back(in.items.front());
            in.items.pop_front();
          }
        }
        for (auto [b, m] : got) {
          if (b[0] != (m & 0xff) || b[m - 1] != (m & 0xff)) { fprintf(stderr, "corrupt\n"); abort(); }
          sums[t] += m;
          ++counts[t];
          Release(b, m);
        }
      }
      {
        std::lock_guard<std::mutex> l(out.mu);
        ++out.producers_done;
      }
      out.cv.notify_all();
      std::unique_lock<std::mutex> l(in.mu);
      for (;;) {
        while (!in.items.empty()) {
          auto [b, m] = in.items.front();
          in.items.pop_front();
          if (b[0] != (m & 0xff) || b[m - 1] != (m & 0xff)) { fprintf(stderr, "corrupt\n"); abort(); }
          sums[t] += m;
          ++counts[t];
          Release(b, m);
        }
        if (in.producers_done == 1) break;
        in.cv.wait(l);
      }
    });
  }
  for (auto& t : th) t.join();
  unsigned long long total = 0, n = 0;
  for (int t = 0; t < kThreads; ++t) total += sums[t], n += counts[t];
  std::string s = "blocks " + std::to_string(n) + " bytes " + std::to_string(total);
  printf("%s\n", s.c_str());
  const size_t huge = size_t{1} << 62;
  try {
    std::vector<unsigned char> v(huge);
    printf("no bad_alloc for a vector of %zu bytes\n", v.size());
  } catch (const std::bad_alloc&) {
    printf("vector: bad_alloc\n");
  }
  try {
    auto* p = new (std::align_val_t(64)) unsigned char[huge];
    printf("no bad_alloc for aligned new: %p\n", static_cast<void*>(p));
  } catch (const std::bad_alloc&) {
    printf("aligned new: bad_alloc\n");
  }
  return 0;
}
