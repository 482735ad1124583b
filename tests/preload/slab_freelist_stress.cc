// memcached's slab allocator in miniature, to catch a heap page that comes back zero or stale
// from the remote tier. Each thread takes 1 MiB slabs from malloc, zeroes them and carves them
// into items on intrusive free lists with counts (as memcached's do_slabs_newslab does), then
// pops, rewrites, checks and pushes items at random. Every item's version lives in a shadow
// array outside the item, and its header and every payload byte follow from its address and
// version, so a page that loses a write (or is replaced by a zero page) is found at its next
// check. The first mismatch is printed with its address and the program exits 1.
//   slab_freelist_stress [OPS_PER_THREAD [SLABS_PER_THREAD]]
// Prints deterministic totals (tests/preload/compare.sh compares them with a run without the
// preload library).
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 4;
constexpr size_t kSlabBytes = 1 << 20;
constexpr uint32_t kSizes[] = {256, 384, 640, 1184, 2048, 4096};  // item sizes (header included)
constexpr int kClasses = sizeof(kSizes) / sizeof(kSizes[0]);
constexpr uint32_t kMagic = 0x5157AB1E;
constexpr uint8_t kFree = 1, kLive = 2;

struct Item {
  Item* next;
  Item* prev;
  uint32_t magic;    // 0 in a fresh slab (zeroed), kMagic once carved
  uint32_t version;  // equals the shadow's
  uint16_t cls;
  uint8_t state;     // kFree or kLive
  uint8_t pad;
  uint32_t slab;     // index in the owner's slab table
  uint32_t index;    // index in the slab
};
static_assert(sizeof(Item) == 40, "item header");

// The payload word of an item at `addr`, version `v`, offset `i` (words). Version 0 is a freshly
// carved item whose payload is still memset's zeros.
inline uint64_t Word(uintptr_t addr, uint32_t v, size_t i) {
  if (v == 0) return 0;
  return (uint64_t(v) << 40) ^ (addr * 0x9E3779B97F4A7C15ull) ^ (i * 0xD6E8FEB86659FD93ull);
}

struct Slab {
  char* mem;
  int cls;
  uint32_t* versions;  // one per item (malloc'd apart from the slab)
};

struct Class {
  Item* head = nullptr;
  uint64_t count = 0;  // items on the list (memcached's sl_curr)
};

struct Thread {
  int id;
  uint64_t ops;
  size_t max_slabs;
  uint64_t rng;
  std::vector<Slab> slabs;
  Class classes[kClasses];
  std::vector<Item*> live;
  uint64_t checked = 0, popped = 0, pushed = 0, walked = 0;

  uint64_t Next() {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  }

  [[noreturn]] void Fail(const void* addr, const char* what, uint64_t want, uint64_t got) {
    fprintf(stderr,
            "slab_freelist_stress: thread %d: %s at %p: expected 0x%" PRIx64 ", read 0x%" PRIx64
            " (after %" PRIu64 " pops)\n",
            id, what, addr, want, got, popped);
    fflush(stderr);
    _exit(1);
  }

  uint32_t& Shadow(const Item* it) { return slabs[it->slab].versions[it->index]; }

  // Checks header and payload of `it` (in state `state`, of class `cls`) against the shadow.
  void Check(Item* it, int cls, uint8_t state) {
    if (it->magic != kMagic) Fail(&it->magic, "item magic", kMagic, it->magic);
    if (it->cls != cls) Fail(&it->cls, "item class", uint64_t(cls), it->cls);
    if (it->state != state) Fail(&it->state, "item state", state, it->state);
    if (it->slab >= slabs.size()) Fail(&it->slab, "item slab", slabs.size(), it->slab);
    const Slab& s = slabs[it->slab];
    const uintptr_t expect = reinterpret_cast<uintptr_t>(s.mem) + uintptr_t(it->index) * kSizes[cls];
    if (reinterpret_cast<uintptr_t>(it) != expect) Fail(&it->index, "item address", expect, uintptr_t(it));
    const uint32_t v = Shadow(it);
    if (it->version != v) Fail(&it->version, "item version", v, it->version);
    const auto* w = reinterpret_cast<const uint64_t*>(it + 1);
    const size_t words = (kSizes[cls] - sizeof(Item)) / 8;
    const uintptr_t a = reinterpret_cast<uintptr_t>(it);
    for (size_t i = 0; i < words; ++i) {
      if (w[i] != Word(a, v, i)) Fail(&w[i], "payload", Word(a, v, i), w[i]);
    }
    ++checked;
  }

  // A new version of `it` (header and payload), in state `state`.
  void Rewrite(Item* it, uint8_t state) {
    const uint32_t v = ++Shadow(it);
    it->version = v;
    it->state = state;
    auto* w = reinterpret_cast<uint64_t*>(it + 1);
    const size_t words = (kSizes[it->cls] - sizeof(Item)) / 8;
    const uintptr_t a = reinterpret_cast<uintptr_t>(it);
    for (size_t i = 0; i < words; ++i) w[i] = Word(a, v, i);
  }

