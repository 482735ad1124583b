// Bad input gets a clear error and loses nothing.
#include <stdlib.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/test_util.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

uint64_t AllocatedTotal(const Runtime& rt) {
  uint64_t t = 0;
  for (const TierStats& s : rt.Stats()) t += s.allocated_bytes;
  return t;
}

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = Runtime::Start();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    rt_ = std::move(r).value();
    auto p = rt_->Allocate(64 * 4096, Tier::kDram);
    ASSERT_TRUE(p.ok());
    live_ = *p;
    testing::FillPattern(live_, 64 * 4096, 7);
  }
  void TearDown() override {
    // Whatever was thrown at it, the live allocation is intact and accounted for.
    EXPECT_EQ(testing::CheckPattern(live_, 64 * 4096, 7), SIZE_MAX);
    EXPECT_EQ(AllocatedTotal(*rt_), 64u * 4096);
    EXPECT_TRUE(rt_->Free(live_).ok());
    EXPECT_EQ(AllocatedTotal(*rt_), 0u);
  }
  std::unique_ptr<Runtime> rt_;
  void* live_ = nullptr;
};

TEST_F(BadInput, FreeOfAForeignPointer) {
  void* m = malloc(100);
  Status s = rt_->Free(m);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not allocated by tiermem"), std::string::npos) << s.ToString();
  free(m);
  int on_stack = 0;
  EXPECT_EQ(rt_->Free(&on_stack).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(rt_->Free(nullptr).ok());  // like free(NULL)
}

TEST_F(BadInput, FreeInsideOrTwice) {
  EXPECT_EQ(rt_->Free(static_cast<char*>(live_) + 4096).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->Free(static_cast<char*>(live_) + 10).code(), StatusCode::kInvalidArgument);
  auto p = rt_->Allocate(4096, Tier::kDram);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(rt_->Free(*p).ok());
  Status again = rt_->Free(*p);
  EXPECT_EQ(again.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(again.message().find("already freed"), std::string::npos);
}

TEST_F(BadInput, MigrateToAMissingNode) {
  auto r = rt_->MigrateToNode(live_, 4096, 63);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("NUMA node 63 does not exist"), std::string::npos)
      << r.status().ToString();
  EXPECT_EQ(rt_->MigrateToNode(live_, 4096, -1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(rt_->MigrateToNode(live_, 4096, 5000).status().code(), StatusCode::kNotFound);
}

TEST_F(BadInput, AbsentTierIsUnavailableUnlessFallbackAllowed) {
  if (rt_->HasTier(Tier::kCxl)) GTEST_SKIP() << "this machine has a CXL tier";
  auto p = rt_->Allocate(4096, Tier::kCxl);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(p.status().message().find("tier cxl is not available"), std::string::npos);
  auto m = rt_->Migrate(live_, 4096, Tier::kCxl);
  EXPECT_EQ(m.status().code(), StatusCode::kUnavailable);
  auto f = rt_->Allocate(4096, Tier::kCxl, kAllocAllowFallback);
  ASSERT_TRUE(f.ok());
  auto where = rt_->Locate(*f, 4096);
  ASSERT_TRUE(where.ok());
  EXPECT_EQ((*where)[0].tier, Tier::kDram);
  EXPECT_TRUE(rt_->Free(*f).ok());
}

TEST_F(BadInput, RangesOutsideAllocations) {
  int x = 0;
  EXPECT_EQ(rt_->Migrate(&x, 4, Tier::kDram).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->Locate(&x, 4).status().code(), StatusCode::kInvalidArgument);
  // Running past the end of the allocation into free pages.
  EXPECT_EQ(rt_->Locate(live_, 65 * 4096).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->Locate(live_, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->Migrate(live_, 4096, Tier::kAuto).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->Migrate(live_, 4096, static_cast<Tier>(9)).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(BadInput, SillySizes) {
  EXPECT_EQ(rt_->Allocate(0, Tier::kDram).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->Allocate(~size_t{0}, Tier::kDram).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(rt_->Allocate(4096, static_cast<Tier>(7)).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(BadOptions, InvalidEnvironmentKeepsDefaultsAndStarts) {
  setenv("TIERMEM_DRAM_LIMIT", "a lot", 1);
  setenv("TIERMEM_CXL_NODES", "7,9", 1);
  setenv("TIERMEM_REGION_SIZE", "-3", 1);
  auto rt = Runtime::Start();
  unsetenv("TIERMEM_DRAM_LIMIT");
  unsetenv("TIERMEM_CXL_NODES");
  unsetenv("TIERMEM_REGION_SIZE");
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  auto p = (*rt)->Allocate(8 << 20, Tier::kDram);  // no limit: the bad value was ignored
  EXPECT_TRUE(p.ok());
}

TEST(BadOptions, ApiOptionsOverrideEnvironment) {
  setenv("TIERMEM_DRAM_LIMIT", "1G", 1);
  Options o;
  o.Set("dram_limit", 64 << 10);
  auto rt = Runtime::Start(o);
  unsetenv("TIERMEM_DRAM_LIMIT");
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ((*rt)->Allocate(128 << 10, Tier::kDram).status().code(),
            StatusCode::kResourceExhausted);
  Options bad;
  bad.Set("log_level", "loud");
  auto r2 = Runtime::Start(bad);
  EXPECT_EQ(r2.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tiermem
