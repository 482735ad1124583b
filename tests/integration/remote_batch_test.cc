// The TCP transport's write messages of several pages (writes posted to consecutive slots go out
// as one message): against a real tiermem-memd, every page lands where it was posted, and each
// posted page completes once with its own cookie, also where consecutive slot numbers belong to
// two allocations (memd takes a message only within one).
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "backends/remote/transport.h"
#include "tests/integration/remote_memd_fixture.h"

namespace tiermem::remote {
namespace {

TEST(RemoteTcp, WritesToConsecutiveSlotsOfTwoAllocationsEachLandAndComplete) {
  testing::MemdProcess memd;
  ASSERT_TRUE(memd.Start({"--capacity", "64M", "--no-rdma"}));
  auto t = testing::Connected(memd);
  // 20 + 20 slots: neither a multiple of a message's 16 pages, so a message would straddle the
  // boundary if the transport let it.
  auto a = t->AllocSlots(20);
  auto b = t->AllocSlots(20);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(b->first, a->first + a->count) << "the test needs two adjacent allocations";
  constexpr size_t kPages = 40;
  std::vector<uint8_t> buf(kPages * kPage);
  for (size_t i = 0; i < kPages; ++i) {
    testing::FillPage(&buf[i * kPage], i);
    const SlotRange& r = i < a->count ? *a : *b;
    Status s = t->PostWrite(r, a->first + i, &buf[i * kPage], 1000 + i);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::multiset<uint64_t> done;
  Completion c[64];
  while (done.size() < kPages) {
    auto n = t->Poll(c, 64, 5000);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_GT(*n, 0u) << "no completion within 5 s";
    for (size_t i = 0; i < *n; ++i) {
      EXPECT_TRUE(c[i].status.ok()) << c[i].status.ToString();
      done.insert(c[i].cookie);
    }
  }
  for (uint64_t i = 0; i < kPages; ++i) EXPECT_EQ(done.count(1000 + i), 1u) << "cookie " << 1000 + i;
  EXPECT_EQ(t->in_flight(), 0u);

  std::vector<uint8_t> back(kPages * kPage, 0);
  ASSERT_TRUE(ReadPagesSync(*t, *a, a->first, back.data(), a->count).ok());
  ASSERT_TRUE(ReadPagesSync(*t, *b, b->first, back.data() + a->count * kPage, b->count).ok());
  for (size_t i = 0; i < kPages; ++i) EXPECT_TRUE(testing::CheckPage(&back[i * kPage], i)) << "page " << i;
  // memd counted each slot written once, however many pages a message carried.
  auto clients = t->Clients(0);
  ASSERT_TRUE(clients.ok()) << clients.status().ToString();
  EXPECT_EQ(clients->written_pages, kPages);
  t->Close();
}

}  // namespace
}  // namespace tiermem::remote
