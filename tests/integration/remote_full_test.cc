// A full memory server through the C++ API (docs/protocol.md, "When the remote tier is full or
// absent"): with TIERMEM_ON_REMOTE_FULL=fail an allocation on the remote tier that the server
// could not take returns its error Status and what was stored reads back intact; with either
// policy, evictions that meet the full server print one warning, not one per call.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/runtime_impl.h"
#include "tests/integration/remote_memd_fixture.h"
#include "tiermem/tiermem.hpp"

namespace tiermem {
namespace {

constexpr size_t kChunk = 1 << 20;
constexpr size_t kPage = 4096;
constexpr size_t kChunkPages = kChunk / kPage;
constexpr const char* kFullLine = "tiermem: warn: remote tier full: no memory server can take more pages (";

// Sends stderr (where the runtime logs) to a file while it lives; Text() reads what came.
class CaptureStderr {
 public:
  CaptureStderr() {
    path_ = "/tmp/tiermem-remote-full-" + std::to_string(getpid()) + ".log";
    fflush(stderr);
    saved_ = dup(2);
    int fd = open(path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    dup2(fd, 2);
    close(fd);
  }
  ~CaptureStderr() { Restore(); unlink(path_.c_str()); }
  std::string Text() {
    Restore();
    std::string out;
    FILE* f = fopen(path_.c_str(), "r");
    if (f == nullptr) return out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    fclose(f);
    return out;
  }

 private:
  void Restore() {
    if (saved_ < 0) return;
    fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
  }
  std::string path_;
  int saved_ = -1;
};

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Each page of chunk c gets its own pattern; Intact checks every page of every chunk.
void FillChunk(uint8_t* base, size_t c) {
  for (size_t i = 0; i < kChunkPages; ++i) testing::FillPage(base + i * kPage, c * kChunkPages + i);
}
::testing::AssertionResult Intact(const std::vector<uint8_t*>& chunks) {
  for (size_t c = 0; c < chunks.size(); ++c) {
    for (size_t i = 0; i < kChunkPages; ++i) {
      if (!testing::CheckPage(chunks[c] + i * kPage, c * kChunkPages + i)) {
        return ::testing::AssertionFailure() << "chunk " << c << " page " << i << " differs";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// A memd of `capacity` on loopback, stderr captured, and a runtime with an 8M DRAM limit and
// TIERMEM_ON_REMOTE_FULL=`policy` (no sampling: only relief and the test's own calls move pages).
class RemoteFull : public ::testing::Test {
 protected:
  void StartAll(const char* capacity, const char* policy) {
    ASSERT_TRUE(memd_.Start({"--capacity", capacity, "--no-rdma"}));
    err_ = std::make_unique<CaptureStderr>();
    Options o;
    o.Set("remote", memd_.url()).Set("remote_timeout_ms", 3000).Set("dram_limit", "8M");
    o.Set("on_remote_full", policy).Set("log", "warn").Set("sample_mode", "off");
    auto rt = Runtime::Start(o);
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    rt_ = std::move(*rt);
  }
  // Stops the runtime and returns what it printed.
  std::string StopAndLog() {
    rt_.reset();
    return err_->Text();
  }
  testing::MemdProcess memd_;
  std::unique_ptr<CaptureStderr> err_;
  std::unique_ptr<Runtime> rt_;
};

// Chunks allocated on the remote tier until the runtime refuses: with fail it must, before the
// DRAM limit, memd's 8M and the relief slack are all used; every chunk stored reads back.
TEST_F(RemoteFull, FailRefusesRemoteAllocationsTheServerCannotTake) {
  ASSERT_NO_FATAL_FAILURE(StartAll("8M", "fail"));
  std::vector<uint8_t*> chunks;
  Status refused;
  for (size_t c = 0; c < 64; ++c) {
    auto p = rt_->Allocate(kChunk, Tier::kRemote);
    if (!p.ok()) {
      refused = p.status();
      break;
    }
    chunks.push_back(static_cast<uint8_t*>(*p));
    FillChunk(chunks.back(), c);
  }
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused.ToString();
  EXPECT_NE(refused.message().find("TIERMEM_ON_REMOTE_FULL=fail"), std::string::npos) << refused.ToString();
  EXPECT_GE(chunks.size(), 4u);
  EXPECT_LE(chunks.size(), 20u);  // 8M DRAM + 8M memd + 4M slack
  EXPECT_TRUE(Intact(chunks));
  // Freeing gives the room back: the next allocation is taken again.
  for (uint8_t* p : chunks) ASSERT_TRUE(rt_->Free(p).ok());
  auto again = rt_->Allocate(kChunk, Tier::kRemote);
  EXPECT_TRUE(again.ok()) << again.status().ToString();
  if (again.ok()) {
    EXPECT_TRUE(rt_->Free(*again).ok());
  }
  const std::string text = StopAndLog();
  EXPECT_EQ(Count(text, kFullLine), 1u) << text;
  EXPECT_NE(text.find("TIERMEM_ON_REMOTE_FULL=fail: allocations past the limit fail with ENOMEM"),
            std::string::npos) << text;
}

// Explicit evictions past memd's capacity: each refused call fails with ResourceExhausted and
// leaves its pages intact in DRAM; the warning comes once for all of them.
TEST_F(RemoteFull, EvictionsIntoAFullServerWarnOnceAndKeepTheData) {
  ASSERT_NO_FATAL_FAILURE(StartAll("4M", "overcommit"));
  std::vector<uint8_t*> chunks;
  for (size_t c = 0; c < 8; ++c) {
    auto p = rt_->Allocate(kChunk, Tier::kDram);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    chunks.push_back(static_cast<uint8_t*>(*p));
    FillChunk(chunks.back(), c);
  }
  size_t refusals = 0;
  for (uint8_t* p : chunks) {
    auto m = rt_->Migrate(p, kChunk, Tier::kRemote);
    if (!m.ok()) {
      EXPECT_EQ(m.status().code(), StatusCode::kResourceExhausted) << m.status().ToString();
      ++refusals;
    }
  }
  EXPECT_GE(refusals, 4u);  // 4 MiB of memd holds at most four of the eight chunks
  EXPECT_TRUE(Intact(chunks));
  for (uint8_t* p : chunks) ASSERT_TRUE(rt_->Free(p).ok());
  const std::string text = StopAndLog();
  EXPECT_EQ(Count(text, kFullLine), 1u) << text;
  EXPECT_NE(text.find(memd_.url() + ": 4 MiB, 1024 pages used); DRAM holds"), std::string::npos) << text;
  EXPECT_NE(text.find("TIERMEM_ON_REMOTE_FULL=overcommit: pages stay in DRAM past the limit"),
            std::string::npos) << text;
}

}  // namespace
}  // namespace tiermem
