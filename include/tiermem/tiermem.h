/* tiermem C ABI. Every function returns 0 on success or a negative errno; tiermem_last_error()
 * gives the message of the calling thread's last failure. */
#ifndef TIERMEM_TIERMEM_H_
#define TIERMEM_TIERMEM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tiermem_runtime tiermem_runtime;

enum tiermem_tier {
  TIERMEM_TIER_DRAM = 0,
  TIERMEM_TIER_CXL = 1,
  TIERMEM_TIER_REMOTE = 2,
  TIERMEM_TIER_AUTO = 3,
};

enum tiermem_alloc_flags {
  TIERMEM_ALLOC_DEFAULT = 0,
  TIERMEM_ALLOC_ALLOW_FALLBACK = 1,
  TIERMEM_ALLOC_PIN = 2,
  TIERMEM_ALLOC_POPULATE = 4,
};

/* Starts a runtime configured from TIERMEM_* variables. */
int tiermem_start(tiermem_runtime** out);
/* Stops and destroys it (live allocations are unmapped). NULL is accepted. */
int tiermem_stop(tiermem_runtime* rt);

int tiermem_alloc(tiermem_runtime* rt, size_t bytes, int tier, unsigned flags, void** out);
int tiermem_free(tiermem_runtime* rt, void* ptr);
/* Moves [ptr, ptr+len) to `tier`; *moved (may be NULL) receives the pages moved. */
int tiermem_migrate(tiermem_runtime* rt, void* ptr, size_t len, int tier, uint64_t* moved);
/* For each page of [ptr, ptr+len): tiers[i] (enum tiermem_tier) and nodes[i] (-1 when not
 * resident). Both arrays hold ceil(len / page size) entries. */
int tiermem_locate(tiermem_runtime* rt, const void* ptr, size_t len, int* tiers, int* nodes);
/* Lists one more memory server ("tcp://host:port", "rdma://host:port") for the remote tier while
 * the program runs; it takes new pages once it answers (Runtime::AddRemoteServer). -EINVAL for a
 * malformed address or one listed already, -ENODEV when the remote tier is not running. */
int tiermem_add_remote_server(tiermem_runtime* rt, const char* address);
/* 1 when the tier is available on this machine, 0 otherwise. */
int tiermem_has_tier(tiermem_runtime* rt, int tier);
/* Message of this thread's last failed call ("" if none). Valid until the next call. */
const char* tiermem_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* TIERMEM_TIERMEM_H_ */
