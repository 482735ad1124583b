#include "base/options.h"
#include "runtime/paging/pager.h"
#include "runtime/paging/prefetch.h"
#include "tests/unit/options_capture.h"
#include "tiermem/options.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <cctype>
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

TEST(OptionsFromEnv, GoodValuesApply) {
  setenv("TIERMEM_DRAM_LIMIT", "512M", 1);
  setenv("TIERMEM_ALLOW_FALLBACK", "true", 1);
  setenv("TIERMEM_REMOTE", "tcp://127.0.0.1:7471", 1);
  OptionValues v;
  std::string warnings = testing::LoadCapturingWarnings(&v);
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
  std::string warnings = testing::LoadCapturingWarnings(&v);
  unsetenv("TIERMEM_DRAM_LIMIT");
  unsetenv("TIERMEM_ALLOW_FALLBACK");
  unsetenv("TIERMEM_REGION_SIZ");
  unsetenv("TIERMEM_TOKEN");
  EXPECT_EQ(v.dram_limit, 0u);
  EXPECT_FALSE(v.allow_fallback);
  EXPECT_STREQ(v.token, "");
  EXPECT_NE(warnings.find("TIERMEM_DRAM_LIMIT=\"lots\" is not a valid value (expected a size"), std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("TIERMEM_ALLOW_FALLBACK"), std::string::npos);
  EXPECT_NE(warnings.find("TIERMEM_REGION_SIZ is not a tiermem option"), std::string::npos);
  EXPECT_NE(warnings.find("TIERMEM_TOKEN"), std::string::npos);
  // One line per bad variable.
  size_t lines = 0;
  for (char c : warnings) lines += c == '\n';
  EXPECT_EQ(lines, 4u) << warnings;
}

// An option with a fixed set of values (TIERMEM_ON_REMOTE_FULL): one of them applies, in any
// case; anything else warns once and keeps the default, like a bad value of any other kind.
TEST(OptionsFromEnv, ChoiceOptionTakesOnlyItsValues) {
  OptionValues v;
  LoadDefaultOptions(&v);
  EXPECT_EQ(RemoteFullPolicyOf(v), RemoteFullPolicy::kOvercommit);
  EXPECT_FALSE(v.remote_required);
  setenv("TIERMEM_ON_REMOTE_FULL", "Fail", 1);
  setenv("TIERMEM_REMOTE_REQUIRED", "1", 1);
  std::string warnings = testing::LoadCapturingWarnings(&v);
  EXPECT_EQ(warnings, "");
  EXPECT_EQ(RemoteFullPolicyOf(v), RemoteFullPolicy::kFail);
  EXPECT_STREQ(v.on_remote_full, "fail");
  EXPECT_TRUE(v.remote_required);
  for (const char* bad : {"overcommitx", "fai", "", "overcommit|fail"}) {
    setenv("TIERMEM_ON_REMOTE_FULL", bad, 1);
    warnings = testing::LoadCapturingWarnings(&v);
    EXPECT_EQ(RemoteFullPolicyOf(v), RemoteFullPolicy::kOvercommit) << bad;
    EXPECT_NE(warnings.find("TIERMEM_ON_REMOTE_FULL=\"" + std::string(bad) +
                            "\" is not a valid value (expected one of overcommit|fail); using the "
                            "default \"overcommit\""),
              std::string::npos)
        << warnings;
  }
  unsetenv("TIERMEM_ON_REMOTE_FULL");
  unsetenv("TIERMEM_REMOTE_REQUIRED");
  // The API's Options are checked against the same table.
  EXPECT_TRUE(Options().Set("on_remote_full", "overcommit").status().ok());
  EXPECT_FALSE(Options().Set("on_remote_full", "sometimes").status().ok());
}

// Values are case-insensitive where they are words, and stored in the form the runtime reads.
TEST(SetOption, WordsInAnyCaseAreStoredInLowerCase) {
  const std::pair<const char*, const char*> cases[] = {
      {"on_remote_full", "FAIL"}, {"fork", "Fetch"},        {"sample_mode", "Protect"},
      {"prefetch", "OFF"},        {"fault_spin_us", "Auto"}, {"cxl_nodes", "None"},
      {"dram_nodes", "AUTO"},
  };
  for (const auto& [name, value] : cases) {
    const OptionSpec* spec = FindOption(name);
    ASSERT_NE(spec, nullptr) << name;
    OptionValues v;
    LoadDefaultOptions(&v);
    ASSERT_TRUE(SetOption(&v, *spec, value)) << name << "=" << value;
    std::string lower = value;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    EXPECT_STREQ(reinterpret_cast<const char*>(&v) + spec->offset, lower.c_str()) << name;
    EXPECT_TRUE(Options().Set(name, value).status().ok()) << name;
  }
  // A memory server's scheme is a word; its host and the rest keep their case.
  OptionValues v;
  ASSERT_TRUE(SetOption(&v, *FindOption("remote"), "TCP://Host-A:7471,Rdma://10.0.0.2"));
  EXPECT_STREQ(v.remote, "tcp://Host-A:7471,rdma://10.0.0.2");
  ASSERT_TRUE(SetOption(&v, *FindOption("log"), "DEBUG"));
  EXPECT_EQ(v.log_level, LogLevel::kDebug);
}

// The runtime's conversions of values the table accepted.
TEST(OptionConversions, PrefetchAndFaultSpin) {
  EXPECT_EQ(FaultSpinFromOption("auto"), -1);
  EXPECT_EQ(FaultSpinFromOption(""), -1);
  EXPECT_EQ(FaultSpinFromOption("0"), 0);
  EXPECT_EQ(FaultSpinFromOption("150"), 150);
  EXPECT_EQ(FaultSpinFromOption("10000"), 10000);
  EXPECT_EQ(Prefetcher::WindowFromOption("auto"), Prefetcher::kAutoWindow);
  EXPECT_EQ(Prefetcher::WindowFromOption("off"), 0u);
  EXPECT_EQ(Prefetcher::WindowFromOption("0"), 0u);
  EXPECT_EQ(Prefetcher::WindowFromOption("128"), 128u);
  EXPECT_EQ(Prefetcher::WindowFromOption("7"), 7u);
}

}  // namespace
}  // namespace tiermem
