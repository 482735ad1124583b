// Erasure coding of pages for the remote tier (TIERMEM_REMOTE_CODE=k+m): a page is k data
// pieces (its bytes, in k equal slices) and m parity pieces computed from them; any k of the
// k+m pieces give the page back. The arithmetic is ISA-L's (libisal, Reed-Solomon over GF(2^8)
// with a Cauchy matrix, so every choice of k pieces can be inverted), loaded with dlopen when a
// code is first asked for: a process without TIERMEM_REMOTE_CODE never maps the library.
//
// Contract:
// - Make() checks k and m and loads the library: InvalidArgument naming the bad number,
//   Unavailable when libisal.so.2 cannot be loaded (the text names the package, libisal2).
// - Encode and Decode are pure functions of their inputs: any thread, no locks, no allocation
//   (the decode tables are built on the caller's stack).
// - Pieces are indexed 0..k+m-1: 0..k-1 are the data slices in page order, k.. the parity.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/option_checks.h"
#include "tiermem/status.hpp"

namespace tiermem {

// The most pieces of a code (k + m), and the bounds TIERMEM_REMOTE_CODE accepts.
inline constexpr uint32_t kMaxCodePieces = 12;
inline constexpr uint32_t kMaxCodeData = 8;    // k: 2, 4 or 8 (a power of two: pieces divide a page)
inline constexpr uint32_t kMaxCodeParity = kOptMaxCodeParity;  // m: 1 to 4

struct CodeShape {
  uint32_t k = 0;  // data pieces; 0 = no code (replicas instead)
  uint32_t m = 0;  // parity pieces
  uint32_t n() const { return k + m; }
  std::string ToString() const { return std::to_string(k) + "+" + std::to_string(m); }
};

// "4+2" -> {4, 2}; "" -> {0, 0} (no code). InvalidArgument with the accepted forms otherwise.
StatusOr<CodeShape> ParseCodeShape(const std::string& text);

class ErasureCode {
 public:
  static StatusOr<std::unique_ptr<ErasureCode>> Make(CodeShape shape);

  const CodeShape& shape() const { return shape_; }
  // Bytes of one piece of a `page_bytes` page (page_bytes / k).
  size_t piece_bytes(size_t page_bytes) const { return page_bytes / shape_.k; }

  // The m parity pieces of `len` bytes from the k data pieces data[0..k).
  void Encode(size_t len, const uint8_t* const* data, uint8_t* const* parity) const;
  // From k pieces, present[i] holding piece number have[i] (distinct, any order), computes the
  // pieces numbered want[0..nwant) into out[0..nwant): data or parity, `len` bytes each.
  // InvalidArgument for a bad index set (never for a valid one: the matrix is always invertible).
  Status Decode(size_t len, const uint32_t* have, const uint8_t* const* present, const uint32_t* want,
                uint32_t nwant, uint8_t* const* out) const;

 private:
  ErasureCode() = default;
  CodeShape shape_;
  const struct IsalApi* api_ = nullptr;
  uint8_t matrix_[kMaxCodePieces * kMaxCodeData] = {};  // (k+m) x k, the top k rows the identity
  uint8_t encode_tables_[32 * kMaxCodeData * kMaxCodeParity] = {};
};

}  // namespace tiermem
