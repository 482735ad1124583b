// fork() with pages on the remote tier: the child reads the fork-time bytes of every remote page
// (served by the parent from the fork-time slots) while the parent rewrites and evicts them again;
// the parent's held slots stay until the child is gone and are freed then; the parent's memory
// does not take the remote data back at the fork; a child that forks again gives its child
// everything; TIERMEM_FORK=fetch keeps the old behaviour (every page back before the fork).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "runtime/core/runtime_impl.h"
#include "runtime/paging/pager.h"
#include "tests/integration/remote_memd_fixture.h"
#include "tiermem/remote.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

using testing::CheckPage;
using testing::FillPage;
using testing::MemdProcess;

constexpr size_t kPage = 4096;
constexpr size_t kPages = 8192;  // 32 MiB

std::unique_ptr<Runtime> StartWith(const std::string& servers, const char* fork_mode = "share",
                                   int replicas = 1) {
  Options o;
  o.Set("remote", servers);
  o.Set("remote_timeout_ms", 3000);
  o.Set("replicas", replicas);
  o.Set("fork", fork_mode);
  auto rt = Runtime::Start(o);
  EXPECT_TRUE(rt.ok()) << rt.status().ToString();
  return rt.ok() ? std::move(*rt) : nullptr;
}

uint64_t ServerPages(Pager& pager) {
  uint64_t n = 0;
  for (const auto& s : pager.server_stats()) n += s.pages;
  return n;
}

uint64_t RssPages() {
  FILE* f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, rss = 0;
  if (f != nullptr) {
    if (fscanf(f, "%lu %lu", &size, &rss) != 2) rss = 0;
    fclose(f);
  }
  return rss;
}

uint64_t ResidentPages(Runtime& rt, void* p, size_t bytes) {
  auto loc = rt.Locate(p, bytes);
  EXPECT_TRUE(loc.ok());
  uint64_t n = 0;
  if (loc.ok()) {
    for (const auto& l : *loc) n += l.resident ? 1 : 0;
  }
  return n;
}

// A memd, and a runtime on it sharing remote pages with its children, holding kPages pages of
// FillPage(i, 1), all evicted; skipped where the kernel gives no userfaultfd fork events.
class RemoteForkShared : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(memd_.Start({"--capacity", "256M", "--no-rdma"}));
    rt_ = StartWith(memd_.url());
    ASSERT_NE(rt_, nullptr);
    pager_ = ImplOf(*rt_)->pager();
    if (!pager_->fork_sharing()) GTEST_SKIP() << "no userfaultfd fork events here (CAP_SYS_PTRACE is needed)";
    auto p = rt_->Allocate(kPages * kPage, Tier::kDram);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    base_ = static_cast<uint8_t*>(*p);
    for (size_t i = 0; i < kPages; ++i) FillPage(base_ + i * kPage, i, 1);
    ASSERT_TRUE(rt_->Migrate(base_, kPages * kPage, Tier::kRemote).ok());
  }
  MemdProcess memd_;
  std::unique_ptr<Runtime> rt_;
  Pager* pager_ = nullptr;
  uint8_t* base_ = nullptr;
};

