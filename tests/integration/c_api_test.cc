#include <gtest/gtest.h>

#include "tiermem/tiermem.h"

extern "C" int tiermem_c_api_smoke(void);

TEST(CApi, StartAllocMigrateLocateFree) {
  EXPECT_EQ(tiermem_c_api_smoke(), 0) << tiermem_last_error();
}
