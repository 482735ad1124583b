// libibverbs and librdmacm, loaded at run time (dlopen) on first use instead of linked, so a
// process that never talks RDMA never maps them (nor what they pull in: libnl, ...). Each table is
// filled once, thread-safe; the functions return nullptr and set *why when the library (or one of
// its symbols) is missing, e.g. "libibverbs.so.1 not found: install libibverbs1 (...)".
//
// Only the exported functions are here. The static inline ones of <infiniband/verbs.h>
// (ibv_post_send, ibv_poll_cq, ibv_req_notify_cq) call through the context's ops and need no
// lookup; ibv_query_port and ibv_reg_mr are macros there: use QueryPort below and reg_mr.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "tiermem/status.hpp"

namespace tiermem::remote {

// Member `x` is ibv_x.
#define TIERMEM_VERBS_FUNCS(X) \
  X(get_device_list)           \
  X(free_device_list)          \
  X(get_device_name)           \
  X(get_device_guid)           \
  X(open_device)               \
  X(close_device)              \
  X(query_device)              \
  X(query_port)                \
  X(query_gid)                 \
  X(alloc_pd)                  \
  X(dealloc_pd)                \
  X(reg_mr)                    \
  X(dereg_mr)                  \
  X(create_comp_channel)       \
  X(destroy_comp_channel)      \
  X(create_cq)                 \
  X(destroy_cq)                \
  X(get_cq_event)              \
  X(ack_cq_events)             \
  X(wc_status_str)

// Member `x` is rdma_x.
#define TIERMEM_RDMACM_FUNCS(X) \
  X(create_event_channel)       \
  X(destroy_event_channel)      \
  X(create_id)                  \
  X(destroy_id)                 \
  X(bind_addr)                  \
  X(listen)                     \
  X(resolve_addr)               \
  X(resolve_route)              \
  X(get_cm_event)               \
  X(ack_cm_event)               \
  X(event_str)                  \
  X(create_qp)                  \
  X(destroy_qp)                 \
  X(connect)                    \
  X(accept)                     \
  X(reject)                     \
  X(disconnect)

struct VerbsApi {
#define TIERMEM_X(name) decltype(&::ibv_##name) name = nullptr;
  TIERMEM_VERBS_FUNCS(TIERMEM_X)
#undef TIERMEM_X
};

struct RdmaCmApi {
#define TIERMEM_X(name) decltype(&::rdma_##name) name = nullptr;
  TIERMEM_RDMACM_FUNCS(TIERMEM_X)
#undef TIERMEM_X
};

// libibverbs.so.1, loaded on the first call. nullptr (and *why) when it cannot be.
const VerbsApi* Verbs(Status* why);
// librdmacm.so.1 (which needs libibverbs), loaded on the first call.
const RdmaCmApi* RdmaCm(Status* why);

// What the ibv_query_port macro of <infiniband/verbs.h> does, through the table.
int QueryPort(const VerbsApi& v, ibv_context* ctx, uint8_t port, ibv_port_attr* attr);

// Whether /sys/class/infiniband lists any device (a NIC, or an rxe/siw soft device): checked
// before loading libibverbs, so hosts without one never load it.
bool VerbsDeviceInSysfs();

}  // namespace tiermem::remote
