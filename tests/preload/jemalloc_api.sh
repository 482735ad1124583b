#!/usr/bin/env bash
# jemalloc_api.c (a program linked against libjemalloc) under the preload library, where every
# check must pass, and without it, where it must fail its first check (malloc_stats_print is then
# jemalloc's): so a pass shows that the answers are tiermem's.
# usage: jemalloc_api.sh LIBRARY PROGRAM   (exit 77 when libjemalloc cannot be loaded)
set -uo pipefail
lib=$1 prog=$2
if ldd "$prog" | grep -q 'not found'; then
  echo "skip: $prog cannot load its libraries (libjemalloc2 not installed?)"
  ldd "$prog"
  exit 77
fi
if out=$(env -u LD_PRELOAD "$prog" 2>&1); then
  echo "FAIL: without $lib the program passed: its checks do not tell tiermem from jemalloc"
  exit 1
fi
grep -q "is not tiermem's" <<< "$out" || { echo "FAIL: without the library: $out"; exit 1; }
LD_PRELOAD=$lib "$prog" || { echo "FAIL: under $lib (exit $?)"; exit 1; }
echo "ok: jemalloc's API answered by $lib"
