// Threads pass heap buffers to system calls while the policy thread samples them: each thread
// fills malloc'd blocks with a pattern, write(2)s them into a pipe and read(2)s them back into
// other blocks, send(2)s and recv(2)s them over a socket pair, and checks every byte after each
// call. Under the preload library with TIERMEM_SAMPLE_MODE=uffd (soft eviction) the pages are
// taken out of the page tables round after round; a system call that meets one must wait for
// the pager and see the right bytes, never fail with EFAULT. Prints deterministic totals; exits
// 1 at the first wrong byte or failed call.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 4;
constexpr int kBlocks = 48;           // per thread
constexpr int kIterations = 1500;     // per thread
constexpr size_t kMaxBlock = 256 << 10;

std::atomic<int> failures{0};

void Fail(int t, const char* what, size_t at) {
  if (failures.fetch_add(1) < 5) fprintf(stderr, "thread %d: %s (at %zu): %s\n", t, what, at, strerror(errno));
}

void Fill(unsigned char* b, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    memcpy(b + i, &x, std::min<size_t>(8, n - i));
  }
}

bool Same(const unsigned char* b, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    if (memcmp(b + i, &x, std::min<size_t>(8, n - i)) != 0) return false;
  }
  return true;
}

// Moves n bytes from `from` to `to` through fd pair (w, r) with the calls given, in pieces the
// kernel takes (a pipe holds 64 KiB).
template <typename Put, typename Get>
bool Pass(int t, const unsigned char* from, unsigned char* to, size_t n, Put put, Get get) {
  size_t sent = 0, got = 0;
  while (got < n) {
    if (sent < n) {
      ssize_t w = put(from + sent, std::min<size_t>(n - sent, 32 << 10));
      if (w <= 0) {
        Fail(t, "write/send", sent);
        return false;
      }
      sent += static_cast<size_t>(w);
    }
    while (got < sent) {
      ssize_t r = get(to + got, sent - got);
      if (r <= 0) {
        Fail(t, "read/recv", got);
        return false;
      }
      got += static_cast<size_t>(r);
    }
  }
  return true;
}

uint64_t Worker(int t) {
  int pp[2], sv[2];
  if (pipe(pp) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    Fail(t, "pipe/socketpair", 0);
    return 0;
  }
  std::vector<unsigned char*> blocks(kBlocks);
  std::vector<size_t> sizes(kBlocks);
  std::vector<uint64_t> seeds(kBlocks);
  uint64_t rng = 12345 + t, bytes = 0;
  auto next = [&] {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
  };
  for (int i = 0; i < kBlocks; ++i) {
    sizes[i] = 4096 + next() % kMaxBlock;
    blocks[i] = static_cast<unsigned char*>(malloc(sizes[i]));
    seeds[i] = next();
    Fill(blocks[i], sizes[i], seeds[i]);
  }
  for (int it = 0; it < kIterations && failures.load() == 0; ++it) {
    const int a = static_cast<int>(next() % kBlocks), b = static_cast<int>(next() % kBlocks);
    if (a == b) continue;
    const size_t n = std::min(sizes[a], sizes[b]);
    // Check a (it may have been sampled, evicted and brought back since it was written).
    if (!Same(blocks[a], sizes[a], seeds[a])) Fail(t, "block changed while idle", a);
    // b takes a's first n bytes through the pipe or the socket pair, then is checked.
    const bool via_pipe = (it & 1) == 0;
    bool ok = via_pipe ? Pass(t, blocks[a], blocks[b], n, [&](const void* p, size_t k) { return write(pp[1], p, k); },
                              [&](void* p, size_t k) { return read(pp[0], p, k); })
                       : Pass(t, blocks[a], blocks[b], n, [&](const void* p, size_t k) { return send(sv[0], p, k, 0); },
                              [&](void* p, size_t k) { return recv(sv[1], p, k, 0); });
    if (!ok) break;
    if (!Same(blocks[b], n, seeds[a])) Fail(t, "bytes wrong after the system calls", b);
    bytes += n;
    // b is a's copy now (its first n bytes); made whole again with a fresh pattern.
    seeds[b] = next();
    if (it % 7 == 0) {  // now and then a new block in its place
      free(blocks[b]);
      sizes[b] = 4096 + next() % kMaxBlock;
      blocks[b] = static_cast<unsigned char*>(malloc(sizes[b]));
    }
    Fill(blocks[b], sizes[b], seeds[b]);
  }
  for (int i = 0; i < kBlocks; ++i) {
    if (!Same(blocks[i], sizes[i], seeds[i])) Fail(t, "block wrong at the end", i);
    free(blocks[i]);
  }
  close(pp[0]), close(pp[1]), close(sv[0]), close(sv[1]);
  return bytes;
}

}  // namespace

int main() {
  std::vector<std::thread> threads;
  std::vector<uint64_t> bytes(kThreads);
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([t, &bytes] { bytes[t] = Worker(t); });
  for (auto& th : threads) th.join();
  if (failures.load() != 0) {
    fprintf(stderr, "%d failures\n", failures.load());
    return 1;
  }
  for (int t = 0; t < kThreads; ++t) printf("thread %d passed %llu bytes through system calls\n", t, (unsigned long long)bytes[t]);
  return 0;
}
