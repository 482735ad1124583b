// The erasure code of TIERMEM_REMOTE_CODE (runtime/paging/erasure.h): every choice of k pieces
// out of k+m gives back every piece, data and parity; the code strings users write are parsed or
// refused with the accepted forms.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "runtime/paging/erasure.h"

namespace tiermem {
namespace {

// Each subset of `n` members with `k` bits set, as a bit mask.
std::vector<uint32_t> Subsets(uint32_t n, uint32_t k) {
  std::vector<uint32_t> out;
  for (uint32_t mask = 0; mask < (1u << n); ++mask) {
    if (static_cast<uint32_t>(__builtin_popcount(mask)) == k) out.push_back(mask);
  }
  return out;
}

void RoundTrip(CodeShape shape) {
  auto code = ErasureCode::Make(shape);
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  const uint32_t k = shape.k, n = shape.n();
  const size_t len = (*code)->piece_bytes(4096);
  ASSERT_EQ(len * k, 4096u);
  std::mt19937 rng(k * 131 + shape.m);
  std::vector<uint8_t> pieces(n * len);
  for (size_t i = 0; i < k * len; ++i) pieces[i] = static_cast<uint8_t>(rng());
  const uint8_t* data[kMaxCodeData];
  uint8_t* parity[kMaxCodeParity];
  for (uint32_t d = 0; d < k; ++d) data[d] = pieces.data() + d * len;
  for (uint32_t q = 0; q < shape.m; ++q) parity[q] = pieces.data() + (k + q) * len;
  (*code)->Encode(len, data, parity);
  // The parity is not trivially zero or a copy of the data.
  bool differs = false;
  for (size_t i = 0; i < len; ++i) differs = differs || pieces[k * len + i] != pieces[i];
  EXPECT_TRUE(differs);
  for (uint32_t mask : Subsets(n, k)) {
    uint32_t have[kMaxCodeData], want[kMaxCodePieces], nh = 0, nw = 0;
    const uint8_t* present[kMaxCodeData];
    for (uint32_t p = 0; p < n; ++p) {
      if ((mask >> p) & 1u) {
        have[nh] = p;
        present[nh++] = pieces.data() + p * len;
      } else {
        want[nw++] = p;
      }
    }
    std::vector<uint8_t> out_buf(nw * len, 0xEE);
    uint8_t* out[kMaxCodePieces];
    for (uint32_t w = 0; w < nw; ++w) out[w] = out_buf.data() + w * len;
    ASSERT_TRUE((*code)->Decode(len, have, present, want, nw, out).ok());
    for (uint32_t w = 0; w < nw; ++w) {
      ASSERT_EQ(0, memcmp(out[w], pieces.data() + want[w] * len, len))
          << shape.ToString() << ": piece " << want[w] << " from mask " << mask;
    }
  }
}

TEST(ErasureCode, AnyKPiecesGiveBackEveryPiece) {
  RoundTrip({2, 1});
  RoundTrip({4, 2});
  RoundTrip({4, 4});
  RoundTrip({8, 3});
}

TEST(ErasureCode, DecodeRefusesARepeatedPiece) {
  auto code = ErasureCode::Make({4, 2});
  ASSERT_TRUE(code.ok());
  uint8_t buf[6][1024] = {};
  const uint32_t have[4] = {0, 1, 1, 2};
  const uint8_t* present[4] = {buf[0], buf[1], buf[1], buf[2]};
  const uint32_t want[1] = {3};
  uint8_t* out[1] = {buf[3]};
  EXPECT_EQ((*code)->Decode(1024, have, present, want, 1, out).code(), StatusCode::kInvalidArgument);
}

TEST(ErasureCode, CodeStringsAreParsedOrRefusedWithTheForms) {
  auto c = ParseCodeShape("4+2");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->k, 4u);
  EXPECT_EQ(c->m, 2u);
  EXPECT_EQ(c->ToString(), "4+2");
  auto none = ParseCodeShape("");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->k, 0u);
  for (const char* bad : {"4x2", "4+", "+2", "3+2", "4+0", "4+5", "16+2", "4+2+1", " 4+2", "a+b", "004+2"}) {
    auto p = ParseCodeShape(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(p.status().message().find(std::string("TIERMEM_REMOTE_CODE=\"") + bad + "\""), std::string::npos)
        << p.status().message();
  }
  EXPECT_NE(ParseCodeShape("3+2").status().message().find("k must be 2, 4 or 8"), std::string::npos);
  EXPECT_NE(ParseCodeShape("4+7").status().message().find("m must be 1 to 4"), std::string::npos);
}

}  // namespace
}  // namespace tiermem
