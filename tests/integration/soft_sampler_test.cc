// The soft sampler (runtime/paging/soft_sampler.h) driven directly, with the policy thread off:
// armed pages leave the page tables and their bytes wait in a copy; a read or write by the
// program, or by the kernel for a system call (read(2), write(2), send(2), recv(2)), puts the
// page back with the right bytes and is reported with its kind; untouched pages come back whole
// at Collect, or stay armed when kept; freeing, discarding, moving and fork() with pages armed
// lose nothing and hang nothing; threads using their buffers under constant arming see every
// byte they wrote.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "base/os.h"
#include "runtime/pages/page_table.h"
#include "runtime/core/runtime_impl.h"
#include "runtime/paging/pager.h"
#include "tests/integration/remote_memd_fixture.h"
#include "tests/integration/test_util.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

using testing::CheckPage;
using testing::FillPage;
using testing::MemdProcess;

constexpr size_t kPage = 4096;

struct Rig {
  MemdProcess memd;
  std::unique_ptr<Runtime> rt;
  AccessSampler* sampler = nullptr;
  int pagemap = -1;
  bool Start() {
    if (!memd.Start({"--capacity", "256M", "--no-rdma"})) return false;
    Options o;
    o.Set("remote", memd.url());
    o.Set("sample_mode", "off");  // no policy thread: the test arms and collects
    o.Set("prefetch", "off");
    auto r = Runtime::Start(o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return false;
    rt = std::move(*r);
    Pager* p = ImplOf(*rt)->pager();
    if (p == nullptr) return false;
    sampler = p->sampler();
    pagemap = os::PagemapOpen();
    return sampler != nullptr;
  }
  ~Rig() {
    if (pagemap >= 0) os::Close(pagemap);
  }
  uint8_t* Alloc(size_t pages, uint64_t salt) {
    auto a = rt->Allocate(pages * kPage, Tier::kDram);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    if (!a.ok()) return nullptr;
    auto* b = static_cast<uint8_t*>(*a);
    for (size_t i = 0; i < pages; ++i) FillPage(b + i * kPage, salt + i);
    return b;
  }
  bool Present(const void* p) {
    uint64_t e = 0;
    return os::ReadPagemap(pagemap, p, 1, &e) && (e >> 63) != 0;
  }
  const PageRecord& Record(const void* p) {
    Region* r = ImplOf(*rt)->RegionOf(p);
    return r->record(r->PageIndex(p));
  }
};

std::vector<char*> PagesOf(uint8_t* base, size_t pages) {
  std::vector<char*> v;
  for (size_t i = 0; i < pages; ++i) v.push_back(reinterpret_cast<char*>(base + i * kPage));
  return v;
}

#define START_RIG(rig)                                                            \
  Rig rig;                                                                        \
  if (!rig.Start()) {                                                             \
    if (rig.rt && ImplOf(*rig.rt)->pager() != nullptr) {                          \
      GTEST_SKIP() << "no soft sampler here (userfaultfd write-protect missing)"; \
    }                                                                             \
    FAIL() << "runtime with a memd did not start";                                \
  }

TEST(SoftSampler, ArmedPagesLeaveAndComeBackWithTheirBytesAndKinds) {
  START_RIG(rig);
  constexpr size_t kPages = 64;
  uint8_t* b = rig.Alloc(kPages, 100);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(rig.sampler->Arm(PagesOf(b, kPages)), kPages);
  for (size_t i = 0; i < kPages; ++i) {
    EXPECT_FALSE(rig.Present(b + i * kPage)) << "page " << i << " still mapped while armed";
    EXPECT_TRUE(rig.Record(b + i * kPage).flags.load() & kPageSampled);
  }
  // Page 3 read, page 7 written, the rest untouched. The write is a plain store, so that its
  // fault is a write whatever the compiler makes of it (an instrumented `^=` reads first).
  EXPECT_TRUE(CheckPage(b + 3 * kPage, 103));
  uint8_t page7[kPage];
  FillPage(page7, 107);
  b[7 * kPage + 8] = static_cast<uint8_t>(page7[8] ^ 0xff);
  std::vector<AccessSample> got;
  std::vector<uint64_t> untouched;
  rig.sampler->Collect(1, &got, &untouched);
  ASSERT_EQ(got.size(), 2u);
  const uint64_t key3 = reinterpret_cast<uintptr_t>(b + 3 * kPage) / kPage;
  for (const AccessSample& s : got) {
    EXPECT_EQ(s.write, s.page != key3) << "page " << s.page - key3 + 3;
  }
  EXPECT_EQ(untouched.size(), kPages - 2);
  b[7 * kPage + 8] = page7[8];
  for (size_t i = 0; i < kPages; ++i) {
    EXPECT_TRUE(rig.Present(b + i * kPage)) << "page " << i << " not put back";
    EXPECT_TRUE(CheckPage(b + i * kPage, 100 + i)) << "page " << i;
    EXPECT_EQ(rig.Record(b + i * kPage).state.load(), static_cast<uint8_t>(PageState::kLocal));
    EXPECT_FALSE(rig.Record(b + i * kPage).flags.load() & kPageSampled);
  }
  EXPECT_EQ(rig.sampler->counters().touched, 2u);
  ASSERT_TRUE(rig.rt->Free(b).ok());
}

TEST(SoftSampler, SystemCallsOnArmedBuffersSucceedWithTheRightBytes) {
  START_RIG(rig);
  constexpr size_t kPages = 8;
  uint8_t* src = rig.Alloc(kPages, 200);
  uint8_t* dst = rig.Alloc(kPages, 300);
  ASSERT_TRUE(src != nullptr && dst != nullptr);
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  ASSERT_EQ(fcntl(pipefd[1], F_SETPIPE_SZ, 1 << 20), 1 << 20);
  std::vector<char*> all = PagesOf(src, kPages);
  for (char* p : PagesOf(dst, kPages)) all.push_back(p);
  ASSERT_EQ(rig.sampler->Arm(all), 2 * kPages);
  // write(2) from armed pages 0-1, read(2) into armed pages 0-1 of dst; send/recv pages 2-3.
  ASSERT_EQ(write(pipefd[1], src, 2 * kPage), static_cast<ssize_t>(2 * kPage)) << strerror(errno);
  ASSERT_EQ(read(pipefd[0], dst, 2 * kPage), static_cast<ssize_t>(2 * kPage)) << strerror(errno);
  ASSERT_EQ(send(fds[0], src + 2 * kPage, 2 * kPage, 0), static_cast<ssize_t>(2 * kPage)) << strerror(errno);
  size_t got_bytes = 0;
  while (got_bytes < 2 * kPage) {
    ssize_t r = recv(fds[1], dst + 2 * kPage + got_bytes, 2 * kPage - got_bytes, 0);
    ASSERT_GT(r, 0) << strerror(errno);
    got_bytes += static_cast<size_t>(r);
  }
  std::vector<AccessSample> got;
  rig.sampler->Collect(1, &got);
  // Kernel reads of src pages 0-3, kernel writes into dst pages 0-3.
  size_t reads = 0, writes = 0;
  for (const AccessSample& s : got) (s.write ? writes : reads) += 1;
  EXPECT_EQ(reads, 4u);
  EXPECT_EQ(writes, 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(CheckPage(dst + i * kPage, 200 + i)) << "dst page " << i;
  for (size_t i = 4; i < kPages; ++i) EXPECT_TRUE(CheckPage(dst + i * kPage, 300 + i)) << "dst page " << i;
  for (size_t i = 0; i < kPages; ++i) EXPECT_TRUE(CheckPage(src + i * kPage, 200 + i)) << "src page " << i;
  close(fds[0]);
  close(fds[1]);
  close(pipefd[0]);
  close(pipefd[1]);
}

TEST(SoftSampler, KeptPagesStayArmedAcrossRoundsUntilTouched) {
  START_RIG(rig);
  constexpr size_t kPages = 16;
  uint8_t* b = rig.Alloc(kPages, 400);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(rig.sampler->Arm(PagesOf(b, kPages)), kPages);
  std::vector<AccessSample> got;
  std::vector<uint64_t> untouched;
  rig.sampler->Collect(1, &got, &untouched, [](uint64_t) { return true; });
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(untouched.size(), kPages);
  EXPECT_EQ(rig.sampler->carried(), kPages);
  EXPECT_FALSE(rig.Present(b));
  // The next round carries them; a touch now is reported at its end.
  EXPECT_TRUE(CheckPage(b + 5 * kPage, 405));
  EXPECT_EQ(rig.sampler->Arm({}), kPages - 1);
  got.clear();
  rig.sampler->Collect(2, &got);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].page, reinterpret_cast<uintptr_t>(b + 5 * kPage) / kPage);
  for (size_t i = 0; i < kPages; ++i) EXPECT_TRUE(CheckPage(b + i * kPage, 400 + i)) << "page " << i;
}

