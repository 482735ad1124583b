// The thin OS layer: every system call the runtime makes goes through here (the backends make
// their own device calls). Contract: functions returning int return 0 on success or a negative
// errno; none allocates memory from malloc, so all are safe inside the preload allocator.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tiermem::os {

size_t PageSize();  // 4096 here; read once from sysconf

// Reserves `bytes` of read-write, private, anonymous address space without committing memory
// (MAP_NORESERVE). Returns nullptr and sets *err (negative errno) on failure.
void* Reserve(size_t bytes, int* err);
int Unmap(void* addr, size_t bytes);
// Drops the pages of a range (MADV_DONTNEED): the next touch sees zero pages (or faults to
// userfaultfd when registered).
int Discard(void* addr, size_t bytes);
// Touches every page of a writable range so it is backed now (MADV_POPULATE_WRITE, or a write
// per page where the kernel lacks it).
int Populate(void* addr, size_t bytes);

// mbind(2). `nodemask` is a bit mask of nodes (up to 1024 nodes), `maxnode` its bit count.
// mode: MPOL_* from <numaif.h>; flags: MPOL_MF_*.
int Mbind(void* addr, size_t bytes, int mode, const unsigned long* nodemask, unsigned long maxnode,
          unsigned flags);
// move_pages(2) on this process. `nodes` may be nullptr (query). `status` receives per page the
// node or a negative errno. Returns 0, or a negative errno for the call as a whole.
int MovePages(unsigned long count, void** pages, const int* nodes, int* status);

// Reads an environment variable from `environ` without calling getenv or allocating. Returns
// nullptr when unset. The pointer is into the environment block.
const char* GetEnv(const char* name);

// Writes all of buf to fd, retrying on EINTR and short writes. Returns 0 or a negative errno.
int WriteAll(int fd, const void* buf, size_t len);
// Reads up to cap-1 bytes of a (sysfs) file into buf and NUL-terminates it. Returns the byte
// count, or a negative errno.
long ReadSmallFile(const char* path, char* buf, size_t cap);

uint64_t MonotonicNanos();

}  // namespace tiermem::os
