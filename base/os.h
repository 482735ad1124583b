// The thin OS layer: every system call the runtime makes goes through here (the backends make
// their own device calls). Contract: functions returning int return 0 on success or a negative
// errno; none allocates memory from malloc (ThreadStack aside, as it says), so all are safe
// inside the preload allocator.
#pragma once

#include <cstddef>
#include <cstdint>

#include <string>
#include <vector>

#include "tiermem/status.hpp"

namespace tiermem::os {

size_t PageSize();  // 4096 here; read once from sysconf

// Reserves `bytes` of read-write, private, anonymous address space without committing memory
// (MAP_NORESERVE). Returns nullptr and sets *err (negative errno) on failure.
void* Reserve(size_t bytes, int* err);
// Reserve, with the start aligned to `align` (a power of two, a multiple of the page size).
void* ReserveAligned(size_t bytes, size_t align, int* err);
// MADV_NOHUGEPAGE: the range never gets transparent huge pages, and its mapping is not merged
// with a neighbouring anonymous mapping that may.
int NoHugePages(void* addr, size_t bytes);
int Unmap(void* addr, size_t bytes);

// ---- shared files (the live stats block) ----
// Creates `path` (O_EXCL, mode 0600) of `bytes` zero bytes and maps it shared read-write, at
// `fixed` when not null (MAP_FIXED: replaces what was there). Returns the address, or nullptr
// with *err set (negative errno). An existing file of that name is replaced when `replace`.
void* CreateSharedFile(const char* path, size_t bytes, void* fixed, bool replace, int* err);
// Maps an existing file read-only (all of it, at most `max_bytes`); *bytes gets its size.
// nullptr with *err on failure (-ENOENT, -EACCES...).
const void* MapFileReadOnly(const char* path, size_t max_bytes, size_t* bytes, int* err);
int Unlink(const char* path);
// Replaces [addr, addr+bytes) with private zeroed memory (MAP_FIXED). 0 or a negative errno.
int MapPrivateFixed(void* addr, size_t bytes);
int ProcessId();
uint32_t UserId();
// 0 when the process exists (or exists under another user), -ESRCH when it does not.
int ProcessExists(int pid);
uint64_t RealtimeNanos();
// Whether the calling process may read [addr, addr+len) now (protection and mapping as they
// are), found without a fault: process_vm_readv(2) of the range from this process into a
// scratch buffer, in pieces of at most 4 KiB. False when any byte is unreadable.
bool CanRead(const void* addr, size_t len);
// Drops the pages of a range (MADV_DONTNEED): the next touch sees zero pages (or faults to
// userfaultfd when registered).
int Discard(void* addr, size_t bytes);
// A range of DiscardRanges.
struct Span {
  void* addr;
  size_t bytes;
};
// Discard of many ranges, with one TLB flush for all where the kernel can: one
// process_madvise(PIDFD_SELF, MADV_DONTNEED) per 256 ranges (Linux 6.13 and later take
// MADV_DONTNEED there for the calling process, and flush once per call; a flush is an IPI to
// every CPU the process ran on, far dearer on virtual CPUs than the batched call's cost per
// page). Where the kernel refuses (older kernels: EINVAL
// or EBADF), or a call stops part way, the rest go one madvise each, and the refusal is
// remembered for the process. Returns 0 or the first negative errno (the ranges after it are
// still discarded).
int DiscardRanges(const Span* spans, size_t n);
// Touches every page of a writable range so it is backed now (MADV_POPULATE_WRITE, or a write
// per page where the kernel lacks it).
int Populate(void* addr, size_t bytes);

// pthread_atfork(3), registered for this library (so dlclose drops the handlers). It calls
// glibc's __register_atfork, as pthread_atfork's own stub in libc_nonshared.a does, but through
// the GOT: the stub's PLT jump sits at the far end of a library's code and would map another
// 64 KiB of it in every process at start. Returns 0 or a negative errno, like every call here.
int AtFork(void (*prepare)(), void (*parent)(), void (*child)());

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
// Reads a whole (sysfs) file with read(2), trailing newlines and spaces dropped. No iostreams: the
// preload library runs topology discovery before main, and an ifstream would initialise
// libstdc++'s locales, about 0.5 MB of code, in every program. Returns 0 or a negative errno.
int ReadWholeFile(const char* path, std::string* out);
// The names in a directory, "." and ".." left out, in no order. Returns 0 or a negative errno.
int ListDir(const char* path, std::vector<std::string>* names);
// realpath(3) into `out`. Returns 0 or a negative errno (`out` untouched).
int RealPath(const char* path, std::string* out);

uint64_t MonotonicNanos();
// CPU time the calling thread has used so far, in *ns: clock_gettime on its CPU-time clock
// (pthread_getcpuclockid of pthread_self). Only the thread itself may ask (another thread's clock
// id dies with it). 0, or a negative errno with *ns untouched.
int ThreadCpuNanos(uint64_t* ns);
// Bytes glibc's malloc holds from the system: its arenas (blocks in use and free ones it keeps)
// and its mmapped blocks. Takes each arena's lock; never call it from a signal handler.
uint64_t LibcHeapBytes();
// The calling process's resident memory in bytes (/proc/self/statm's resident pages: the
// kernel's running count, not a walk), or 0 when it cannot be read. The file stays open (at a
// KeepHigh number; a forked child opens its own) and is read from its start at each call: any
// thread may call it while the program opens and closes descriptors (os_fd.cc says why).
uint64_t ProcessResidentBytes();
// Bytes of [addr, addr+bytes) (page aligned) that are resident (mincore), or a negative errno
// (-ENOMEM: part of the range is not mapped). One system call per 2 MiB of the range.
long ResidentBytes(const void* addr, size_t bytes);
// mincore of `pages` pages from `addr` (page aligned): bit 0 of vec[i] is set when page i is
// resident. 0, or a negative errno.
int ResidentMap(const void* addr, size_t pages, unsigned char* vec);
// The calling thread's stack mapping: its lowest address and size. The one call here that may
// allocate (pthread_getattr_np builds a CPU set with malloc): only for threads whose malloc is
// glibc's. 0 or a negative errno.
int ThreadStack(void** low, size_t* bytes);

// ---- userfaultfd (the remote tier's pager), eventfd, poll, pagemap ----
// These return Status: they are not called inside the allocator, and they allocate only to build
// an error's message. Every userfaultfd call of the project is here (base/os_uffd.cc).

struct Uffd {
  int fd = -1;
  bool write_protect = false;   // UFFD_FEATURE_PAGEFAULT_FLAG_WP was granted
  bool user_mode_only = false;  // kernel-mode faults (copy_from_user) are not reported
  bool fork_events = false;     // UFFD_FEATURE_EVENT_FORK was granted (asked for, and allowed)
  bool wp_async = false;        // UFFD_FEATURE_WP_ASYNC: the kernel resolves write-protect faults
  bool move = false;            // UFFD_FEATURE_MOVE: UFFDIO_MOVE may be used (base/os_pagemap.h)
};
// Opens a userfaultfd (O_CLOEXEC | O_NONBLOCK) and negotiates the API, asking for write-protect
// faults and falling back to missing faults only. Tries the system call, then /dev/userfaultfd
// (where the system call is refused to non-root users), then UFFD_USER_MODE_ONLY. NotSupported
// or PermissionDenied (with the errno) when none works. With `fork_events`, UFFD_EVENT_FORK is
// asked for too (with write-protect only): a fork() then blocks until the descriptor's reader has
// read the event, which carries a new descriptor for the child's registered ranges; where the
// kernel refuses it (CAP_SYS_PTRACE is needed since 5.11) the descriptor goes without.
StatusOr<Uffd> UffdOpen(bool fork_events = false);
// Registers [addr, addr+bytes) for missing faults, and write-protect faults when `wp`.
Status UffdRegister(int uffd, void* addr, size_t bytes, bool wp);
// Unregisters; a range that never was registered is not an error.
Status UffdUnregister(int uffd, void* addr, size_t bytes);
// Sets or clears write protection. Clearing does not wake waiters (see UffdWake). EAGAIN is
// retried as UffdCopy does.
Status UffdWriteProtect(int uffd, void* addr, size_t bytes, bool protect);
// What the calling thread does when UFFDIO_COPY, _ZEROPAGE or _WRITEPROTECT answers EAGAIN. The
// kernel refuses them while the address space changes: during a fork() of a process whose
// userfaultfd asked for fork events, from the copy of its ranges until the descriptor's reader
// has read the fork event (fork() waits for that read). A thread that is that reader must read
// the event while it retries, or neither call ever returns: its handler does (UffdBacklog). Each
// retry then yields the CPU. Thread-local; nullptr removes it. Not for the
// allocator's fast paths (nothing here is).
using UffdAgainFn = void (*)(void* arg);
void SetUffdAgainHandler(UffdAgainFn fn, void* arg);
// Installs `bytes` from `src` at `dst` (write-protected when `wp`) / zero pages at `dst`. Nobody
// is woken (the caller publishes its state first, then calls UffdWake). A page already present
// (EEXIST) counts as installed and the rest of the range is still installed; EAGAIN (the mm
// changed under it) is retried, the calling thread's UffdAgainHandler called before each retry.
Status UffdCopy(int uffd, void* dst, const void* src, size_t bytes, bool wp);
// The same with zeros; with `present`, *present gets the number of pages that were already
// there (EEXIST: installed by someone else, left as they are).
Status UffdZeroPage(int uffd, void* dst, size_t bytes, size_t* present = nullptr);
// True when the address space `uffd` serves is gone (its process exited or called exec): a
// UFFDIO_WRITEPROTECT clearing protection on [addr, addr+bytes), harmless where it is alive,
// fails with ESRCH. The range must be registered there with write-protect.
bool UffdMmGone(int uffd, void* addr, size_t bytes);
// Wakes the threads faulted on [addr, addr+bytes) so they retry their access.
void UffdWake(int uffd, void* addr, size_t bytes);
// The floor under a remote fault: the kernel's primitives alone, with no pager and no server.
// `faults` fresh pages of a private range registered for missing faults with a userfaultfd of its
// own (no features asked for), each touched once, in order, by the calling thread, while a
// handler thread blocked in poll on the descriptor reads each fault and installs its page with
// one UFFDIO_COPY, which wakes the toucher (shared/tools/uffd-floor.c's handler). Returns each
// touch's time in nanoseconds, in touch order; the status of the first call that failed
// otherwise (a copy that fails installs a zero page instead, so no touch waits forever).
// Allocates the result; starts and joins one thread.
StatusOr<std::vector<uint64_t>> UffdFaultFloor(size_t faults);
// The same touches served with no handler thread: the range's userfaultfd has
// UFFD_FEATURE_SIGBUS, so each missing fault raises SIGBUS on the touching thread itself, whose
// handler installs the page with one UFFDIO_COPY and returns (the touch runs again). The floor of
// a fault path in which the faulting thread fetches its own page. SIGBUS's action is ours while
// it runs (a SIGBUS outside the range goes to the action before) and is put back before it
// returns. NotSupported where the kernel lacks the feature; one measurement at a time.
StatusOr<std::vector<uint64_t>> UffdSignalFloor(size_t faults);
struct UffdFault {
  uintptr_t address = 0;  // the faulting address (not page aligned)
  bool write = false;     // a write access
  bool wp = false;        // a write to a write-protected page (else: a missing page)
  uint32_t tid = 0;       // the faulting thread (UFFD_FEATURE_THREAD_ID), 0 where not reported
  int fork_fd = -1;       // not a fault: a UFFD_EVENT_FORK, the child's new descriptor (ours now)
};
// Reads up to `max` page-fault and fork events without blocking (other events are skipped).
// Returns the count, 0 when none is queued. A count under `max` (skipped events aside) means the
// queue was empty when read: faults reported since then make the descriptor readable again. A fork event's descriptor is open in this process
// from then on: the caller closes it.
StatusOr<size_t> UffdReadFaults(int uffd, UffdFault* out, size_t max);

// An eventfd (non-blocking, close-on-exec) used to stop a thread that waits with WaitReadable.
StatusOr<int> EventFd();
void EventFdSignal(int fd);
// Makes it unreadable again (reads the count; nothing happens when it was not signalled).
void EventFdClear(int fd);
// Waits until `fd` (returns 0) or `stop_fd` (returns 1) is readable. EINTR is retried. With
// `spin_ns`, polls without sleeping for that long first (a thread that sleeps is woken across
// CPUs, tens of microseconds on these VMs), then sleeps; *slept (when given) says whether it
// came to that.
StatusOr<int> WaitReadable(int fd, int stop_fd, uint64_t spin_ns = 0, bool* slept = nullptr);
// Waits up to timeout_ms (-1: no limit) until one of the `n` (at most 65) descriptors is
// readable, or writable where writable[i] is nonzero (writable may be null: none), or has an
// error or hang-up to report: the lowest index of those, -1 on timeout. EINTR is retried. With
// `spin_ns`, polls without sleeping for that long first (within the timeout), as WaitReadable;
// *slept (when given) says whether it came to a poll that may sleep.
StatusOr<int> WaitAnyReady(const int* fds, const uint8_t* writable, size_t n, int timeout_ms,
                           uint64_t spin_ns = 0, bool* slept = nullptr);
// Waits up to timeout_ms for `fd` (returns 0) or `stop_fd` (1) to be readable; 2 when the time
// passed (or a signal interrupted), a negative errno when poll failed.
int WaitReadableFor(int fd, int stop_fd, int timeout_ms);
// Sleeps up to timeout_ms or until `stop_fd` is readable: 1 when stopped, 0 on timeout.
int WaitStop(int stop_fd, int timeout_ms);
// Replaces [addr, addr+bytes) with fresh private anonymous memory (zero pages, no userfaultfd
// registration, default memory policy). 0 or a negative errno.
int ReplaceAnonymous(void* addr, size_t bytes);
// A connected pair of Unix stream sockets, both ends close-on-exec. An end reads end of file
// once every copy of the other end is closed (by close, exit or exec). 0 or a negative errno.
int SocketPairCloexec(int fds[2]);
// Sends descriptor `fd` (and one byte) over Unix socket `sock` (SCM_RIGHTS). Allocates nothing
// and takes no lock: it may run inside fork(). 0 or a negative errno.
int SendFd(int sock, int fd);
// The descriptor SendFd sent on the other end (close-on-exec here), without waiting: -EAGAIN
// when none is queued, -ENOENT at end of file, another negative errno on failure.
int RecvFd(int sock);
// Opens `path` for writing (created 0644; truncated, or appended to). A descriptor or -errno.
int OpenForWrite(const char* path, bool append);

// /proc/self/pagemap: a descriptor (or a negative errno), and the entries of `n` pages from
// `addr` (false when they cannot be read: the caller must then assume every page has contents).
int PagemapOpen();
bool ReadPagemap(int pagemap_fd, const void* addr, size_t n, uint64_t* entries);
// Whether a pagemap entry's page has contents (present or swapped).
inline bool PagemapPopulated(uint64_t entry) { return (entry & (3ull << 62)) != 0; }
int Close(int fd);

// Descriptors the runtime keeps (os_fd.cc): `fd` moved to the top of the descriptor table, at or
// above KeepHighFloor(), close-on-exec; the number it had is closed. A program that closes one of
// its own descriptors twice (bash does, after every pipeline) closes whatever the kernel gave that
// number in between; at a low number that could be the runtime's, whose next read or close then
// hit the program's next pipe. Returns the new descriptor, or `fd` itself where the table has no
// room up there (RLIMIT_NOFILE too low) or fd < 0.
int KeepHigh(int fd);
// The lowest number KeepHigh places a descriptor at: three quarters of the soft RLIMIT_NOFILE at
// most 1024 (768 under the usual limit of 1024); 0 when the limit is under 256 (nothing moved).
int KeepHighFloor();
// /proc/self files the runtime's threads use round after round, each opened once per process (at
// a KeepHigh number; a forked child opens its own on first use): read with pread at offset 0
// (the kernel writes the file afresh), written with write. A negative errno when it cannot be
// opened.
enum class ProcSelf { kStatm = 0, kClearRefs = 1 };
int ProcSelfFile(ProcSelf which);

}  // namespace tiermem::os
