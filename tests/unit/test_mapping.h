// A private anonymous mapping for the tests of base/'s memory calls: `pages` pages, each byte
// `fill`, without transparent huge pages (one page-table entry per page, as the runtime's
// regions have them); unmapped when it goes. base is nullptr when mmap failed.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstring>

namespace tiermem {

struct TestMapping {
  static constexpr size_t kPage = 4096;
  TestMapping(size_t pages, unsigned char fill) : bytes(pages * kPage) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
    if (base == nullptr) return;
    madvise(base, bytes, MADV_NOHUGEPAGE);
    memset(base, fill, bytes);
  }
  ~TestMapping() {
    if (base != nullptr) munmap(base, bytes);
  }
  TestMapping(const TestMapping&) = delete;
  TestMapping& operator=(const TestMapping&) = delete;
  char* base = nullptr;
  size_t bytes;
};

}  // namespace tiermem
