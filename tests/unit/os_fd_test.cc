// base/os_fd.cc: the runtime's descriptors live at or above KeepHighFloor, where a program's
// double close of a low number cannot reach them; the /proc/self files read round after round
// are opened once per process, read afresh at each call, and a forked child opens its own.
// WaitAnyReady (base/os.cc) with a spin: what it returns and that its timeout still holds.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "base/os.h"

namespace tiermem {
namespace {

TEST(KeepHigh, MovesADescriptorAboveTheFloorAndClosesTheLowNumber) {
  const int floor = os::KeepHighFloor();
  if (floor == 0) GTEST_SKIP() << "RLIMIT_NOFILE under 256: nothing is moved";
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const int low = p[0];
  ASSERT_LT(low, floor);
  const int high = os::KeepHigh(low);
  EXPECT_GE(high, floor);
  EXPECT_EQ(fcntl(low, F_GETFD), -1) << "the low number stays open";
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(fcntl(high, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  // The same pipe: what is written reaches the moved end.
  ASSERT_EQ(write(p[1], "x", 1), 1);
  char c = 0;
  ASSERT_EQ(read(high, &c, 1), 1);
  EXPECT_EQ(c, 'x');
  // Already high, or nothing: left as it is.
  EXPECT_EQ(os::KeepHigh(high), high);
  EXPECT_EQ(os::KeepHigh(-1), -1);
  close(high);
  close(p[1]);
}

TEST(KeepHigh, FloorFollowsTheSoftLimit) {
  rlimit r{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &r), 0);
  const int floor = os::KeepHighFloor();
  if (r.rlim_cur < 256) {
    EXPECT_EQ(floor, 0);
  } else {
    EXPECT_GE(floor, 192);
    EXPECT_LE(floor, 1024);
    EXPECT_LT(rlim_t(floor), r.rlim_cur);
  }
}

TEST(KeepHigh, RuntimeDescriptorsAreCreatedAboveTheFloor) {
  const int floor = os::KeepHighFloor();
  if (floor == 0) GTEST_SKIP() << "RLIMIT_NOFILE under 256: nothing is moved";
  auto ev = os::EventFd();
  ASSERT_TRUE(ev.ok());
  EXPECT_GE(*ev, floor);
  int sp[2];
  ASSERT_EQ(os::SocketPairCloexec(sp), 0);
  EXPECT_GE(sp[0], floor);
  EXPECT_GE(sp[1], floor);
  // A descriptor passed over the pair arrives high too.
  ASSERT_EQ(os::SendFd(sp[0], *ev), 0);
  const int got = os::RecvFd(sp[1]);
  EXPECT_GE(got, floor);
  const int pm = os::PagemapOpen();
  EXPECT_GE(pm, floor);
  for (int fd : {*ev, sp[0], sp[1], got, pm}) close(fd);
}

TEST(ProcSelfFile, StatmIsOpenedOnceAndReadAfreshAfterAProgramsDoubleClose) {
  const uint64_t before = os::ProcessResidentBytes();
  ASSERT_GT(before, 0u);
  const int fd = os::ProcSelfFile(os::ProcSelf::kStatm);
  ASSERT_GE(fd, 0);
  if (os::KeepHighFloor() != 0) {
    EXPECT_GE(fd, os::KeepHighFloor());
  }
  // The program closes a low number twice: the kept descriptor is untouched.
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  close(p[0]);
  close(p[0]);
  close(p[1]);
  // Touching memory shows in the next read (the file is read from its start each time).
  const size_t bytes = 64u << 20;
  std::vector<char> touch(bytes);
  for (size_t i = 0; i < bytes; i += 4096) touch[i] = char(i);
  const uint64_t after = os::ProcessResidentBytes();
  EXPECT_GE(after, before + bytes / 2);
  EXPECT_EQ(os::ProcSelfFile(os::ProcSelf::kStatm), fd);
}

TEST(ProcSelfFile, AForkedChildReadsItsOwnStatm) {
  ASSERT_GT(os::ProcessResidentBytes(), 0u);  // the parent's file is open
  const int parent_fd = os::ProcSelfFile(os::ProcSelf::kStatm);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child's own file: a fresh descriptor (the parent's copy closed), naming the child.
    const int fd = os::ProcSelfFile(os::ProcSelf::kStatm);
    char path[64], want[64], link[256] = {};
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    snprintf(want, sizeof(want), "/proc/%d/statm", int(getpid()));
    const bool own = fd >= 0 && readlink(path, link, sizeof(link) - 1) > 0 && strcmp(link, want) == 0;
    _exit(own && os::ProcessResidentBytes() > 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child read its parent's statm";
  EXPECT_EQ(os::ProcSelfFile(os::ProcSelf::kStatm), parent_fd);
}

TEST(WaitAnyReady, ASpinReturnsTheReadyDescriptorAsASleepWould) {
  auto a = os::EventFd(), b = os::EventFd();
  ASSERT_TRUE(a.ok() && b.ok());
  const int fds[2] = {*a, *b};
  os::EventFdSignal(*b);
  for (uint64_t spin : {uint64_t{0}, uint64_t{50'000'000}}) {
    bool slept = false;
    auto got = os::WaitAnyReady(fds, nullptr, 2, -1, spin, &slept);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, 1) << "spin " << spin;
    // Found ready while spinning: no poll that may sleep. Without a spin the one poll may.
    EXPECT_EQ(slept, spin == 0) << "spin " << spin;
  }
  // Signalled by another thread while the waiter spins (or, past the spin, sleeps).
  os::EventFdClear(*b);
  std::thread signaller([&] { os::EventFdSignal(*a); });
  auto got = os::WaitAnyReady(fds, nullptr, 2, -1, 1'000'000);
  signaller.join();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, 0);
  close(*a);
  close(*b);
}

TEST(WaitAnyReady, TheTimeoutEndsASpinLongerThanIt) {
  auto a = os::EventFd();
  ASSERT_TRUE(a.ok());
  const int fds[1] = {*a};
  // A spin of ten minutes under a timeout of 5 ms: nothing ready, so -1 once the timeout passes
  // (a spin that ignored the timeout would hold the test past its ctest limit).
  bool slept = true;
  auto got = os::WaitAnyReady(fds, nullptr, 1, 5, 600'000'000'000ull, &slept);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, -1);
  EXPECT_FALSE(slept) << "the spin lasted the whole timeout";
  close(*a);
}

}  // namespace
}  // namespace tiermem
