// tiermem's options: one table, filled from the TIERMEM_* environment variables and, for programs
// that start a Runtime themselves, from an Options object. Both routes write the same table
// entries through the same parsers, so a value means the same thing wherever it comes from.
//
//   tiermem::Options o;
//   o.Set("dram_limit", "1G").Set("remote", "tcp://10.0.0.2:7471").Set("sample_mode", "protect");
//   auto rt = tiermem::Runtime::Start(o);    // InvalidArgument names a bad name or value
//
// Names are the variable's, with or without the TIERMEM_ prefix, in any case ("dram_limit",
// "TIERMEM_DRAM_LIMIT"). Sizes take K/M/G/T suffixes. The environment is forgiving (a bad value
// warns and keeps the default, so a typo never stops a program); Options are strict (a bad name
// or value makes Runtime::Start fail with a message naming it). `tiermemctl options` prints the
// table.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tiermem/status.hpp"

namespace tiermem {

// One entry of the option table, for documentation and tools.
struct OptionInfo {
  std::string name;           // "TIERMEM_DRAM_LIMIT"
  std::string kind;           // "size", "bool", "uint", "string" or "log level"
  std::string default_value;  // as text, parsed like the environment
  std::string help;
};
// Every option, in documentation order.
std::vector<OptionInfo> OptionTable();

// "64K", "1M", "2G", "1T", "4096", "1.5G", "8GiB"; case-insensitive. False on junk or overflow.
bool ParseSize(std::string_view text, uint64_t* out);

// Option `name`'s value in the environment, checked by the table as the runtime checks it, for
// tools that read one option themselves (a memory server's token): `*value` is set when the
// variable is set and valid, left as it is when the variable is unset; InvalidArgument names
// the variable, the value and what is accepted when the table refuses it.
Status OptionFromEnv(std::string_view name, std::string* value);

class Options {
 public:
  // Sets option `name` to `value` (text, parsed as the environment would be). Later calls for the
  // same option win. Errors are kept and reported by status() and by Runtime::Start.
  Options& Set(std::string_view name, std::string_view value);
  Options& Set(std::string_view name, const char* value) { return Set(name, std::string_view(value)); }
  Options& Set(std::string_view name, const std::string& value) { return Set(name, std::string_view(value)); }
  // Numbers (sizes in bytes, counts, milliseconds) and booleans.
  template <typename T>
    requires std::is_integral_v<T>
  Options& Set(std::string_view name, T value) {
    if constexpr (std::is_same_v<T, bool>) {
      return Set(name, std::string_view(value ? "1" : "0"));
    } else {
      return Set(name, std::string_view(std::to_string(value)));
    }
  }

  // Ok, or InvalidArgument naming the first bad name or value given to Set.
  const Status& status() const { return status_; }
  // The options set, as (TIERMEM_ name, value) in the order given.
  const std::vector<std::pair<std::string, std::string>>& values() const { return values_; }

 private:
  std::vector<std::pair<std::string, std::string>> values_;
  Status status_;
};

}  // namespace tiermem
