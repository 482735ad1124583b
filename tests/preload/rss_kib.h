// The calling process's resident set in KiB (/proc/self/statm), -1 where it cannot be read. For
// the preload test programs in C (fork_remote.c, fork_outlive.c).
#pragma once

#include <stdio.h>
#include <unistd.h>

static inline long rss_kib(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  long size = 0, rss = 0;
  if (f == NULL) return -1;
  if (fscanf(f, "%ld %ld", &size, &rss) != 2) rss = -1;
  fclose(f);
  return rss * (sysconf(_SC_PAGESIZE) / 1024);
}