// Waits (bounded) until the pager has seen the child's end; false when it never did.
bool WaitChildReleased(Pager& pager) {
  for (int i = 0; i < 600; ++i) {
    const Pager::ForkStats st = pager.fork_stats();
    if (st.live == 0 && st.held_slots == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// Pages [0, kPages) of `base` checked against FillPage(i, client): the count that differ.
size_t Mismatches(const uint8_t* base, uint64_t client) {
  size_t bad = 0;
  for (size_t i = 0; i < kPages; ++i) bad += CheckPage(base + i * kPage, i, client) ? 0 : 1;
  return bad;
}

// Forks a child that waits for a byte (Go) and then runs `body`, which ends it. Returns its pid
// (the parent's side; -1 when fork or pipe failed) and the pipe's write end in *go.
template <typename Body>
pid_t ForkWaiting(int* go, Body body) {
  int p[2];
  if (pipe(p) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    uint8_t b = 0;
    if (read(p[0], &b, 1) != 1) _exit(4);
    body();
    _exit(5);
  }
  close(p[0]);
  *go = p[1];
  return pid;
}

bool Go(int go) {
  const uint8_t b = 1;
  const bool ok = write(go, &b, 1) == 1;
  close(go);
  return ok;
}

// The child: reads every page while the parent writes, reports the mismatches through `out`,
// then waits for a byte on `in` before it exits (so the parent can look at a live child's holds).
[[noreturn]] void ChildReadsAll(const uint8_t* base, int in, int out) {
  const size_t bad = Mismatches(base, 1);
  const uint8_t b = bad == 0 ? 0 : 1;
  if (write(out, &b, 1) != 1) _exit(3);
  uint8_t go = 0;
  if (read(in, &go, 1) != 1) _exit(4);
  _exit(bad == 0 ? 0 : 1);
}

void ForkWhileParentRewrites(const std::string& servers, int replicas, std::vector<MemdProcess>& memds) {
  (void)memds;
  auto rt = StartWith(servers, "share", replicas);
  ASSERT_NE(rt, nullptr);
  Pager& pager = *ImplOf(*rt)->pager();
  if (!pager.fork_sharing()) GTEST_SKIP() << "no userfaultfd fork events here (CAP_SYS_PTRACE is needed)";
  auto p = rt->Allocate(kPages * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto* base = static_cast<uint8_t*>(*p);
  for (size_t i = 0; i < kPages; ++i) FillPage(base + i * kPage, i, 1);
  ASSERT_TRUE(rt->Migrate(base, kPages * kPage, Tier::kRemote).ok());
  ASSERT_EQ(ResidentPages(*rt, base, kPages * kPage), 0u);
  const uint64_t pages_before = ServerPages(pager);
  ASSERT_EQ(pages_before, kPages * uint64_t(replicas));

  int to_child[2], from_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(from_child), 0);
  const uint64_t rss_before = RssPages();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ChildReadsAll(base, to_child[0], from_child[1]);
  const uint64_t rss_after_fork = RssPages();
  // Nothing came back for the fork: the data stays remote in the parent.
  EXPECT_EQ(ResidentPages(*rt, base, kPages * kPage), 0u);
  EXPECT_LT(rss_after_fork, rss_before + kPages / 8) << "RSS pages before " << rss_before << ", after " << rss_after_fork;
  Pager::ForkStats st = pager.fork_stats();
  EXPECT_EQ(st.children, 1u);
  EXPECT_EQ(st.held_slots, kPages);

  // The parent writes every page (its own bytes) and evicts them again while the child reads.
  for (size_t i = 0; i < kPages; ++i) FillPage(base + i * kPage, i, 2);
  ASSERT_TRUE(rt->Migrate(base, kPages * kPage, Tier::kRemote).ok());
  uint8_t verdict = 9;
  ASSERT_EQ(read(from_child[0], &verdict, 1), 1);
  EXPECT_EQ(verdict, 0) << "the child saw bytes other than the fork-time ones";
  // The child is alive and may read any page again: its slots were neither reused nor freed.
  EXPECT_EQ(pager.fork_stats().held_slots, kPages);
  EXPECT_EQ(ServerPages(pager), 2 * kPages * uint64_t(replicas));
  const uint8_t go = 1;
  ASSERT_EQ(write(to_child[1], &go, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  ASSERT_TRUE(WaitChildReleased(pager)) << "the child's slots were never released";
  EXPECT_EQ(ServerPages(pager), kPages * uint64_t(replicas)) << "the fork-time copies are freed";
  EXPECT_GE(pager.fork_stats().served, kPages);
  EXPECT_EQ(Mismatches(base, 2), 0u) << "the parent sees its own bytes";
  for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) close(fd);
  EXPECT_TRUE(rt->Free(base).ok());
}

TEST(RemoteFork, ChildSeesForkTimeBytesWhileParentRewrites) {
  std::vector<MemdProcess> memds(1);
  ASSERT_TRUE(memds[0].Start({"--capacity", "256M", "--no-rdma"}));
  ForkWhileParentRewrites(memds[0].url(), 1, memds);
}

TEST(RemoteFork, ChildSeesForkTimeBytesWithTwoReplicas) {
  std::vector<MemdProcess> memds(2);
  for (auto& m : memds) ASSERT_TRUE(m.Start({"--capacity", "256M", "--no-rdma"}));
  ForkWhileParentRewrites(memds[0].url() + "," + memds[1].url(), 2, memds);
}

TEST_F(RemoteForkShared, FreedPagesKeepTheirSlotsUntilTheChildExitsAndAGrandchildGetsEverything) {
  std::unique_ptr<Runtime>& rt = rt_;
  Pager& pager = *pager_;
  uint8_t* const base = base_;
  int to_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    uint8_t go = 0;
    if (read(to_child[0], &go, 1) != 1) _exit(4);
    // The first half read here, then a fork: the grandchild checks everything with no server.
    size_t bad = 0;
    for (size_t i = 0; i < kPages / 2; ++i) bad += CheckPage(base + i * kPage, i, 1) ? 0 : 1;
    const pid_t g = fork();
    if (g < 0) _exit(5);
    if (g == 0) _exit(Mismatches(base, 1) == 0 ? 0 : 1);
    int gs = 0;
    if (waitpid(g, &gs, 0) != g || !WIFEXITED(gs) || WEXITSTATUS(gs) != 0) _exit(6);
    bad += Mismatches(base, 1);
    _exit(bad == 0 ? 0 : 1);
  }
  // The parent frees the data while the child has not read any of it yet.
  ASSERT_TRUE(rt->Free(base).ok());
  EXPECT_EQ(ServerPages(pager), kPages) << "freed pages keep their copies for the child";
  EXPECT_EQ(pager.fork_stats().held_slots, kPages);
  const uint8_t go = 1;
  ASSERT_EQ(write(to_child[1], &go, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  ASSERT_TRUE(WaitChildReleased(pager));
  EXPECT_EQ(ServerPages(pager), 0u) << "the last holder let go: the slots are free";
  close(to_child[0]);
  close(to_child[1]);
}

// The parent's runtime stops while its child has read nothing yet: the child reads every page
// with its fork-time bytes (installed by the parent as it stops, or by the child's own thread),
// and once the child is gone too memd holds no slot.
TEST_F(RemoteForkShared, ChildReadsOnAfterTheParentsRuntimeStopped) {
  uint8_t* const base = base_;
  int go = -1;
  const pid_t pid = ForkWaiting(&go, [base] { _exit(Mismatches(base, 1) == 0 ? 0 : 1); });
  ASSERT_GE(pid, 0);
  pager_ = nullptr;
  rt_.reset();  // its connections closed, its regions gone
  ASSERT_TRUE(Go(go));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  auto client = RemoteClient::Connect(memd_.url(), "");
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  uint64_t reserved = ~uint64_t{0};
  for (int i = 0; i < 200 && reserved != 0; ++i) {  // memd sees the last connection close
    auto st = (*client)->ServerStats();
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    reserved = st->used_pages;
    if (reserved != 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(reserved, 0u) << "slots left on memd with parent and child gone";
}

// A child that calls exec lets go of the fork-time slots (its end of the pipe is close-on-exec)
// while the program it became still runs: the slots the parent freed meanwhile are freed then.
TEST_F(RemoteForkShared, AChildThatExecsLetsGoOfItsSlots) {
  uint8_t* const base = base_;
  int go = -1;
  const pid_t pid = ForkWaiting(&go, [base] {
    for (size_t i = 0; i < kPages / 2; ++i) {
      if (!CheckPage(base + i * kPage, i, 1)) _exit(1);
    }
    execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
  });
  ASSERT_GE(pid, 0);
  ASSERT_TRUE(rt_->Free(base_).ok());
  EXPECT_EQ(ServerPages(*pager_), kPages) << "freed pages keep their copies for the child";
  ASSERT_TRUE(Go(go));
  EXPECT_TRUE(WaitChildReleased(*pager_)) << "the child's exec did not release its slots";
  EXPECT_EQ(ServerPages(*pager_), 0u);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, WNOHANG), 0) << "the child ended (status " << status << ") instead of exec";
  kill(pid, SIGKILL);
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
}

// fork() while other threads fault on remote pages all the time. During a fork the kernel
// refuses UFFDIO_COPY on the parent's descriptor (EAGAIN) until the fork event has been read; a
// fault thread that retried its copy without reading waited for the fork and the fork for it
// (uffd_backlog.h). The watchdog turns that hang into a failure that says so.
TEST_F(RemoteForkShared, ForkWhileOtherThreadsFaultOnRemotePages) {
  std::unique_ptr<Runtime>& rt = rt_;
  Pager& pager = *pager_;
  uint8_t* const base = base_;

  std::atomic<bool> stop{false};
  std::atomic<size_t> bad{0};
  std::atomic<uint64_t> reads{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {  // readers: each page they touch is a remote fault, mostly
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      while (!stop.load(std::memory_order_relaxed)) {
        const size_t i = rng() % kPages;
        if (!CheckPage(base + i * kPage, i, 1)) bad.fetch_add(1);
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  threads.emplace_back([&] {  // sends what the readers brought back to the server again
    std::mt19937_64 rng(99);
    while (!stop.load(std::memory_order_relaxed)) {
      const size_t i = (rng() % (kPages / 64)) * 64;
      (void)rt->Migrate(base + i * kPage, 64 * kPage, Tier::kRemote);
    }
  });
  constexpr int kForks = 30;
  std::atomic<int> forks_done{0};
  std::thread watchdog([&] {
    for (int waited = 0; forks_done.load() < kForks; ++waited) {
      if (waited == 1200) {  // 120 s
        fprintf(stderr, "fork() %d of %d has not returned in 120 s (the fault thread and the fork "
                        "wait for each other)\n", forks_done.load() + 1, kForks);
        kill(memd_.pid(), SIGKILL);  // no destructor runs past _exit
        _exit(2);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  int failed_children = 0;
  for (int f = 0; f < kForks; ++f) {
    const uint64_t seen = reads.load();
    while (reads.load() < seen + 64) std::this_thread::yield();  // faults are being served now
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::mt19937_64 rng(1000 + f);
      size_t wrong = 0;
      for (int k = 0; k < 256; ++k) {
        const size_t i = rng() % kPages;
        wrong += CheckPage(base + i * kPage, i, 1) ? 0 : 1;
      }
      _exit(wrong == 0 ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed_children;
    forks_done.fetch_add(1);
  }
  watchdog.join();
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed_children, 0) << "children saw bytes other than the fork-time ones";
  EXPECT_EQ(bad.load(), 0u) << "the parent's readers saw wrong bytes";
  EXPECT_GE(pager.fork_stats().children, 1u);
  ASSERT_TRUE(WaitChildReleased(pager));
  EXPECT_TRUE(rt->Free(base).ok());
}

TEST(RemoteFork, FetchModeBringsEveryPageBackBeforeTheFork) {
  MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "256M", "--no-rdma"}));
  auto rt = StartWith(memd.url(), "fetch");
  ASSERT_NE(rt, nullptr);
  Pager& pager = *ImplOf(*rt)->pager();
  EXPECT_FALSE(pager.fork_sharing());
  constexpr size_t kFew = 1024;
  auto p = rt->Allocate(kFew * kPage, Tier::kDram);
  ASSERT_TRUE(p.ok());
  auto* base = static_cast<uint8_t*>(*p);
  for (size_t i = 0; i < kFew; ++i) FillPage(base + i * kPage, i, 1);
  ASSERT_TRUE(rt->Migrate(base, kFew * kPage, Tier::kRemote).ok());
  ASSERT_EQ(ResidentPages(*rt, base, kFew * kPage), 0u);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    size_t bad = 0;
    for (size_t i = 0; i < kFew; ++i) bad += CheckPage(base + i * kPage, i, 1) ? 0 : 1;
    _exit(bad == 0 ? 0 : 1);
  }
  EXPECT_EQ(ResidentPages(*rt, base, kFew * kPage), kFew);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_EQ(pager.fork_stats().children, 0u);
}

}  // namespace
}  // namespace tiermem