TEST(SoftSampler, FreeDiscardMoveAndReleaseWithPagesArmed) {
  START_RIG(rig);
  constexpr size_t kPages = 32;
  // Freed while armed: no hang, and the next allocation there reads zeros where untouched.
  uint8_t* a = rig.Alloc(kPages, 500);
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(rig.sampler->Arm(PagesOf(a, kPages)), kPages);
  ASSERT_TRUE(rig.rt->Free(a).ok());
  std::vector<AccessSample> got;
  rig.sampler->Collect(1, &got);
  EXPECT_TRUE(got.empty());
  auto again = rig.rt->Allocate(kPages * kPage, Tier::kDram);
  ASSERT_TRUE(again.ok());
  auto* z = static_cast<uint8_t*>(*again);
  for (size_t i = 0; i < kPages * kPage; i += 512) ASSERT_EQ(z[i], 0) << "byte " << i;
  // Discarded while armed: reads zeros.
  for (size_t i = 0; i < kPages; ++i) FillPage(z + i * kPage, 600 + i);
  ASSERT_EQ(rig.sampler->Arm(PagesOf(z, kPages)), kPages);
  ASSERT_TRUE(ImplOf(*rig.rt)->DiscardPages(z, 4 * kPage).ok());
  for (size_t i = 0; i < 4 * kPage; i += 512) ASSERT_EQ(z[i], 0) << "discarded byte " << i;
  // Moved to the remote tier and back while armed (the runtime releases them first).
  auto m = rig.rt->Migrate(z + 4 * kPage, (kPages - 4) * kPage, Tier::kRemote);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->pages_moved, kPages - 4);
  for (size_t i = 4; i < kPages; ++i) EXPECT_TRUE(CheckPage(z + i * kPage, 600 + i)) << "page " << i;
  got.clear();
  rig.sampler->Collect(2, &got);
  EXPECT_TRUE(got.empty()) << "released pages report no access";
  ASSERT_TRUE(rig.rt->Free(z).ok());
}

