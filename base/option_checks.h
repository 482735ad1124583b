// What the option table accepts beyond a value's kind: the bounds of its numbers and the forms of
// its strings. The table (options.cc) names one of these per entry, so every value the runtime
// would refuse or reinterpret is refused by SetOption, with the environment and Options::Set
// alike. Everything here is allocation-free (it runs before main and inside malloc).
//
// A string check takes the value in a writable copy and may rewrite it in place into its canonical
// form (keywords in lower case), which is what the runtime later reads: values are
// case-insensitive wherever they are words, case-preserving where they are names (paths, tokens).
#pragma once

#include <cstdint>

namespace tiermem {

// Bounds the runtime relies on (their users static_assert against these).
inline constexpr uint64_t kOptMaxReplicas = 4;          // TIERMEM_REPLICAS: 1 to this
inline constexpr uint64_t kOptMaxPrefetch = 128;        // TIERMEM_PREFETCH=N: pages
inline constexpr uint64_t kOptMaxFaultSpinUs = 10'000;  // TIERMEM_FAULT_SPIN_US=N
inline constexpr uint64_t kOptMaxFaultConnections = 8;  // TIERMEM_FAULT_CONNECTIONS: 1 to this
inline constexpr uint64_t kOptMaxSamplePages = 4096;    // TIERMEM_SAMPLE_PAGES
inline constexpr uint64_t kOptMinScanPages = 1024;      // TIERMEM_SCAN_PAGES, when not 0
inline constexpr uint64_t kOptMinTrackPages = 512;      // TIERMEM_TRACK_PAGES
inline constexpr uint64_t kOptMaxTrackPages = uint64_t{1} << 32;
inline constexpr uint64_t kOptMaxHeatLogPages = uint64_t{1} << 20;  // 16 MiB a round
inline constexpr uint64_t kOptMinRegionSize = 64ull << 20;
inline constexpr uint64_t kOptMaxIntervalMs = 3'600'000;  // TIERMEM_SAMPLE_INTERVAL_MS: an hour
inline constexpr uint32_t kOptMaxCodeParity = 4;          // TIERMEM_REMOTE_CODE's m

// Whether `value` is acceptable; it may be rewritten in place into its canonical form. The table
// entry that names a check also says, in words, what it accepts (OptionSpec::accepts).
using OptionCheck = bool (*)(char* value);

// "auto" or "" gives -1; "off" (when `off` is true) gives 0; digits up to `max` give the number.
// False for anything else. Case-insensitive.
bool ParseAutoCount(const char* text, uint64_t max, bool off, int64_t* out);
// "k+m" with k and m of one or two digits; false for anything else (ranges are not checked).
bool SplitCodeShape(const char* text, uint32_t* k, uint32_t* m);

bool CheckDramNodes(char* value);    // auto or a node list "0,2" / "0-3"
bool CheckCxlNodes(char* value);     // auto, none or a node list
bool CheckRemote(char* value);       // "" or tcp://host:port / rdma://host:port, comma-separated
bool CheckPrefetch(char* value);     // auto, off or N <= kOptMaxPrefetch
bool CheckFaultSpin(char* value);    // auto or N <= kOptMaxFaultSpinUs
bool CheckRemoteCode(char* value);   // "" or k+m: k 2, 4 or 8; m 1 to kOptMaxCodeParity

// Lower-cases `value` in place (ASCII).
void LowerAscii(char* value);

}  // namespace tiermem
