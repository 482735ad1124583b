#include "base/options.h"
#include "runtime/paging/pager.h"
#include "tiermem/options.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

namespace tiermem {
namespace {

TEST(ParseSize, SuffixesAndJunk) {
  uint64_t v = 0;
  EXPECT_TRUE(ParseSize("4096", &v));
  EXPECT_EQ(v, 4096u);
  EXPECT_TRUE(ParseSize("64K", &v));
  EXPECT_EQ(v, 64u << 10);
  EXPECT_TRUE(ParseSize("1m", &v));
  EXPECT_EQ(v, 1u << 20);
  EXPECT_TRUE(ParseSize("2G", &v));
  EXPECT_EQ(v, 2ull << 30);
  EXPECT_TRUE(ParseSize("8GiB", &v));
  EXPECT_EQ(v, 8ull << 30);
  EXPECT_TRUE(ParseSize("1.5G", &v));
  EXPECT_EQ(v, 3ull << 29);
  EXPECT_TRUE(ParseSize("1T", &v));
  EXPECT_EQ(v, 1ull << 40);
  for (const char* bad : {"", "G", "12Q", "-1", "1.5", "1..5G", "99999999999999999999",
                          "20000000T", "1G extra", "0x10"}) {
    uint64_t before = 77;
    v = before;
    EXPECT_FALSE(ParseSize(bad, &v)) << bad;
    EXPECT_EQ(v, before) << bad;
  }
}

TEST(ParseBool, Words) {
  bool b = false;
  EXPECT_TRUE(ParseBool("YES", &b));
  EXPECT_TRUE(b);
  EXPECT_TRUE(ParseBool("off", &b));
  EXPECT_FALSE(b);
  EXPECT_FALSE(ParseBool("maybe", &b));
}

TEST(OptionTable, DefaultsParse) {
  size_t n = 0;
  const OptionSpec* t = OptionTable(&n);
  ASSERT_GT(n, 5u);
  OptionValues v;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(SetOption(&v, t[i], t[i].default_value)) << t[i].env;
    EXPECT_EQ(std::strncmp(t[i].env, "TIERMEM_", 8), 0) << t[i].env;
  }
  LoadDefaultOptions(&v);
  EXPECT_EQ(v.dram_limit, 0u);
  EXPECT_EQ(v.region_size, 64ull << 30);
  EXPECT_STREQ(v.cxl_nodes, "auto");
  EXPECT_EQ(v.log_level, LogLevel::kWarn);
}

// Runs LoadOptionsFromEnv with stderr captured into a pipe.
std::string LoadCapturingWarnings(OptionValues* v) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  int saved = dup(2);
  dup2(fds[1], 2);
  LoadOptionsFromEnv(v);
  dup2(saved, 2);
  close(saved);
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t r;
  while ((r = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(r));
  close(fds[0]);
  return out;
}

TEST(OptionsFromEnv, GoodValuesApply) {
  setenv("TIERMEM_DRAM_LIMIT", "512M", 1);
  setenv("TIERMEM_ALLOW_FALLBACK", "true", 1);
  setenv("TIERMEM_REMOTE", "tcp://127.0.0.1:7471", 1);
  OptionValues v;
  std::string warnings = LoadCapturingWarnings(&v);
  unsetenv("TIERMEM_DRAM_LIMIT");
  unsetenv("TIERMEM_ALLOW_FALLBACK");
  unsetenv("TIERMEM_REMOTE");
  EXPECT_EQ(v.dram_limit, 512ull << 20);
  EXPECT_TRUE(v.allow_fallback);
  EXPECT_STREQ(v.remote, "tcp://127.0.0.1:7471");
  EXPECT_EQ(warnings, "");
}

TEST(OptionsFromEnv, BadValueWarnsOnceAndKeepsDefault) {
  setenv("TIERMEM_DRAM_LIMIT", "lots", 1);
  setenv("TIERMEM_ALLOW_FALLBACK", "perhaps", 1);
  setenv("TIERMEM_REGION_SIZ", "1G", 1);  // a typo of a real name
  std::string long_value(2000, 'x');
  setenv("TIERMEM_TOKEN", long_value.c_str(), 1);
  OptionValues v;
  std::string warnings = LoadCapturingWarnings(&v);
  unsetenv("TIERMEM_DRAM_LIMIT");
  unsetenv("TIERMEM_ALLOW_FALLBACK");
  unsetenv("TIERMEM_REGION_SIZ");
  unsetenv("TIERMEM_TOKEN");
  EXPECT_EQ(v.dram_limit, 0u);
  EXPECT_FALSE(v.allow_fallback);
  EXPECT_STREQ(v.token, "");
  EXPECT_NE(warnings.find("TIERMEM_DRAM_LIMIT=\"lots\" is not a valid value"), std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("TIERMEM_ALLOW_FALLBACK"), std::string::npos);
  EXPECT_NE(warnings.find("TIERMEM_REGION_SIZ is not a tiermem option"), std::string::npos);
  EXPECT_NE(warnings.find("TIERMEM_TOKEN"), std::string::npos);
  // One line per bad variable.
  size_t lines = 0;
  for (char c : warnings) lines += c == '\n';
  EXPECT_EQ(lines, 4u) << warnings;
}

// An option with a fixed set of values (TIERMEM_ON_REMOTE_FULL): one of them applies, anything
// else warns once and keeps the default, like a bad value of any other kind.
TEST(OptionsFromEnv, ChoiceOptionTakesOnlyItsValues) {
  OptionValues v;
  LoadDefaultOptions(&v);
  EXPECT_EQ(RemoteFullPolicyOf(v), RemoteFullPolicy::kOvercommit);
  EXPECT_FALSE(v.remote_required);
  setenv("TIERMEM_ON_REMOTE_FULL", "fail", 1);
  setenv("TIERMEM_REMOTE_REQUIRED", "1", 1);
  std::string warnings = LoadCapturingWarnings(&v);
  EXPECT_EQ(warnings, "");
  EXPECT_EQ(RemoteFullPolicyOf(v), RemoteFullPolicy::kFail);
  EXPECT_TRUE(v.remote_required);
  for (const char* bad : {"Fail", "overcommitx", "fai", "", "overcommit|fail"}) {
    setenv("TIERMEM_ON_REMOTE_FULL", bad, 1);
    warnings = LoadCapturingWarnings(&v);
    EXPECT_EQ(RemoteFullPolicyOf(v), RemoteFullPolicy::kOvercommit) << bad;
    EXPECT_NE(warnings.find("TIERMEM_ON_REMOTE_FULL=\"" + std::string(bad) +
                            "\" is not a valid value; using the default \"overcommit\""),
              std::string::npos)
        << warnings;
  }
  unsetenv("TIERMEM_ON_REMOTE_FULL");
  unsetenv("TIERMEM_REMOTE_REQUIRED");
  // The API's Options are checked against the same table.
  EXPECT_TRUE(Options().Set("on_remote_full", "overcommit").status().ok());
  EXPECT_FALSE(Options().Set("on_remote_full", "sometimes").status().ok());
}

TEST(FaultSpinOption, AutoNumbersAndJunk) {
  const char* problem = nullptr;
  EXPECT_EQ(FaultSpinFromOption("auto", &problem), -1);
  EXPECT_EQ(problem, nullptr);
  EXPECT_EQ(FaultSpinFromOption("", &problem), -1);
  EXPECT_EQ(problem, nullptr);
  EXPECT_EQ(FaultSpinFromOption("0", &problem), 0);
  EXPECT_EQ(problem, nullptr);
  EXPECT_EQ(FaultSpinFromOption("150", &problem), 150);
  EXPECT_EQ(FaultSpinFromOption("10000", &problem), 10000);
  EXPECT_EQ(problem, nullptr);
  for (const char* bad : {"10001", "99999999999999999999", "50us", "-1", "off"}) {
    problem = nullptr;
    EXPECT_EQ(FaultSpinFromOption(bad, &problem), -1) << bad;
    EXPECT_NE(problem, nullptr) << bad;
  }
}

}  // namespace
}  // namespace tiermem