TEST(SoftSampler, ForkedChildSeesEveryArmedPageWhole) {
  START_RIG(rig);
  constexpr size_t kPages = 64;
  uint8_t* b = rig.Alloc(kPages, 700);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(rig.sampler->Arm(PagesOf(b, kPages)), kPages);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int bad = 0;
    for (size_t i = 0; i < kPages; ++i) bad += CheckPage(b + i * kPage, 700 + i) ? 0 : 1;
    _exit(bad == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child read a page that was not whole";
  EXPECT_TRUE(rig.sampler->usable()) << "the parent samples again after the fork";
  EXPECT_EQ(rig.sampler->Arm(PagesOf(b, kPages)), kPages);
  rig.sampler->DisarmAll();
  for (size_t i = 0; i < kPages; ++i) EXPECT_TRUE(CheckPage(b + i * kPage, 700 + i)) << "page " << i;
}

// Four threads rewrite their buffers and pass them through a pipe and a socket pair, checking
// every byte, while the main thread arms every page of them, round after round.
TEST(SoftSampler, ThreadsUsingBuffersUnderConstantArmingSeeEveryByte) {
  START_RIG(rig);
  constexpr size_t kThreads = 4, kPages = 32, kRounds = 150;
  std::vector<uint8_t*> bufs;
  for (size_t t = 0; t < kThreads; ++t) bufs.push_back(rig.Alloc(2 * kPages, 1000 * (t + 1)));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0}, ops{0};
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      uint8_t* a = bufs[t];
      uint8_t* c = bufs[t] + kPages * kPage;
      int sv[2], pp[2];
      if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || pipe(pp) != 0) {
        bad.fetch_add(1);
        return;
      }
      for (uint64_t gen = 0; !stop.load(std::memory_order_relaxed); ++gen) {
        const size_t i = gen % kPages;
        FillPage(a + i * kPage, gen, t + 1);  // a plain write
        if (write(pp[1], a + i * kPage, kPage) != static_cast<ssize_t>(kPage)) bad.fetch_add(1);
        if (read(pp[0], c + i * kPage, kPage) != static_cast<ssize_t>(kPage)) bad.fetch_add(1);
        if (!CheckPage(c + i * kPage, gen, t + 1)) bad.fetch_add(1);
        const size_t j = (i + 1) % kPages;
        if (send(sv[0], c + i * kPage, kPage, 0) != static_cast<ssize_t>(kPage)) bad.fetch_add(1);
        size_t n = 0;
        while (n < kPage) {
          ssize_t r = recv(sv[1], a + j * kPage + n, kPage - n, 0);
          if (r <= 0) {
            bad.fetch_add(1);
            break;
          }
          n += static_cast<size_t>(r);
        }
        if (!CheckPage(a + j * kPage, gen, t + 1)) bad.fetch_add(1);
        ops.fetch_add(1, std::memory_order_relaxed);
      }
      close(sv[0]), close(sv[1]), close(pp[0]), close(pp[1]);
    });
  }
  std::vector<char*> all;
  for (uint8_t* b : bufs) {
    for (char* p : PagesOf(b, 2 * kPages)) all.push_back(p);
  }
  uint64_t seen = 0;
  for (size_t r = 0; r < kRounds; ++r) {
    rig.sampler->Arm(all);
    // The threads work on armed pages before the round is collected (however late a loaded
    // machine runs them): a round with no access in it would test nothing.
    const uint64_t ops_at_arm = ops.load();
    const bool worked = testing::WaitFor([&] { return ops.load() >= ops_at_arm + kThreads || bad.load() != 0; }, 60);
    EXPECT_TRUE(worked) << "no operation in 60 s";
    std::vector<AccessSample> got;
    rig.sampler->Collect(r, &got);
    seen += got.size();
  }
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0u) << "wrong bytes or failed system calls in " << ops.load() << " operations";
  EXPECT_GT(ops.load(), kRounds);
  EXPECT_GT(seen, kRounds) << "accesses of armed pages were seen";
  for (uint8_t* b : bufs) ASSERT_TRUE(rig.rt->Free(b).ok());
}

}  // namespace
}  // namespace tiermem
