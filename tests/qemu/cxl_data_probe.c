// Does memory on NUMA node 1 hold what is written to it? No tiermem involved: plain move_pages
// and mbind, then memset and read back. Run by check_cxl.sh in the cxl and full guests (the CXL
// node) before the API tests: QEMU 7.2's CXL window read back zeros under TCG, which is why the
// harness needs QEMU >= 8 (qemu/qemu-version.sh). Exits 1 when data is lost or when fewer than
// half of the pages reached node 1 (the check would say nothing about the node). By hand:
//   qemu/run-guest.sh --cache build/qemu-cache --topology cxl
//       --file build/qemu/guest-tests/cxl_data_probe -- cxl_data_probe
#define _GNU_SOURCE
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdint.h>
static int check(const char* what, unsigned char* p, size_t n, unsigned char v) {
  size_t bad = 0, first = (size_t)-1;
  for (size_t i = 0; i < n; ++i) if (p[i] != v) { if (first == (size_t)-1) first = i; ++bad; }
  printf("%s: %zu bad bytes (first at %zd, reads 0x%02x%02x%02x%02x)\n", what, bad, (ssize_t)first, p[0], p[1], p[4096], p[n-1]);
  return bad != 0;
}
int main(void) {
  size_t n = 8 << 20, np = n / 4096;
  unsigned char* p = mmap(0, n, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  memset(p, 1, n);
  void** pages = malloc(np * sizeof(void*)); int* nodes = malloc(np * sizeof(int)); int* st = malloc(np * sizeof(int));
  for (size_t i = 0; i < np; ++i) { pages[i] = p + i * 4096; nodes[i] = 1; }
  long rc = move_pages(0, np, pages, nodes, st, MPOL_MF_MOVE);
  int on1 = 0; for (size_t i = 0; i < np; ++i) on1 += st[i] == 1;
  printf("move_pages rc %ld, %d of %zu on node 1\n", rc, on1, np);
  int bad = check("after move (memset 1)", p, n, 1);
  if ((size_t)on1 < np / 2) {
    printf("cxl_data_probe: only %d of %zu pages reached node 1\n", on1, np);
    bad = 1;
  }
  memset(p, 2, n);
  bad |= check("memset 2 after move", p, n, 2);
  for (size_t i = 0; i < n; i += 8) *(volatile uint64_t*)(p + i) = 0x0303030303030303ull;
  bad |= check("u64 stores after move", p, n, 3);
  unsigned char* q = mmap(0, n, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  unsigned long mask = 2;
  if (mbind(q, n, MPOL_BIND, &mask, 64, 0) != 0) { perror("mbind"); bad = 1; }
  memset(q, 4, n);
  bad |= check("fresh on node 1 (mbind) memset 4", q, n, 4);
  printf("DATA_ON_FAR_NODE_HOLDS=%d (cxl_data_probe)\n", bad ? 0 : 1);
  return bad;
}