  void Push(int cls, Item* it) {
    Class& c = classes[cls];
    it->prev = nullptr;
    it->next = c.head;
    if (c.head != nullptr) c.head->prev = it;
    c.head = it;
    ++c.count;
    ++pushed;
  }

  // memcached's do_slabs_alloc: the list's count says an item is there; the head must be one.
  Item* Pop(int cls) {
    Class& c = classes[cls];
    if (c.count == 0) return nullptr;
    Item* it = c.head;
    if (it == nullptr) Fail(&c.head, "free list head (count not zero)", c.count, 0);
    if (it->prev != nullptr) Fail(&it->prev, "free list head's prev", 0, uintptr_t(it->prev));
    c.head = it->next;
    if (c.count > 1 && c.head == nullptr) Fail(&it->next, "free list next (count not zero)", c.count - 1, 0);
    if (c.head != nullptr) c.head->prev = nullptr;
    --c.count;
    ++popped;
    return it;
  }

  bool NewSlab(int cls) {
    if (slabs.size() >= max_slabs) return false;
    Slab s;
    s.mem = static_cast<char*>(malloc(kSlabBytes));
    const uint32_t n = kSlabBytes / kSizes[cls];
    s.versions = static_cast<uint32_t*>(calloc(n, sizeof(uint32_t)));
    if (s.mem == nullptr || s.versions == nullptr) {
      fprintf(stderr, "slab_freelist_stress: out of memory\n");
      _exit(2);
    }
    s.cls = cls;
    memset(s.mem, 0, kSlabBytes);  // as memcached does before splitting a slab
    slabs.push_back(s);
    for (uint32_t i = 0; i < n; ++i) {  // headers only: payloads stay zero (version 0)
      Item* it = reinterpret_cast<Item*>(s.mem + size_t(i) * kSizes[cls]);
      it->magic = kMagic;
      it->cls = uint16_t(cls);
      it->state = kFree;
      it->slab = uint32_t(slabs.size() - 1);
      it->index = i;
      Push(cls, it);
    }
    return true;
  }

  // Walks a whole free list: every item checked, the links consistent, the length its count.
  void Walk(int cls) {
    Class& c = classes[cls];
    uint64_t n = 0;
    Item* prev = nullptr;
    for (Item* it = c.head; it != nullptr; it = it->next) {
      if (it->prev != prev) Fail(&it->prev, "free list prev link", uintptr_t(prev), uintptr_t(it->prev));
      Check(it, cls, kFree);
      prev = it;
      if (++n > c.count) Fail(&c.count, "free list longer than its count", c.count, n);
    }
    if (n != c.count) Fail(&c.count, "free list shorter than its count", c.count, n);
    ++walked;
  }

  void Run() {
    for (int cls = 0; cls < kClasses; ++cls) NewSlab(cls);
    for (uint64_t op = 0; op < ops; ++op) {
      const uint64_t r = Next();
      const int cls = int((r >> 8) % kClasses);
      const unsigned kind = unsigned(r % 10000);
      if (kind < 4500) {  // allocate: a new slab when the class's list is empty
        if (classes[cls].count == 0 && !NewSlab(cls)) continue;
        Item* it = Pop(cls);
        Check(it, cls, kFree);
        Rewrite(it, kLive);
        live.push_back(it);
      } else if (kind < 7500) {  // free a random live item
        if (live.empty()) continue;
        const size_t k = size_t(r >> 20) % live.size();
        Item* it = live[k];
        live[k] = live.back();
        live.pop_back();
        Check(it, it->cls, kLive);
        Rewrite(it, kFree);
        Push(it->cls, it);
      } else if (kind < 9990) {  // read, or rewrite, a random live item
        if (live.empty()) continue;
        Item* it = live[size_t(r >> 20) % live.size()];
        Check(it, it->cls, kLive);
        if (r & (1ull << 60)) Rewrite(it, kLive);
      } else {  // walk a free list (slabs beyond memory stay cold otherwise)
        Walk(cls);
      }
    }
    for (int cls = 0; cls < kClasses; ++cls) Walk(cls);
    for (Item* it : live) Check(it, it->cls, kLive);
  }
};

}  // namespace

int main(int argc, char** argv) {
  const uint64_t ops = argc > 1 ? strtoull(argv[1], nullptr, 10) : 100000;
  const size_t max_slabs = argc > 2 ? strtoull(argv[2], nullptr, 10) : 40;
  std::vector<Thread> ts(kThreads);
  std::vector<std::thread> th;
  for (int t = 0; t < kThreads; ++t) {
    ts[t].id = t;
    ts[t].ops = ops;
    ts[t].max_slabs = max_slabs;
    ts[t].rng = 0x2545F4914F6CDD1Dull * uint64_t(t + 1);
    th.emplace_back([&ts, t] { ts[t].Run(); });
  }
  for (auto& x : th) x.join();
  for (const Thread& t : ts) {
    printf("thread %d: %zu slabs, %" PRIu64 " pops, %" PRIu64 " pushes, %" PRIu64 " checks, %" PRIu64
           " walks, %zu live\n",
           t.id, t.slabs.size(), t.popped, t.pushed, t.checked, t.walked, t.live.size());
  }
  return 0;
}
