#include "runtime/paging/erasure.h"

#include <cstdlib>
#include <cstring>

#include "base/dynlib.h"

#if __has_include(<isa-l/erasure_code.h>)
#include <isa-l/erasure_code.h>
#define TIERMEM_ISAL_HEADER 1
#endif

namespace tiermem {

// ISA-L's functions as its erasure_code.h declares them (checked against the header where it is
// installed); the library is loaded at run time.
struct IsalApi {
  Status status;
  void (*gf_gen_cauchy1_matrix)(unsigned char* a, int m, int k) = nullptr;
  int (*gf_invert_matrix)(unsigned char* in, unsigned char* out, const int n) = nullptr;
  void (*ec_init_tables)(int k, int rows, unsigned char* a, unsigned char* gftbls) = nullptr;
  void (*ec_encode_data)(int len, int k, int rows, unsigned char* gftbls, unsigned char** data,
                         unsigned char** coding) = nullptr;
  unsigned char (*gf_mul)(unsigned char a, unsigned char b) = nullptr;
};

#ifdef TIERMEM_ISAL_HEADER
static_assert(std::is_same_v<decltype(IsalApi::gf_gen_cauchy1_matrix), decltype(&::gf_gen_cauchy1_matrix)>);
static_assert(std::is_same_v<decltype(IsalApi::gf_invert_matrix), decltype(&::gf_invert_matrix)>);
static_assert(std::is_same_v<decltype(IsalApi::ec_init_tables), decltype(&::ec_init_tables)>);
static_assert(std::is_same_v<decltype(IsalApi::ec_encode_data), decltype(&::ec_encode_data)>);
static_assert(std::is_same_v<decltype(IsalApi::gf_mul), decltype(&::gf_mul)>);
#endif

namespace {

void FillIsal(os::DynLib& lib, IsalApi* t) {
  TIERMEM_DYNLIB_RESOLVE(lib, *t, , gf_gen_cauchy1_matrix);
  TIERMEM_DYNLIB_RESOLVE(lib, *t, , gf_invert_matrix);
  TIERMEM_DYNLIB_RESOLVE(lib, *t, , ec_init_tables);
  TIERMEM_DYNLIB_RESOLVE(lib, *t, , ec_encode_data);
  TIERMEM_DYNLIB_RESOLVE(lib, *t, , gf_mul);
}

constexpr const char* kForms =
    "expected k+m such as 4+2: k data pieces (2, 4 or 8) and m parity pieces (1 to 4)";

}  // namespace

StatusOr<CodeShape> ParseCodeShape(const std::string& text) {
  if (text.empty()) return CodeShape{};
  const std::string what = "TIERMEM_REMOTE_CODE=\"" + text + "\": ";
  CodeShape c;
  if (!SplitCodeShape(text.c_str(), &c.k, &c.m)) return InvalidArgument(what + kForms);
  if (c.k != 2 && c.k != 4 && c.k != 8) {
    return InvalidArgument(what + std::to_string(c.k) +
                           " data pieces: k must be 2, 4 or 8 (a page splits into k equal pieces)");
  }
  if (c.m < 1 || c.m > kMaxCodeParity) {
    return InvalidArgument(what + std::to_string(c.m) + " parity pieces: m must be 1 to " +
                           std::to_string(kMaxCodeParity));
  }
  return c;
}

StatusOr<std::unique_ptr<ErasureCode>> ErasureCode::Make(CodeShape shape) {
  if (shape.k < 2 || shape.k > kMaxCodeData || (shape.k & (shape.k - 1)) != 0 || shape.m < 1 ||
      shape.m > kMaxCodeParity) {
    return InvalidArgument("erasure code " + shape.ToString() + ": " + kForms);
  }
  const IsalApi& api = os::LoadOnce<IsalApi, FillIsal>("libisal.so.2", "libisal2");
  if (!api.status.ok()) {
    return Unavailable("TIERMEM_REMOTE_CODE needs ISA-L: " + api.status.message());
  }
  std::unique_ptr<ErasureCode> c(new ErasureCode());
  c->shape_ = shape;
  c->api_ = &api;
  api.gf_gen_cauchy1_matrix(c->matrix_, int(shape.n()), int(shape.k));
  api.ec_init_tables(int(shape.k), int(shape.m), c->matrix_ + shape.k * shape.k, c->encode_tables_);
  return c;
}

void ErasureCode::Encode(size_t len, const uint8_t* const* data, uint8_t* const* parity) const {
  api_->ec_encode_data(int(len), int(shape_.k), int(shape_.m), const_cast<uint8_t*>(encode_tables_),
                       const_cast<uint8_t**>(data), const_cast<uint8_t**>(parity));
}

Status ErasureCode::Decode(size_t len, const uint32_t* have, const uint8_t* const* present, const uint32_t* want,
                           uint32_t nwant, uint8_t* const* out) const {
  const uint32_t k = shape_.k, n = shape_.n();
  if (nwant == 0) return Status::Ok();
  if (nwant > n) return InvalidArgument("erasure code: more pieces wanted than the code has");
  // The rows of the k pieces held, inverted, give the data from them; a wanted piece's row of
  // the code matrix times that inverse gives it from them.
  uint8_t rows[kMaxCodeData * kMaxCodeData], inverse[kMaxCodeData * kMaxCodeData];
  uint32_t seen = 0;
  for (uint32_t i = 0; i < k; ++i) {
    if (have[i] >= n || ((seen >> have[i]) & 1u)) return InvalidArgument("erasure code: bad piece set");
    seen |= 1u << have[i];
    std::memcpy(rows + i * k, matrix_ + have[i] * k, k);
  }
  if (api_->gf_invert_matrix(rows, inverse, int(k)) != 0) {
    return InvalidArgument("erasure code: the pieces held cannot be inverted");
  }
  uint8_t decode[kMaxCodePieces * kMaxCodeData];
  for (uint32_t w = 0; w < nwant; ++w) {
    if (want[w] >= n) return InvalidArgument("erasure code: bad piece wanted");
    const uint8_t* row = matrix_ + want[w] * k;
    for (uint32_t j = 0; j < k; ++j) {
      uint8_t acc = 0;
      for (uint32_t i = 0; i < k; ++i) acc ^= api_->gf_mul(row[i], inverse[i * k + j]);
      decode[w * k + j] = acc;
    }
  }
  uint8_t tables[32 * kMaxCodeData * kMaxCodePieces];
  api_->ec_init_tables(int(k), int(nwant), decode, tables);
  api_->ec_encode_data(int(len), int(k), int(nwant), tables, const_cast<uint8_t**>(present),
                       const_cast<uint8_t**>(out));
  return Status::Ok();
}

}  // namespace tiermem
