// A small logger: one line per message to stderr, "tiermem: <level>: <message>". Level from
// TIERMEM_LOG (error, warn, info, debug; default warn). Formats into a stack buffer and writes
// with one write(2): no allocation, safe inside malloc and signal-free threads.
#pragma once

#include <cstdarg>

namespace tiermem {

enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
bool LogEnabled(LogLevel level);
void Log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void VLog(LogLevel level, const char* fmt, va_list ap);

}  // namespace tiermem

#define TM_LOG_ERROR(...) ::tiermem::Log(::tiermem::LogLevel::kError, __VA_ARGS__)
#define TM_LOG_WARN(...) ::tiermem::Log(::tiermem::LogLevel::kWarn, __VA_ARGS__)
#define TM_LOG_INFO(...) \
  do { if (::tiermem::LogEnabled(::tiermem::LogLevel::kInfo)) ::tiermem::Log(::tiermem::LogLevel::kInfo, __VA_ARGS__); } while (0)
#define TM_LOG_DEBUG(...) \
  do { if (::tiermem::LogEnabled(::tiermem::LogLevel::kDebug)) ::tiermem::Log(::tiermem::LogLevel::kDebug, __VA_ARGS__); } while (0)
