#include "backends/remote/rdma/rdma_api.h"

#include <cstring>

#include "base/dynlib.h"

namespace tiermem::remote {
namespace {

struct LoadedVerbs {
  VerbsApi api;
  Status status;
};
struct LoadedRdmaCm {
  RdmaCmApi api;
  Status status;
};

void FillVerbs(os::DynLib& lib, LoadedVerbs* l) {
#define TIERMEM_X(name) TIERMEM_DYNLIB_RESOLVE(lib, l->api, ibv_, name);
  TIERMEM_VERBS_FUNCS(TIERMEM_X)
#undef TIERMEM_X
}

void FillRdmaCm(os::DynLib& lib, LoadedRdmaCm* l) {
#define TIERMEM_X(name) TIERMEM_DYNLIB_RESOLVE(lib, l->api, rdma_, name);
  TIERMEM_RDMACM_FUNCS(TIERMEM_X)
#undef TIERMEM_X
}

template <class Loaded>
auto ApiOrNull(const Loaded& l, Status* why) -> decltype(&l.api) {
  if (l.status.ok()) return &l.api;
  if (why != nullptr) *why = l.status;
  return nullptr;
}

}  // namespace

const VerbsApi* Verbs(Status* why) {
  return ApiOrNull(os::LoadOnce<LoadedVerbs, FillVerbs>("libibverbs.so.1", "libibverbs1"), why);
}

const RdmaCmApi* RdmaCm(Status* why) {
  return ApiOrNull(os::LoadOnce<LoadedRdmaCm, FillRdmaCm>("librdmacm.so.1", "librdmacm1"), why);
}

int QueryPort(const VerbsApi& v, ibv_context* ctx, uint8_t port, ibv_port_attr* attr) {
  verbs_context* vctx = verbs_get_ctx_op(ctx, query_port);
  if (vctx == nullptr) {
    std::memset(attr, 0, sizeof(*attr));
    return v.query_port(ctx, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
  }
  return vctx->query_port(ctx, port, attr, sizeof(*attr));
}

bool VerbsDeviceInSysfs() { return os::DirHasEntries("/sys/class/infiniband"); }

}  // namespace tiermem::remote
