// ZeroedArray: zero from the start, resident only where written, movable, unmapped when reset.
#include "base/zeroed_array.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace tiermem {
namespace {

// Pages of [p, p + bytes) that are resident now (mincore).
size_t ResidentPages(const void* p, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((bytes + page - 1) / page);
  if (mincore(const_cast<void*>(p), bytes, v.data()) != 0) return SIZE_MAX;
  size_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

TEST(ZeroedArray, IsZeroAndResidentOnlyWhereWritten) {
  constexpr size_t kN = size_t{1} << 18;  // 2 MiB of entries, the relief ring's size
  ZeroedArray<uint64_t> a;
  ASSERT_TRUE(a.Reset(kN).ok());
  ASSERT_EQ(a.size(), kN);
  EXPECT_EQ(ResidentPages(&a[0], kN * sizeof(uint64_t)), 0u);
  a[0] = 1;
  a[kN - 1] = 2;
  EXPECT_EQ(ResidentPages(&a[0], kN * sizeof(uint64_t)), 2u);  // the two pages written, no more
  for (size_t i = 1; i < kN - 1; i += 4099) EXPECT_EQ(a[i], 0u) << i;  // reads see zeros
  EXPECT_EQ(a[0], 1u);
  EXPECT_EQ(a[kN - 1], 2u);
}

TEST(ZeroedArray, MovesItsMappingAndResetStartsFromZero) {
  ZeroedArray<uint32_t> a;
  ASSERT_TRUE(a.Reset(1000).ok());
  a[999] = 7;
  ZeroedArray<uint32_t> b = std::move(a);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  ASSERT_EQ(b.size(), 1000u);
  EXPECT_EQ(b[999], 7u);
  ASSERT_TRUE(b.Reset(10).ok());  // a fresh mapping: the old contents are gone
  EXPECT_EQ(b.size(), 10u);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(b[i], 0u);
  ASSERT_TRUE(b.Reset(0).ok());
  EXPECT_TRUE(b.empty());
}

TEST(ZeroedArray, SaysWhyWhenTheAddressSpaceCannotBeHad) {
  ZeroedArray<uint64_t> a;
  Status s = a.Reset(size_t{1} << 60);  // 8 EiB of entries: no mapping can hold it
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("mapping"), std::string::npos) << s.ToString();
  EXPECT_TRUE(a.empty());
}

}  // namespace
}  // namespace tiermem
