// The option table: every TIERMEM_* variable in one place. Values are read from `environ`
// without allocating (safe before main and inside malloc). A bad value prints one warning naming
// the variable and keeps the default; a typo never aborts the program. Options given through the
// API (tiermem::Options, include/tiermem/options.hpp) are checked against this table by
// Options::Set and applied over the environment's values with SetOption (Runtime::Impl::Init).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/log.h"
#include "base/option_checks.h"

namespace tiermem {

struct Options;

enum class OptionKind : uint8_t { kSize, kBool, kUint, kString, kLogLevel };

// Plain data, no heap: the preload library keeps one in static storage.
struct OptionValues {
  LogLevel log_level;
  uint64_t dram_limit;     // bytes, 0 = unlimited
  uint64_t cxl_limit;      // bytes, 0 = unlimited
  char dram_nodes[64];     // "auto" or a node list "0,2" / "0-3"
  char cxl_nodes[64];      // "auto", "none" or a node list
  char remote[512];        // comma-separated tcp://host:port / rdma://host:port
  char remote_file[256];   // a file of memory servers, read again while the process runs; "" = none
  char token[256];
  uint64_t remote_timeout_ms;
  char prefetch[16];       // auto | off | N (the largest window, in pages)
  uint64_t fault_connections;  // the fault handler's connections to each TCP memory server
  char fault_spin_us[16];  // auto | N: the fault handler's poll for the next fault before it sleeps
  bool remote_required;    // no server reachable at start: exit 75 instead of running on DRAM
  char on_remote_full[16]; // "overcommit" or "fail" (RemoteFullPolicy)
  uint64_t replicas;       // copies of each evicted page, on distinct servers
  uint64_t repair_rate;    // pages per second copied to restore replicas of a lost server
  char fork[8];            // "share" or "fetch": remote pages at fork()
  char remote_code[16];    // "k+m" erasure code instead of replicas; "" = off
  uint64_t region_size;    // address space reserved per managed region
  bool allow_fallback;
  char stats[256];         // "", "stderr" or a path
  uint64_t stats_interval_ms;  // a timeline line to the TIERMEM_STATS file this often; 0 = none
  // Automatic tiering: access sampling and the policy thread.
  char sample_mode[16];         // auto | protect | uffd | faults | off
  uint64_t sample_pages;        // pages protected per sampling round
  uint64_t scan_pages;          // resident pages a policy round lists at most (0: by mode)
  char track[8];                // auto | scan | off: how writes are learned (docs/tiering.md)
  uint64_t track_pages;         // pages the write scan reads per round
  char heat_log[256];           // TIERMEM_HEAT_LOG: the heat log's path ("" = none; %p the pid)
  uint64_t heat_log_pages;      // pages a round of the heat log records at most
  bool evict_background;        // the policy thread's evictions written without waiting
  bool relief_background;       // budget relief's too (with evict_background)
  uint64_t policy_cpu;          // percent of one CPU the policy thread may use (0: no bound)
  uint64_t sample_interval_ms;  // one sampling round (and one policy plan) per interval
  uint64_t sample_half_life_ms; // heat halves in this time without accesses
  uint64_t migrate_rate;        // pages per second the policy may move
};

struct OptionSpec {
  const char* env;            // "TIERMEM_DRAM_LIMIT"
  OptionKind kind;
  const char* default_value;  // as a string, parsed like the environment
  size_t offset;              // of the field in OptionValues
  size_t capacity;            // for kString: the field's size including the NUL
  const char* help;
  // For kString: the accepted values, '|'-separated ("overcommit|fail"), any case (stored in
  // lower case); nullptr = no fixed set.
  const char* choices = nullptr;
  // For kString: the value's form beyond its length (option_checks.h), and what it accepts in
  // words for messages; nullptr = any string that fits.
  OptionCheck check = nullptr;
  const char* accepts = nullptr;
  // For kSize and kUint: the accepted range; with zero_ok, 0 too (0 meaning "by default").
  uint64_t min = 0;
  uint64_t max = UINT64_MAX;
  bool zero_ok = false;
};

// TIERMEM_ON_REMOTE_FULL: what happens to DRAM's limit when the remote tier cannot take pages.
enum class RemoteFullPolicy : uint8_t { kOvercommit, kFail };
RemoteFullPolicy RemoteFullPolicyOf(const OptionValues& o);

// The table, in documentation order.
const OptionSpec* OptionTable(size_t* count);
// The entry for "TIERMEM_DRAM_LIMIT" or "dram_limit" (any case); nullptr when there is none.
const OptionSpec* FindOption(std::string_view name);

// Fills `out` with defaults, then applies every TIERMEM_* variable that is set. Unknown
// TIERMEM_* variables get one warning each. Allocation-free.
void LoadOptionsFromEnv(OptionValues* out);
// Fills `out` with the defaults only.
void LoadDefaultOptions(OptionValues* out);

// Applies one textual value; returns false (and leaves the field) when the table refuses it: it
// does not parse, is out of the entry's range, or fails its check. Allocation-free.
bool SetOption(OptionValues* out, const OptionSpec& spec, const char* value);
// What `spec` accepts, as a phrase for messages ("a number from 1 to 4"), into buf (NUL-terminated,
// truncated to size). Allocation-free.
void DescribeAccepted(const OptionSpec& spec, char* buf, size_t size);

// "64K", "1M", "2G", "1T", "4096", "1.5G", "8GiB"; case-insensitive; false on junk or overflow.
bool ParseSize(const char* text, uint64_t* out);
// 1/0, true/false, yes/no, on/off (case-insensitive).
bool ParseBool(const char* text, bool* out);
bool ParseUint(const char* text, uint64_t* out);

// An option's file path (TIERMEM_STATS, TIERMEM_HEAT_LOG) with each "%p" replaced by `pid`, so
// each process of a script, or a forked child, writes a file of its own.
std::string PathForProcess(const std::string& path_template, int pid);

}  // namespace tiermem
