// os::DiscardRanges: every range given is dropped (reads zero afterwards) and nothing else, in
// one process_madvise per 256 ranges where the kernel takes it and one madvise each where not;
// a bad range in the list is reported and does not keep the others from being dropped.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "base/os.h"
#include "tests/unit/test_mapping.h"

namespace tiermem {
namespace {

constexpr size_t kPage = 4096;

struct Mapping : TestMapping {
  explicit Mapping(size_t pages) : TestMapping(pages, 0x5a) {}
  bool Zero(size_t page) const {
    for (size_t i = 0; i < kPage; ++i) {
      if (base[page * kPage + i] != 0) return false;
    }
    return true;
  }
  bool Kept(size_t page) const {
    for (size_t i = 0; i < kPage; ++i) {
      if (base[page * kPage + i] != 0x5a) return false;
    }
    return true;
  }
};

// Every third page, single pages and runs of two alternating: 700 ranges (more than one call's
// 256), each dropped, each page between them kept.
TEST(DiscardRanges, DropsEveryRangeGivenAndNothingElse) {
  constexpr size_t kPages = 2100;
  Mapping m(kPages);
  ASSERT_NE(m.base, nullptr);
  std::vector<os::Span> spans;
  std::vector<bool> dropped(kPages, false);
  for (size_t p = 0; p + 2 < kPages; p += 3) {
    const size_t n = (p / 3) % 2 == 0 ? 1 : 2;
    spans.push_back({m.base + p * kPage, n * kPage});
    for (size_t k = 0; k < n; ++k) dropped[p + k] = true;
  }
  ASSERT_EQ(spans.size(), 700u);
  EXPECT_EQ(os::DiscardRanges(spans.data(), spans.size()), 0);
  size_t wrong = 0;
  for (size_t p = 0; p < kPages; ++p) wrong += dropped[p] ? !m.Zero(p) : !m.Kept(p);
  EXPECT_EQ(wrong, 0u);
}

// A range that is not mapped, in the middle of the list: its error comes back, and the ranges
// before and after it are dropped all the same.
TEST(DiscardRanges, ABadRangeIsReportedAndTheOthersAreStillDropped) {
  Mapping m(64);
  ASSERT_NE(m.base, nullptr);
  ASSERT_EQ(munmap(m.base + 32 * kPage, kPage), 0);  // a hole at page 32
  std::vector<os::Span> spans;
  for (size_t p = 0; p < 64; p += 4) spans.push_back({m.base + p * kPage, kPage});
  EXPECT_LT(os::DiscardRanges(spans.data(), spans.size()), 0);
  for (size_t p = 0; p < 64; p += 4) {
    if (p == 32) continue;
    EXPECT_TRUE(m.Zero(p)) << "page " << p;
  }
  EXPECT_TRUE(m.Kept(1));
  EXPECT_TRUE(m.Kept(63));
  // The hole is ours to leave alone: remapped so the destructor's munmap is whole.
  ASSERT_NE(mmap(m.base + 32 * kPage, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
            MAP_FAILED);
}

TEST(DiscardRanges, NoRangesIsNothingToDo) { EXPECT_EQ(os::DiscardRanges(nullptr, 0), 0); }

}  // namespace
}  // namespace tiermem
