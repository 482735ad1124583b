// Every option's bad values, from one table: each is refused by Options::Set (the error names the
// option and the value) and, given through the environment, warns naming the variable and keeps
// the default. The test walks OptionTable(), so an option added without bad-value cases here
// fails it.
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/options.h"
#include "tests/unit/options_capture.h"
#include "tiermem/options.hpp"

namespace tiermem {
namespace {

// Values each option refuses: junk for its kind, and those the runtime would otherwise refuse
// or reinterpret (out of range, a form its consumer does not take, longer than its field).
std::map<std::string, std::vector<std::string>> BadValues() {
  const std::string long64(64, '1'), long256(256, 'x'), long512(512, 'x');
  return {
      {"TIERMEM_LOG", {"loud", "", "warn2"}},
      {"TIERMEM_DRAM_LIMIT", {"lots", "-1", "1.5", "99999999999999999999"}},
      {"TIERMEM_CXL_LIMIT", {"12Q", ""}},
      {"TIERMEM_DRAM_NODES", {"none", "0-", "a", "1,,2", "3-1", long64}},
      {"TIERMEM_CXL_NODES", {"x", "1-", "-1", long64}},
      {"TIERMEM_REMOTE",
       {"http://h:7471", "tcp://:7471", "tcp://h:0", "tcp://h:70000", "tcp://h:port", ",",
        "tcp://h:1,udp://g:2", "tcp://" + long512}},
      {"TIERMEM_REMOTE_FILE", {long256}},
      {"TIERMEM_TOKEN", {long256}},
      {"TIERMEM_REMOTE_TIMEOUT_MS", {"0", "4294967296", "5s"}},
      {"TIERMEM_PREFETCH", {"129", "lots", "-1", "on"}},
      {"TIERMEM_FAULT_SPIN_US", {"10001", "off", "50us", "99999999999999999999"}},
      {"TIERMEM_FAULT_CONNECTIONS", {"0", "9", "two", "-1"}},
      {"TIERMEM_REMOTE_REQUIRED", {"perhaps", "2"}},
      {"TIERMEM_ON_REMOTE_FULL", {"sometimes", "", "overcommit|fail"}},
      {"TIERMEM_REPLICAS", {"0", "5", "two"}},
      {"TIERMEM_REMOTE_CODE", {"4", "3+2", "4+0", "4+5", "4+2+1", "a+b", "004+2"}},
      {"TIERMEM_REPAIR_RATE", {"0", "fast"}},
      {"TIERMEM_FORK", {"copy", ""}},
      {"TIERMEM_REGION_SIZE", {"1M", "63M", "-3"}},
      {"TIERMEM_ALLOW_FALLBACK", {"maybe"}},
      {"TIERMEM_STATS", {long256}},
      {"TIERMEM_STATS_INTERVAL_MS", {"-1", "1s"}},
      {"TIERMEM_SAMPLE_MODE", {"pebs", "", "protect,uffd"}},
      {"TIERMEM_SAMPLE_PAGES", {"0", "4097", "many"}},
      {"TIERMEM_SCAN_PAGES", {"1", "1023", "x"}},
      {"TIERMEM_TRACK", {"scanning", "", "scan|off", "soft_dirty"}},
      {"TIERMEM_TRACK_PAGES", {"0", "511", "x", "4294967297"}},
      {"TIERMEM_HEAT_LOG", {long256}},
      {"TIERMEM_HEAT_LOG_PAGES", {"0", "1048577", "x"}},
      {"TIERMEM_EVICT_BACKGROUND", {"sometimes"}},
      {"TIERMEM_RELIEF_BACKGROUND", {"2"}},
      {"TIERMEM_POLICY_CPU", {"101", "5%"}},
      {"TIERMEM_SAMPLE_INTERVAL_MS", {"0", "3600001"}},
      {"TIERMEM_SAMPLE_HALF_LIFE_MS", {"0", "x"}},
      {"TIERMEM_MIGRATE_RATE", {"0", "1e5"}},
  };
}

TEST(OptionTableBadValues, EveryOptionHasCases) {
  const auto bad = BadValues();
  for (const OptionInfo& o : OptionTable()) {
    auto it = bad.find(o.name);
    ASSERT_NE(it, bad.end()) << o.name << " has no bad-value cases in options_table_test.cc";
    EXPECT_FALSE(it->second.empty()) << o.name;
  }
  for (const auto& [name, values] : bad) EXPECT_NE(FindOption(name), nullptr) << name;
}

TEST(OptionTableBadValues, OptionsSetRefusesNamingOptionAndValue) {
  for (const auto& [name, values] : BadValues()) {
    for (const std::string& value : values) {
      Options o;
      o.Set(name, value);
      ASSERT_FALSE(o.status().ok()) << name << "=\"" << value << "\" was accepted";
      const std::string& msg = o.status().message();
      EXPECT_NE(msg.find(name + "=\"" + value + "\""), std::string::npos) << msg;
      EXPECT_NE(msg.find("expected "), std::string::npos) << msg;
      EXPECT_TRUE(o.values().empty()) << name;
    }
  }
}

TEST(OptionTableBadValues, EnvironmentWarnsAndKeepsTheDefault) {
  OptionValues defaults;
  LoadDefaultOptions(&defaults);
  for (const auto& [name, values] : BadValues()) {
    const OptionSpec* spec = FindOption(name);
    ASSERT_NE(spec, nullptr) << name;
    for (const std::string& value : values) {
      setenv(name.c_str(), value.c_str(), 1);
      OptionValues v;
      const std::string warnings = testing::LoadCapturingWarnings(&v);
      unsetenv(name.c_str());
      // The warning shows the value, shortened past 60 characters.
      const std::string shown = name + "=\"" + value.substr(0, 60);
      EXPECT_NE(warnings.find(shown), std::string::npos) << name << "=" << value << ": " << warnings;
      EXPECT_NE(warnings.find(std::string("using the default \"") + spec->default_value + "\""),
                std::string::npos)
          << warnings;
      const char* got = reinterpret_cast<const char*>(&v) + spec->offset;
      const char* want = reinterpret_cast<const char*>(&defaults) + spec->offset;
      EXPECT_EQ(std::memcmp(got, want, spec->capacity), 0) << name << "=" << value << " changed the value";
    }
  }
}

// The other side: each option's default, given explicitly, is accepted by both routes.
TEST(OptionTableBadValues, DefaultsAreAcceptedByBothRoutes) {
  for (const OptionInfo& o : OptionTable()) {
    EXPECT_TRUE(Options().Set(o.name, o.default_value).status().ok()) << o.name;
    setenv(o.name.c_str(), o.default_value.c_str(), 1);
    OptionValues v;
    const std::string warnings = testing::LoadCapturingWarnings(&v);
    unsetenv(o.name.c_str());
    EXPECT_EQ(warnings.find(o.name), std::string::npos) << warnings;
  }
}

}  // namespace
}  // namespace tiermem
