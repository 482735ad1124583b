#include "base/exit_files.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/os.h"

namespace tiermem {
namespace {

constexpr int kMaxFiles = 16;
char g_files[kMaxFiles][64];
std::mutex g_mu;
bool g_atexit_installed = false;

}  // namespace

void AddExitFile(const char* path) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& p : g_files) {
    if (p[0] == '\0') {
      snprintf(p, sizeof(p), "%s", path);
      break;
    }
  }
  if (!g_atexit_installed) {
    g_atexit_installed = true;
    atexit(RemoveExitFiles);
  }
}

void ForgetExitFile(const char* path) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& p : g_files) {
    if (strcmp(p, path) == 0) p[0] = '\0';
  }
}

void ForgetAllExitFiles() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& p : g_files) p[0] = '\0';
}

void RemoveExitFiles() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& p : g_files) {
    if (p[0] != '\0') os::Unlink(p);
    p[0] = '\0';
  }
}

}  // namespace tiermem
