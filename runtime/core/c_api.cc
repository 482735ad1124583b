#include "tiermem/tiermem.h"

#include <cerrno>
#include <new>
#include <string>

#include "tiermem/tiermem.hpp"

struct tiermem_runtime {
  std::unique_ptr<tiermem::Runtime> rt;
};

namespace {
thread_local std::string g_last_error;

int Fail(const tiermem::Status& s) {
  g_last_error = s.ToString();
  return s.ToErrno();
}

bool ValidTier(int tier) { return tier >= TIERMEM_TIER_DRAM && tier <= TIERMEM_TIER_AUTO; }

int BadArg(const char* what) {
  g_last_error = std::string("invalid_argument: ") + what;
  return -EINVAL;
}
}  // namespace

extern "C" {

int tiermem_start(tiermem_runtime** out) {
  if (out == nullptr) return BadArg("tiermem_start: out is NULL");
  auto rt = tiermem::Runtime::Start();
  if (!rt.ok()) return Fail(rt.status());
  auto* h = new (std::nothrow) tiermem_runtime;
  if (h == nullptr) return -ENOMEM;
  h->rt = std::move(rt).value();
  *out = h;
  return 0;
}

int tiermem_stop(tiermem_runtime* rt) {
  if (rt == nullptr) return 0;
  tiermem::Status s = rt->rt->Stop();
  delete rt;
  return s.ok() ? 0 : Fail(s);
}

int tiermem_alloc(tiermem_runtime* rt, size_t bytes, int tier, unsigned flags, void** out) {
  if (rt == nullptr || out == nullptr) return BadArg("tiermem_alloc: NULL argument");
  if (!ValidTier(tier)) return BadArg("tiermem_alloc: unknown tier");
  auto p = rt->rt->Allocate(bytes, static_cast<tiermem::Tier>(tier), flags);
  if (!p.ok()) return Fail(p.status());
  *out = *p;
  return 0;
}

int tiermem_free(tiermem_runtime* rt, void* ptr) {
  if (rt == nullptr) return BadArg("tiermem_free: NULL runtime");
  tiermem::Status s = rt->rt->Free(ptr);
  return s.ok() ? 0 : Fail(s);
}

int tiermem_migrate(tiermem_runtime* rt, void* ptr, size_t len, int tier, uint64_t* moved) {
  if (rt == nullptr) return BadArg("tiermem_migrate: NULL runtime");
  if (!ValidTier(tier)) return BadArg("tiermem_migrate: unknown tier");
  auto r = rt->rt->Migrate(ptr, len, static_cast<tiermem::Tier>(tier));
  if (!r.ok()) return Fail(r.status());
  if (moved != nullptr) *moved = r->pages_moved;
  return 0;
}

int tiermem_add_remote_server(tiermem_runtime* rt, const char* address) {
  if (rt == nullptr || address == nullptr) return BadArg("tiermem_add_remote_server: NULL argument");
  tiermem::Status s = rt->rt->AddRemoteServer(address);
  return s.ok() ? 0 : Fail(s);
}

int tiermem_locate(tiermem_runtime* rt, const void* ptr, size_t len, int* tiers, int* nodes) {
  if (rt == nullptr || tiers == nullptr || nodes == nullptr) {
    return BadArg("tiermem_locate: NULL argument");
  }
  auto r = rt->rt->Locate(ptr, len);
  if (!r.ok()) return Fail(r.status());
  for (size_t i = 0; i < r->size(); ++i) {
    tiers[i] = static_cast<int>((*r)[i].tier);
    nodes[i] = (*r)[i].node;
  }
  return 0;
}

int tiermem_has_tier(tiermem_runtime* rt, int tier) {
  if (rt == nullptr || !ValidTier(tier)) return 0;
  return rt->rt->HasTier(static_cast<tiermem::Tier>(tier)) ? 1 : 0;
}

const char* tiermem_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
