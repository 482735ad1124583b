/* Compiled as C: the C ABI header must stay plain C. Returns 0 or the failing step. */
#include <errno.h>
#include <string.h>

#include "tiermem/tiermem.h"

int tiermem_c_api_smoke(void) {
  tiermem_runtime* rt = NULL;
  if (tiermem_start(&rt) != 0) return 1;
  void* p = NULL;
  if (tiermem_alloc(rt, 1 << 20, TIERMEM_TIER_DRAM, TIERMEM_ALLOC_DEFAULT, &p) != 0) return 2;
  memset(p, 0x5A, 1 << 20);
  uint64_t moved = 0;
  if (tiermem_migrate(rt, p, 1 << 20, TIERMEM_TIER_DRAM, &moved) != 0) return 3;
  int tiers[256], nodes[256];
  if (tiermem_locate(rt, p, 1 << 20, tiers, nodes) != 0) return 4;
  for (int i = 0; i < 256; ++i) {
    if (tiers[i] != TIERMEM_TIER_DRAM || nodes[i] < 0) return 5;
  }
  int local = 0;
  if (tiermem_free(rt, &local) != -EINVAL) return 6;
  if (strstr(tiermem_last_error(), "not allocated by tiermem") == NULL) return 7;
  if (tiermem_alloc(rt, 4096, 42, 0, &p) != -EINVAL) return 8;
  if (tiermem_free(rt, p) != 0) return 9;
  if (tiermem_has_tier(rt, TIERMEM_TIER_DRAM) != 1) return 10;
  /* No remote tier in this runtime: a server cannot be added, and the caller is told why. */
  if (tiermem_add_remote_server(rt, "tcp://127.0.0.1:7471") != -ENODEV) return 12;
  if (strstr(tiermem_last_error(), "remote tier is not running") == NULL) return 13;
  if (tiermem_add_remote_server(rt, NULL) != -EINVAL) return 14;
  if (tiermem_stop(rt) != 0) return 11;
  return 0;
}
