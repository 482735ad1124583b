#include "bench/timeline.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

extern char** environ;

namespace tiermem::bench {
namespace {

std::string Tiermemctl() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = 0;
    std::string dir(self);
    dir = dir.substr(0, dir.rfind('/'));
    for (const char* rel : {"/../tools/tiermemctl", "/tiermemctl"}) {
      std::string p = dir + rel;
      if (access(p.c_str(), X_OK) == 0) return p;
    }
  }
  return "tiermemctl";
}

}  // namespace

void AddTimeline(Options& o, const std::string& prefix, const std::string& setup) {
  if (prefix.empty()) return;
  o.Set("stats", prefix + "-" + setup + ".jsonl").Set("stats_interval_ms", 1000);
}

void PlotTimeline(const std::string& prefix, const std::string& setup) {
  if (prefix.empty()) return;
  const std::string in = prefix + "-" + setup + ".jsonl", out = prefix + "-" + setup + ".png";
  std::string bin = Tiermemctl();
  std::vector<std::string> args = {bin, "plot", in, "-o", out};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // plot's line ("N points ... drawn to ...") goes to stderr: stdout is the benchmark's JSON.
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, 2, 1);
  pid_t pid = 0;
  int status = 0;
  const bool spawned = posix_spawnp(&pid, bin.c_str(), &files, nullptr, argv.data(), environ) == 0;
  posix_spawn_file_actions_destroy(&files);
  if (!spawned || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "tiermem-bench: no plot of %s (tiermemctl plot failed)\n", in.c_str());
  }
}

}  // namespace tiermem::bench
