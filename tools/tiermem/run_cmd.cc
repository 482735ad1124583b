// `tiermem run` (run.h): checks the command line, sets up the environment (the preload library
// and the TIERMEM_* options), starts the program, passes signals on, returns its status.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

#include "tiermem/options.hpp"
#include "tools/tiermem/run.h"

extern char** environ;

namespace tiermem::tools {
namespace {

// Signals passed on to the program. A terminal's ^C or ^\ (si_code SI_KERNEL) already reached
// the program through its process group, so those are not sent twice.
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGALRM};
volatile sig_atomic_t g_child = 0;

void Forward(int sig, siginfo_t* info, void*) {
  const pid_t child = g_child;
  if (child <= 0) return;
  if ((sig == SIGINT || sig == SIGQUIT) && info != nullptr && info->si_code == SI_KERNEL) return;
  kill(child, sig);
}

std::string Hex(size_t bytes) {
  std::ifstream f("/dev/urandom", std::ios::binary);
  std::string out;
  static const char kDigits[] = "0123456789abcdef";
  for (size_t i = 0; i < bytes && f; ++i) {
    const unsigned char c = static_cast<unsigned char>(f.get());
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// The options of this run, checked by the option table: the flags first, then --set (which
// may override them). Refuses a bad name or value, naming it.
bool CollectOptions(const RunArgs& a, Options* o, std::string* error) {
  if (!a.dram_limit.empty()) o->Set("dram_limit", a.dram_limit);
  if (!a.cxl_limit.empty()) o->Set("cxl_limit", a.cxl_limit);
  if (!a.stats.empty()) o->Set("stats", a.stats);
  for (const std::string& kv : a.set) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      *error = "--set " + kv + ": expected NAME=VALUE (see `tiermemctl options`)";
      return false;
    }
    o->Set(std::string_view(kv).substr(0, eq), std::string_view(kv).substr(eq + 1));
  }
  if (!o->status().ok()) {
    *error = o->status().message();
    return false;
  }
  return true;
}

std::string Remotes(const RunArgs& a, const std::map<std::string, std::string>& env, const LocalMemd* memd) {
  std::string out;
  auto add = [&out](const std::string& url) { out += (out.empty() ? "" : ",") + url; };
  auto it = env.find("TIERMEM_REMOTE");  // --set remote=... joins the --remote ones
  if (it != env.end() && !it->second.empty()) add(it->second);
  for (const std::string& r : a.remote) add(r);
  if (memd != nullptr) add(memd->url());
  return out;
}

std::vector<std::string> EnvironmentList(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

// Forks and execs the program with `env`; the caller's signals are forwarded to it.
pid_t Spawn(const std::vector<std::string>& command, const std::vector<std::string>& env) {
  std::vector<char*> argv, envp;
  for (const auto& s : command) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  for (const auto& s : env) envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &old);  // no forward before g_child is set
  const pid_t pid = fork();
  if (pid == 0) {
    for (int sig : kForwarded) signal(sig, SIG_DFL);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    execvpe(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "tiermem run: %s: %s\n", argv[0], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
  }
  if (pid > 0) g_child = pid;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  return pid;
}

int WaitStatus(pid_t pid, uint64_t* peak_rss_bytes) {
  int status = 0;
  struct rusage ru {};
  while (wait4(pid, &status, 0, &ru) < 0) {
    if (errno != EINTR) return 1;
  }
  *peak_rss_bytes = static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // reported in KiB
  g_child = 0;
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

}  // namespace

std::string FindBeside(const std::string& name, const std::vector<std::string>& relative_dirs) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  self[n] = 0;
  std::string dir(self);
  dir = dir.substr(0, dir.rfind('/'));
  for (const std::string& rel : relative_dirs) {
    const std::string p = dir + "/" + rel + (rel.empty() ? "" : "/") + name;
    if (access(p.c_str(), R_OK) == 0) return p;
  }
  return "";
}

// Installed: bin/tiermem beside lib/ (the relative path CMake computed); in the build tree:
// build/tools/tiermem beside build/allocator/preload/ and build/tools/memd/.
std::string FindPreloadLibrary() {
  return FindBeside("libtiermem-preload.so", {TIERMEM_RUN_LIBDIR_FROM_BINDIR, "../allocator/preload"});
}

std::string FindMemd() { return FindBeside("tiermem-memd", {"", "memd"}); }

int RunCommand(const RunArgs& a, RunOutcome* out) {
  Options opts;
  std::string error;
  if (!CollectOptions(a, &opts, &error)) {
    std::fprintf(stderr, "tiermem run: %s\n", error.c_str());
    return 2;
  }
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = strchr(*e, '=');
    if (eq != nullptr) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  for (const auto& [k, v] : opts.values()) env[k] = v;
  const std::string preload = a.preload_lib.empty() ? FindPreloadLibrary() : a.preload_lib;
  if (preload.empty() || access(preload.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "tiermem run: the preload library %s is not there (--preload-lib names it)\n",
                 preload.empty() ? "libtiermem-preload.so" : preload.c_str());
    return 1;
  }
  LocalMemd memd;
  if (!a.local_memd.empty()) {
    uint64_t bytes = 0;
    if (!ParseSize(a.local_memd, &bytes) || bytes == 0) {
      std::fprintf(stderr, "tiermem run: --local-memd %s: expected a size such as 256M or 4G\n", a.local_memd.c_str());
      return 2;
    }
    if (env["TIERMEM_TOKEN"].empty()) env["TIERMEM_TOKEN"] = Hex(16);
    const std::string binary = a.memd_binary.empty() ? FindMemd() : a.memd_binary;
    if (binary.empty() || !memd.Start(binary, a.local_memd, env["TIERMEM_TOKEN"], &error)) {
      std::fprintf(stderr, "tiermem run: --local-memd: %s\n",
                   binary.empty() ? "tiermem-memd is not beside tiermem (--memd names it)" : error.c_str());
      return 1;
    }
  }
  env["TIERMEM_REMOTE"] = Remotes(a, env, a.local_memd.empty() ? nullptr : &memd);
  if (env["TIERMEM_REMOTE"].empty()) env.erase("TIERMEM_REMOTE");
  const std::string old_preload = env["LD_PRELOAD"];
  env["LD_PRELOAD"] = preload + (old_preload.empty() ? "" : ":" + old_preload);
  const bool summary = !a.quiet && env["TIERMEM_STATS"] != "stderr";
  StatsFiles stats(summary ? env["TIERMEM_STATS"] : "stderr");
  if (summary && !stats.env_value().empty()) env["TIERMEM_STATS"] = stats.env_value();

  struct sigaction sa {};
  sa.sa_sigaction = Forward;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : kForwarded) sigaction(sig, &sa, nullptr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = Spawn(a.command, EnvironmentList(env));
  if (pid < 0) {
    std::fprintf(stderr, "tiermem run: fork: %s\n", strerror(errno));
    return 1;
  }
  uint64_t peak = 0;
  const int status = WaitStatus(pid, &peak);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (out != nullptr) *out = RunOutcome{pid, secs, peak};
  memd.Stop();
  if (summary) PrintSummary(stats, pid, a.command[0], status, secs);
  return status;
}

}  // namespace tiermem::tools
