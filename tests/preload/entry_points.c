/* Every C entry point under the preload library: malloc(0) unique, errno values, alignment,
 * usable size, realloc across sizes, and a block glibc made directly (__libc_malloc) freed and
 * reallocated through the interposed functions. Prints nothing; exits non-zero on a failure. */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void* __libc_malloc(size_t);

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAILED: %s (line %d)\n", #c, __LINE__); return 1; } } while (0)

/* volatile: keeps the compiler from warning about the deliberately impossible sizes. */
static volatile size_t huge = SIZE_MAX - 4096, quarter = SIZE_MAX / 4;

int main(void) {
  void* a = malloc(0);
  void* b = malloc(0);
  CHECK(a != NULL && b != NULL && a != b);
  free(a);
  free(b);
  errno = 0;
  CHECK(malloc(huge) == NULL && errno == ENOMEM);
  errno = 0;
  CHECK(calloc(quarter, 8) == NULL && errno == ENOMEM);
  errno = 0;
  CHECK(reallocarray(NULL, quarter, 8) == NULL && errno == ENOMEM);
  void* p = NULL;
  CHECK(posix_memalign(&p, 3, 10) == EINVAL);
  CHECK(posix_memalign(&p, 4, 10) == EINVAL);
  CHECK(posix_memalign(&p, 64, 10) == 0 && ((uintptr_t)p % 64) == 0);
  free(p);
  /* aligned_alloc with a non-power-of-two alignment: EINVAL under tiermem (C17, glibc >= 2.38);
   * glibc 2.36 accepts it, so the run without the library cannot check it (heap_unit_test does). */
  for (size_t al = 16; al <= (1u << 22); al *= 2) {
    void* q = aligned_alloc(al, al * 3 / 2);
    CHECK(q != NULL && ((uintptr_t)q % al) == 0);
    memset(q, 1, al * 3 / 2);
    CHECK(malloc_usable_size(q) >= al * 3 / 2);
    free(q);
    q = memalign(al, 100);
    CHECK(q != NULL && ((uintptr_t)q % al) == 0);
    free(q);
  }
  long page = sysconf(_SC_PAGESIZE);
  void* v = valloc(1);
  CHECK(v != NULL && ((uintptr_t)v % page) == 0);
  void* pv = pvalloc(1);
  CHECK(pv != NULL && ((uintptr_t)pv % page) == 0 && malloc_usable_size(pv) >= (size_t)page);
  free(v);
  free(pv);
  unsigned char* z = calloc(1000, 1000);
  CHECK(z != NULL);
  for (int i = 0; i < 1000000; i += 4093) CHECK(z[i] == 0);
  free(z);
  char* r = malloc(1);
  r[0] = 'x';
  for (size_t n = 2; n < (1u << 24); n = n * 3 / 2 + 1) {
    r = realloc(r, n);
    CHECK(r != NULL && r[0] == 'x');
    r[n - 1] = 'y';
  }
  CHECK(realloc(r, 0) == NULL);
  CHECK(malloc_usable_size(NULL) == 0);
  /* A block glibc made directly: free, realloc and usable size must accept it. */
  char* g = __libc_malloc(100);
  strcpy(g, "from glibc");
  CHECK(malloc_usable_size(g) >= 100);
  g = realloc(g, 5000);
  CHECK(g != NULL && strcmp(g, "from glibc") == 0);
  free(g);
  free(__libc_malloc(10));
  return 0;
}
