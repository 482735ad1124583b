// strerror and strerror_r for the runtime inside libtiermem-preload.so, linked in place of
// glibc's with `-Wl,--wrap` (CMakeLists.txt): the program's own calls still reach glibc.
//
// Why: the runtime starts inside the program's first malloc, and that malloc may come from
// inside a libc function that holds one of libc's locks. glibc's strerror translates its text
// through gettext, which takes the read side of gettext's state lock; bindtextdomain (called by
// library constructors such as libgpg-error's) holds the write side of that lock while it
// allocates. A read lock asked for by the thread that holds the write lock fails (EDEADLK), gettext
// unlocks anyway, and the lock's count goes wrong: the next textdomain call waits forever (every
// procps tool hung so). strerrordesc_np gives the same text, untranslated, with no lock.
#include <stdio.h>
#include <string.h>

#include <cstddef>

namespace {

const char* Describe(int err, char* buf, size_t len) {
  if (const char* d = strerrordesc_np(err)) return d;
  snprintf(buf, len, "Unknown error %d", err);
  return buf;
}

thread_local char unknown[48];

}  // namespace

extern "C" {
__attribute__((visibility("hidden"))) char* __wrap_strerror(int err) {
  return const_cast<char*>(Describe(err, unknown, sizeof(unknown)));
}
// The GNU form (_GNU_SOURCE): returns the text, which need not be in `buf`.
__attribute__((visibility("hidden"))) char* __wrap_strerror_r(int err, char* buf, size_t len) {
  return const_cast<char*>(Describe(err, buf, len));
}
}
