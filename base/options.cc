#include "base/options.h"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <strings.h>

#include "base/os.h"

extern char** environ;

namespace tiermem {
namespace {

// An entry; what it accepts beyond its kind follows the help as designated initializers
// (.choices, .check with .accepts, .min, .max, .zero_ok), so each option's rules sit with its name.
#define TM_OPT(env_name, option_kind, def, field, help_text, ...)                                 \
  OptionSpec{.env = env_name, .kind = option_kind, .default_value = def,                          \
             .offset = offsetof(OptionValues, field), .capacity = sizeof(OptionValues::field),    \
             .help = help_text __VA_OPT__(, ) __VA_ARGS__}

const OptionSpec kTable[] = {
    TM_OPT("TIERMEM_LOG", OptionKind::kLogLevel, "warn", log_level,
           "log level: error, warn, info or debug"),
    TM_OPT("TIERMEM_DRAM_LIMIT", OptionKind::kSize, "0", dram_limit,
           "bytes of DRAM tiermem may use, kept while pages fault back (K/M/G suffixes; slack: "
           "the larger of 4 MiB and 1/32 of it); 0 = all of the DRAM nodes"),
    TM_OPT("TIERMEM_CXL_LIMIT", OptionKind::kSize, "0", cxl_limit,
           "bytes of the CXL tier tiermem may use; 0 = all of the CXL nodes"),
    TM_OPT("TIERMEM_DRAM_NODES", OptionKind::kString, "auto", dram_nodes,
           "NUMA nodes of the DRAM tier: auto (nodes with CPUs) or a list such as 0,2",
           .check = CheckDramNodes,
           .accepts = "auto or a list of NUMA nodes such as 0,2 or 0-3"),
    TM_OPT("TIERMEM_CXL_NODES", OptionKind::kString, "auto", cxl_nodes,
           "NUMA nodes of the CXL tier: auto (CXL nodes, else memory-only nodes), none, or a list",
           .check = CheckCxlNodes,
           .accepts = "auto, none or a list of NUMA nodes such as 1 or 2-3"),
    TM_OPT("TIERMEM_REMOTE", OptionKind::kString, "", remote,
           "memory servers: tcp://host:port or rdma://host:port, comma-separated",
           .check = CheckRemote,
           .accepts = "tcp://host:port or rdma://host:port, comma-separated"),
    TM_OPT("TIERMEM_REMOTE_FILE", OptionKind::kString, "", remote_file,
           "a file of memory servers (addresses separated by commas, spaces or newlines; # starts "
           "a comment), used with those of TIERMEM_REMOTE and read again once a second: a server "
           "added to it takes new pages once it answers, one taken out takes no new pages (its "
           "pages stay there); write it whole (rename) so no half-written file is read"),
    TM_OPT("TIERMEM_TOKEN", OptionKind::kString, "", token,
           "shared secret presented to tiermem-memd"),
    TM_OPT("TIERMEM_REMOTE_TIMEOUT_MS", OptionKind::kUint, "5000", remote_timeout_ms,
           "how long a remote fault may wait for its server before the process ends",
           .min = 1, .max = UINT32_MAX),
    TM_OPT("TIERMEM_PREFETCH", OptionKind::kString, "auto", prefetch,
           "remote faults fetch ahead along a thread's sequential or strided stream: auto (up to "
           "32 pages), off, or N (up to N pages, at most 128)",
           .check = CheckPrefetch,
           .accepts = "auto, off or a number of pages up to 128"),
    TM_OPT("TIERMEM_FAULT_SPIN_US", OptionKind::kString, "auto", fault_spin_us,
           "the fault handler polls this many microseconds before it sleeps, for a fault's reply "
           "and, after serving remote faults, for the next fault (a core busy meanwhile; a reply or "
           "a thread faulting again soon finds the handler awake): auto (200 when every memory server is rdma://, else 0: a "
           "memd on the same cores needs them over TCP) or N (at most 10000)",
           .check = CheckFaultSpin,
           .accepts = "auto or a number of microseconds up to 10000"),
    TM_OPT("TIERMEM_FAULT_CONNECTIONS", OptionKind::kUint, "1", fault_connections,
           "the fault handler's connections to each tcp:// memory server (1-8; rdma:// gets one): "
           "a fault's read goes to the one with the fewest reads in flight, as the server answers "
           "each in order",
           .min = 1, .max = kOptMaxFaultConnections),
    TM_OPT("TIERMEM_REMOTE_REQUIRED", OptionKind::kBool, "0", remote_required,
           "no memory server of TIERMEM_REMOTE reachable (or the token refused) at start: exit "
           "with status 75 instead of running on DRAM only (no effect without TIERMEM_REMOTE)"),
    TM_OPT("TIERMEM_ON_REMOTE_FULL", OptionKind::kString, "overcommit", on_remote_full,
           "when DRAM is at its limit and the remote tier cannot take pages (every server "
           "full, or none reachable): overcommit (DRAM grows past the limit, with a warning) "
           "or fail (allocations past the limit fail with ENOMEM)",
           .choices = "overcommit|fail"),
    TM_OPT("TIERMEM_REPLICAS", OptionKind::kUint, "1", replicas,
           "copies of each evicted page, on distinct memory servers (1-4; 2 advised with 3 or more "
           "servers): a fault reads the fastest, and a server lost takes no page with it",
           .min = 1, .max = kOptMaxReplicas),
    TM_OPT("TIERMEM_REMOTE_CODE", OptionKind::kString, "", remote_code,
           "erasure coding instead of replicas: k+m such as 4+2 (k data pieces: 2, 4 or 8; m parity "
           "pieces: 1 to 4) on k+m distinct memory servers; a fault reads the first k that answer, "
           "and m servers may be lost; needs ISA-L (libisal2). Empty: off",
           .check = CheckRemoteCode,
           .accepts = "empty, or k+m such as 4+2: k 2, 4 or 8 and m 1 to 4"),
    TM_OPT("TIERMEM_REPAIR_RATE", OptionKind::kUint, "50000", repair_rate,
           "pages per second copied to restore the replicas a lost memory server held",
           .min = 1),
    TM_OPT("TIERMEM_FORK", OptionKind::kString, "share", fork,
           "remote pages at fork(): fetch (every remote page comes back before the fork) or "
           "share (they stay remote; the child's faults are served by this process from the "
           "fork-time copies, which are kept until the child exits or execs)",
           .choices = "fetch|share"),
    TM_OPT("TIERMEM_REGION_SIZE", OptionKind::kSize, "64G", region_size,
           "address space reserved per managed region (more regions are added as needed)",
           .min = kOptMinRegionSize),
    TM_OPT("TIERMEM_ALLOW_FALLBACK", OptionKind::kBool, "0", allow_fallback,
           "give DRAM when an allocation asks for a tier this machine does not have"),
    TM_OPT("TIERMEM_STATS", OptionKind::kString, "", stats,
           "per-tier usage and counters at exit: stderr (text), or a file path (one JSON line; "
           "with TIERMEM_STATS_INTERVAL_MS, a timeline of JSON lines); %p in the path is the process id"),
    TM_OPT("TIERMEM_STATS_INTERVAL_MS", OptionKind::kUint, "0", stats_interval_ms,
           "with TIERMEM_STATS a file path: append a JSON line of live stats every this many ms "
           "(0 = only at exit); `tiermemctl plot` draws it"),
    // Automatic tiering (docs/tiering.md).
    TM_OPT("TIERMEM_SAMPLE_MODE", OptionKind::kString, "auto", sample_mode,
           "access sampling: auto (protect; in preloaded programs uffd where a remote tier runs, "
           "else faults), protect (PROT_NONE pages: SIGSEGV on their next read or write; a system "
           "call given one fails with EFAULT), uffd (soft eviction: the page's bytes kept in a "
           "copy, its next touch caught by the remote tier's userfaultfd; transparent to system "
           "calls, needs TIERMEM_REMOTE), faults (remote faults only: FIFO-like), off (no "
           "sampling; a DRAM limit is still kept)",
           .choices = "auto|protect|uffd|faults|off"),
    TM_OPT("TIERMEM_SAMPLE_PAGES", OptionKind::kUint, "64", sample_pages,
           "pages protected per sampling round (at most 4096): bounds the tracking overhead",
           .min = 1, .max = kOptMaxSamplePages),
    TM_OPT("TIERMEM_SCAN_PAGES", OptionKind::kUint, "0", scan_pages,
           "resident pages a policy round lists at most (at least 1024): a round reads a window "
           "of the page records that moves on from round to round, so its cost follows this, not "
           "memory; 0: 32768 with remote-fault sampling (faults), every page each round where "
           "rounds arm a sample (protect, uffd), whose cost to the program grows with the rounds",
           .min = kOptMinScanPages, .zero_ok = true),
    TM_OPT("TIERMEM_TRACK", OptionKind::kString, "auto", track,
           "how the policy learns which pages are written: scan (each round reads and re-arms "
           "the write bit of TIERMEM_TRACK_PAGES pages through PAGEMAP_SCAN with "
           "write-protect-async, or soft-dirty where only that exists, and samples reads only "
           "on pages it finds unwritten; with a remote tier, needs TIERMEM_FORK=fetch and sample "
           "mode other than uffd), off (access samples and "
           "remote faults only), auto (off for now)",
           .choices = "auto|scan|off"),
    TM_OPT("TIERMEM_TRACK_PAGES", OptionKind::kUint, "262144", track_pages,
           "with TIERMEM_TRACK=scan: pages of the managed regions the write scan reads per "
           "round, a window that moves on from round to round (soft-dirty reads every page "
           "each round: its clear takes no range)",
           .min = kOptMinTrackPages, .max = kOptMaxTrackPages),
    TM_OPT("TIERMEM_HEAT_LOG", OptionKind::kString, "", heat_log,
           "a file (%p is the process id) the policy thread appends what it learned to each round: "
           "the pages touched, with weights (binary, docs/advise.md); written only where the policy "
           "thread runs (a budget, or TIERMEM_TRACK=scan, which `tiermem advise` sets with it)"),
    TM_OPT("TIERMEM_HEAT_LOG_PAGES", OptionKind::kUint, "16384", heat_log_pages,
           "with TIERMEM_HEAT_LOG: pages a round records at most (a uniform random subset beyond, "
           "weights scaled up): the log grows by at most 24 + 16 * this bytes a round",
           .min = 1, .max = kOptMaxHeatLogPages),
    TM_OPT("TIERMEM_EVICT_BACKGROUND", OptionKind::kBool, "1", evict_background,
           "the policy thread's planned evictions are written by the pager's writer thread while "
           "the round goes on (settled before the next round and before relief counts DRAM); 0: "
           "each round waits for its writes"),
    TM_OPT("TIERMEM_RELIEF_BACKGROUND", OptionKind::kBool, "0", relief_background,
           "budget relief's evictions written in the background too (with "
           "TIERMEM_EVICT_BACKGROUND=1): relief queues its victims and goes on, counting DRAM less "
           "the pages still being written, and a fault held back for room is woken as their writes "
           "finish: shorter waits for room, but a latency-sensitive program's tail may grow "
           "(docs/tiering.md, \"Relief's writes\"); 0: relief waits for each batch's writes"),
    TM_OPT("TIERMEM_POLICY_CPU", OptionKind::kUint, "0", policy_cpu,
           "percent of one CPU the policy thread may use, its rounds and budget relief together: "
           "after a costly round the next waits until the thread is back within it (relief is "
           "never held back). Fewer rounds confirm fewer victims: with several GiB, 5 together "
           "with TIERMEM_SCAN_PAGES=32768 (docs/tiering.md). 0: a round every interval",
           .max = 100),
    TM_OPT("TIERMEM_SAMPLE_INTERVAL_MS", OptionKind::kUint, "20", sample_interval_ms,
           "length of a sampling round; the policy plans once per round",
           .min = 1, .max = kOptMaxIntervalMs),
    TM_OPT("TIERMEM_SAMPLE_HALF_LIFE_MS", OptionKind::kUint, "200", sample_half_life_ms,
           "page heat halves in this time without accesses",
           .min = 1),
    TM_OPT("TIERMEM_MIGRATE_RATE", OptionKind::kUint, "100000", migrate_rate,
           "pages per second the policy may migrate (token bucket)",
           .min = 1),
};
#undef TM_OPT

constexpr size_t kTableSize = sizeof(kTable) / sizeof(kTable[0]);

void WarnBadValue(const OptionSpec& spec, const char* value) {
  char shown[64];
  size_t n = strlen(value);
  if (n >= sizeof(shown)) n = sizeof(shown) - 4;
  memcpy(shown, value, n);
  shown[n] = '\0';
  if (strlen(value) != n) strcat(shown, "...");
  char accepted[160];
  DescribeAccepted(spec, accepted, sizeof(accepted));
  TM_LOG_WARN("%s=\"%s\" is not a valid value (expected %s); using the default \"%s\"", spec.env,
              shown, accepted, spec.default_value);
}

// Whether `value` is one of the '|'-separated `choices` (both in lower case).
bool IsChoice(const char* choices, const char* value) {
  const size_t n = strlen(value);
  for (const char* c = choices;;) {
    const char* bar = strchr(c, '|');
    const size_t len = bar != nullptr ? static_cast<size_t>(bar - c) : strlen(c);
    if (len == n && strncmp(c, value, n) == 0) return true;
    if (bar == nullptr) return false;
    c = bar + 1;
  }
}

// A number within the entry's range (0 too where 0 means "by default").
bool InRange(const OptionSpec& spec, uint64_t v) {
  return (v >= spec.min && v <= spec.max) || (spec.zero_ok && v == 0);
}

// kString: fits the field, then is one of its choices or passes its check; the field gets the
// canonical form (the choice's lower case, or what the check rewrote).
bool SetString(char* field, const OptionSpec& spec, const char* value) {
  char text[sizeof(OptionValues::remote)];
  static_assert(sizeof(text) >= sizeof(OptionValues::token) && sizeof(text) >= sizeof(OptionValues::stats));
  const size_t n = strlen(value);
  if (n + 1 > spec.capacity || n + 1 > sizeof(text)) return false;
  memcpy(text, value, n + 1);
  if (spec.choices != nullptr) {
    LowerAscii(text);
    if (!IsChoice(spec.choices, text)) return false;
  }
  if (spec.check != nullptr && !spec.check(text)) return false;
  memcpy(field, text, n + 1);
  return true;
}

}  // namespace

RemoteFullPolicy RemoteFullPolicyOf(const OptionValues& o) {
  return strcmp(o.on_remote_full, "fail") == 0 ? RemoteFullPolicy::kFail : RemoteFullPolicy::kOvercommit;
}

const OptionSpec* OptionTable(size_t* count) {
  *count = kTableSize;
  return kTable;
}

bool ParseUint(const char* text, uint64_t* out) {
  if (text == nullptr || *text == '\0') return false;
  uint64_t v = 0;
  for (const char* p = text; *p; ++p) {
    if (*p < '0' || *p > '9') return false;
    uint64_t d = static_cast<uint64_t>(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

bool ParseSize(const char* text, uint64_t* out) {
  if (text == nullptr) return false;
  const char* p = text;
  while (*p == ' ') ++p;
  if (*p < '0' || *p > '9') return false;
  // Integer part, then an optional fraction (for 1.5G); computed in units of 1/1000.
  uint64_t whole = 0;
  while (*p >= '0' && *p <= '9') {
    uint64_t d = static_cast<uint64_t>(*p - '0');
    if (whole > (UINT64_MAX - d) / 10) return false;
    whole = whole * 10 + d;
    ++p;
  }
  uint64_t frac = 0, frac_div = 1;
  if (*p == '.') {
    ++p;
    if (*p < '0' || *p > '9') return false;
    while (*p >= '0' && *p <= '9') {
      if (frac_div < 1000000) {
        frac = frac * 10 + static_cast<uint64_t>(*p - '0');
        frac_div *= 10;
      }
      ++p;
    }
  }
  uint64_t mult = 1;
  switch (*p) {
    case 'k': case 'K': mult = 1ull << 10; ++p; break;
    case 'm': case 'M': mult = 1ull << 20; ++p; break;
    case 'g': case 'G': mult = 1ull << 30; ++p; break;
    case 't': case 'T': mult = 1ull << 40; ++p; break;
    default: break;
  }
  if (mult > 1 && (*p == 'i' || *p == 'I')) ++p;
  if (*p == 'b' || *p == 'B') ++p;
  while (*p == ' ') ++p;
  if (*p != '\0') return false;
  if (frac != 0 && mult == 1) return false;  // "1.5" bytes makes no sense
  if (whole > UINT64_MAX / mult) return false;
  uint64_t v = whole * mult;
  uint64_t f = frac * mult / frac_div;  // frac < 10^6 and mult <= 2^40: no overflow
  if (v > UINT64_MAX - f) return false;
  *out = v + f;
  return true;
}

bool ParseBool(const char* text, bool* out) {
  if (text == nullptr) return false;
  static const char* kTrue[] = {"1", "true", "yes", "on"};
  static const char* kFalse[] = {"0", "false", "no", "off"};
  for (const char* t : kTrue) {
    if (strcasecmp(text, t) == 0) {
      *out = true;
      return true;
    }
  }
  for (const char* f : kFalse) {
    if (strcasecmp(text, f) == 0) {
      *out = false;
      return true;
    }
  }
  return false;
}

bool SetOption(OptionValues* out, const OptionSpec& spec, const char* value) {
  char* field = reinterpret_cast<char*>(out) + spec.offset;
  switch (spec.kind) {
    case OptionKind::kSize: {
      uint64_t v;
      if (!ParseSize(value, &v) || !InRange(spec, v)) return false;
      memcpy(field, &v, sizeof(v));
      return true;
    }
    case OptionKind::kUint: {
      uint64_t v;
      if (!ParseUint(value, &v) || !InRange(spec, v)) return false;
      memcpy(field, &v, sizeof(v));
      return true;
    }
    case OptionKind::kBool: {
      bool v;
      if (!ParseBool(value, &v)) return false;
      memcpy(field, &v, sizeof(v));
      return true;
    }
    case OptionKind::kString:
      return SetString(field, spec, value);
    case OptionKind::kLogLevel: {
      static const char* kNames[] = {"error", "warn", "info", "debug"};
      for (int i = 0; i < 4; ++i) {
        if (strcasecmp(value, kNames[i]) == 0) {
          LogLevel l = static_cast<LogLevel>(i);
          memcpy(field, &l, sizeof(l));
          return true;
        }
      }
      if (strcasecmp(value, "warning") == 0) {
        LogLevel l = LogLevel::kWarn;
        memcpy(field, &l, sizeof(l));
        return true;
      }
      return false;
    }
  }
  return false;
}

namespace {

// A number of bytes the way a size is written: "64M" where it is a whole number of a suffix.
void FormatSize(uint64_t v, char* buf, size_t size) {
  static const char kSuffix[] = {'T', 'G', 'M', 'K'};
  for (int i = 0; i < 4; ++i) {
    const uint64_t unit = 1ull << (10 * (4 - i));
    if (v != 0 && v % unit == 0) {
      snprintf(buf, size, "%llu%c", static_cast<unsigned long long>(v / unit), kSuffix[i]);
      return;
    }
  }
  snprintf(buf, size, "%llu", static_cast<unsigned long long>(v));
}

}  // namespace

void DescribeAccepted(const OptionSpec& spec, char* buf, size_t size) {
  if (size == 0) return;
  switch (spec.kind) {
    case OptionKind::kBool:
      snprintf(buf, size, "1/0, true/false, yes/no or on/off");
      return;
    case OptionKind::kLogLevel:
      snprintf(buf, size, "error, warn, info or debug");
      return;
    case OptionKind::kString:
      if (spec.choices != nullptr) {
        snprintf(buf, size, "one of %s", spec.choices);
      } else if (spec.accepts != nullptr) {
        snprintf(buf, size, "%s; at most %zu characters", spec.accepts, spec.capacity - 1);
      } else {
        snprintf(buf, size, "at most %zu characters", spec.capacity - 1);
      }
      return;
    case OptionKind::kSize:
    case OptionKind::kUint: {
      const bool size_kind = spec.kind == OptionKind::kSize;
      char lo[32], hi[32];
      if (size_kind) {
        FormatSize(spec.min, lo, sizeof(lo));
        FormatSize(spec.max, hi, sizeof(hi));
      } else {
        snprintf(lo, sizeof(lo), "%llu", static_cast<unsigned long long>(spec.min));
        snprintf(hi, sizeof(hi), "%llu", static_cast<unsigned long long>(spec.max));
      }
      const char* what = size_kind ? "a size (K/M/G/T suffixes)" : "a whole number";
      const char* zero = spec.zero_ok && spec.min > 0 ? "0 or " : "";
      if (spec.max == UINT64_MAX && spec.min == 0) {
        snprintf(buf, size, "%s", what);
      } else if (spec.max == UINT64_MAX) {
        snprintf(buf, size, "%s%s of at least %s", zero, what, lo);
      } else {
        snprintf(buf, size, "%s%s from %s to %s", zero, what, lo, hi);
      }
      return;
    }
  }
  snprintf(buf, size, "?");
}

void LoadDefaultOptions(OptionValues* out) {
  memset(out, 0, sizeof(*out));
  for (const OptionSpec& spec : kTable) {
    bool ok = SetOption(out, spec, spec.default_value);
    (void)ok;  // defaults are valid by construction (checked by options_test)
  }
}

void LoadOptionsFromEnv(OptionValues* out) {
  LoadDefaultOptions(out);
  // TIERMEM_LOG first, so that warnings about the others obey it.
  for (const OptionSpec& spec : kTable) {
    if (spec.kind != OptionKind::kLogLevel) continue;
    const char* v = os::GetEnv(spec.env);
    if (v != nullptr && !SetOption(out, spec, v)) WarnBadValue(spec, v);
    SetLogLevel(out->log_level);
  }
  for (const OptionSpec& spec : kTable) {
    if (spec.kind == OptionKind::kLogLevel) continue;
    const char* v = os::GetEnv(spec.env);
    if (v != nullptr && !SetOption(out, spec, v)) WarnBadValue(spec, v);
  }
  // Unknown TIERMEM_* names are most likely typos: say so once each.
  if (environ == nullptr) return;
  for (char** e = environ; *e != nullptr; ++e) {
    if (strncmp(*e, "TIERMEM_", 8) != 0) continue;
    const char* eq = strchr(*e, '=');
    if (eq == nullptr) continue;
    size_t n = static_cast<size_t>(eq - *e);
    bool known = false;
    for (const OptionSpec& spec : kTable) {
      if (strlen(spec.env) == n && strncmp(spec.env, *e, n) == 0) known = true;
    }
    // Variables owned by other components (tests, tools) start with these prefixes.
    if (strncmp(*e, "TIERMEM_TEST_", 13) == 0) known = true;
    if (!known) {
      char name[64];
      size_t m = n < sizeof(name) - 1 ? n : sizeof(name) - 1;
      memcpy(name, *e, m);
      name[m] = '\0';
      TM_LOG_WARN("%s is not a tiermem option; ignored (see `tiermemctl options`)", name);
    }
  }
}

std::string PathForProcess(const std::string& path_template, int pid) {
  std::string path;
  for (size_t i = 0; i < path_template.size(); ++i) {
    if (path_template[i] == '%' && i + 1 < path_template.size() && path_template[i + 1] == 'p') {
      path += std::to_string(pid);
      ++i;
    } else {
      path += path_template[i];
    }
  }
  return path;
}

}  // namespace tiermem
