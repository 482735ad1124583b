// fork() while other threads allocate: each child allocates and frees (malloc, new, realloc,
// strings), then exits; the parent checks every child's exit status. Output is deterministic.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

int ChildWork(int k) {
  std::vector<std::string> v;
  for (int i = 0; i < 20000; ++i) v.push_back(std::string(static_cast<size_t>(i % 200), 'a' + k % 26));
  void* p = malloc(10);
  for (size_t n = 16; n < (1u << 22); n *= 2) {
    p = realloc(p, n);
    if (p == nullptr) return 2;
    memset(p, 1, n);
  }
  free(p);
  size_t total = 0;
  for (auto& s : v) total += s.size();
  return total == 1990000 ? 0 : 3;
}

int main() {
  std::atomic<bool> stop{false};
  std::vector<std::thread> th;
  for (int t = 0; t < 4; ++t) {
    th.emplace_back([&, t] {
      std::vector<void*> keep(1024);
      unsigned seed = t;
      while (!stop.load()) {
        seed = seed * 1103515245 + 12345;
        size_t i = (seed >> 8) % keep.size();
        free(keep[i]);
        keep[i] = malloc((seed >> 16) % 5000 + 1);
        if ((seed & 0xff) == 0) {
          std::string s(1000, 'x');
          s += std::to_string(seed);
        }
      }
      for (void* p : keep) free(p);
    });
  }
  int ok = 0;
  for (int k = 0; k < 40; ++k) {
    pid_t pid = fork();
    if (pid == 0) _exit(ChildWork(k));
    int status = 0;
    if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0) ++ok;
  }
  stop = true;
  for (auto& t : th) t.join();
  printf("children ok: %d of 40\n", ok);
  return ok == 40 ? 0 : 1;
}
