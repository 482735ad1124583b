#pragma once

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

#include <dirent.h>
#include <sys/types.h>

namespace tiermem::testing {

// Writes a pattern that depends on the address and a seed, one 64-bit word at a time.
inline void FillPattern(void* p, size_t bytes, uint64_t seed) {
  auto* w = static_cast<uint64_t*>(p);
  for (size_t i = 0; i < bytes / 8; ++i) w[i] = (i * 0x9E3779B97F4A7C15ull) ^ seed;
}

// Index of the first word that differs from the pattern, or SIZE_MAX.
inline size_t CheckPattern(const void* p, size_t bytes, uint64_t seed) {
  auto* w = static_cast<const uint64_t*>(p);
  for (size_t i = 0; i < bytes / 8; ++i) {
    if (w[i] != ((i * 0x9E3779B97F4A7C15ull) ^ seed)) return i;
  }
  return SIZE_MAX;
}

// Polls `pred` every 10 ms for at most `seconds`; returns whether it held. Tests then assert on
// state, never on time.
template <class F>
bool WaitFor(F pred, int seconds) {
  for (int i = 0; i < seconds * 100; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// Whether thread `tid` of this process is asleep (blocked in the kernel: state S or D in
// /proc/self/task/<tid>/stat), to tell a thread that waits from one not yet scheduled.
inline bool ThreadAsleep(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string stat;
  std::getline(f, stat);
  const size_t paren = stat.rfind(')');  // the name may hold spaces and parentheses
  return paren != std::string::npos && paren + 2 < stat.size() &&
         (stat[paren + 2] == 'S' || stat[paren + 2] == 'D');
}

// State letter of /proc/<pid>/task/<tid>/stat, or 0 when it cannot be read (the thread is gone).
inline char TaskState(pid_t pid, const std::string& tid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + tid + "/stat");
  std::string stat;
  std::getline(f, stat);
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : 0;
}

// Sends SIGSTOP to `pid` and waits (at most 60 s) until every thread of it is stopped: kill()
// returns before the signal takes effect, and a process still running on the other core can
// answer a request or two sent after the call. Returns whether it stopped.
inline bool StopProcess(pid_t pid) {
  if (kill(pid, SIGSTOP) != 0) return false;
  return WaitFor(
      [pid] {
        DIR* d = opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
        if (d == nullptr) return false;
        bool all = true, any = false;
        while (dirent* e = readdir(d)) {
          if (e->d_name[0] == '.') continue;
          const char s = TaskState(pid, e->d_name);
          if (s == 0) continue;  // a thread that exited meanwhile
          any = true;
          all = all && (s == 'T' || s == 't');
        }
        closedir(d);
        return any && all;
      },
      60);
}

inline uint64_t Checksum(const void* p, size_t bytes) {
  auto* w = static_cast<const uint64_t*>(p);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes / 8; ++i) h = (h ^ w[i]) * 1099511628211ull;
  return h;
}

}  // namespace tiermem::testing
