#include "base/log.h"

#include <atomic>
#include <cstdio>

#include "base/os.h"

namespace tiermem {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};
const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kInfo: return "info";
    case LogLevel::kDebug: return "debug";
  }
  return "?";
}
}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }
bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed);
}

void VLog(LogLevel level, const char* fmt, va_list ap) {
  if (!LogEnabled(level)) return;
  char buf[1024];
  int n = snprintf(buf, sizeof(buf), "tiermem: %s: ", LevelName(level));
  if (n < 0) return;
  int m = vsnprintf(buf + n, sizeof(buf) - static_cast<size_t>(n) - 1, fmt, ap);
  if (m < 0) return;
  size_t len = static_cast<size_t>(n) + static_cast<size_t>(m);
  if (len > sizeof(buf) - 2) len = sizeof(buf) - 2;
  buf[len++] = '\n';
  (void)os::WriteAll(2, buf, len);
}

void Log(LogLevel level, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  VLog(level, fmt, ap);
  va_end(ap);
}

}  // namespace tiermem
