#!/usr/bin/env bash
# README's preload example, runnable: a tiermem-memd on loopback, and an unmodified program whose
# heap beyond 64 MiB of DRAM is placed on that memory server.
#   examples/preload_with_memd.sh [BUILD_DIR [PROGRAM ARGS...]]
# Without a program it runs a python3 script that builds and checks 256 MiB of heap objects.
# TIERMEM_MEMD and TIERMEM_PRELOAD_LIB name the binaries when they are not in BUILD_DIR's usual
# places. Exit 77 (skipped) when the program is not installed or tiermem-memd was not built.
set -euo pipefail
build=${1:-build}
[ $# -gt 0 ] && shift
if [ $# -eq 0 ]; then
  # /usr/bin/python3 before a python3 on PATH, which may be a shell shim (pyenv) that runs more
  # processes under the preload library than the one this example is about.
  py=/usr/bin/python3
  [ -x "$py" ] || py=python3
  set -- "$py" -c '
blocks = [bytes([i % 251]) * 4096 for i in range(65536)]  # 256 MiB
assert all(b[0] == i % 251 and b[-1] == i % 251 for i, b in enumerate(blocks))
print("checked", len(blocks), "blocks of 4 KiB")'
fi
memd=${TIERMEM_MEMD:-$build/tools/memd/tiermem-memd}
preload=${TIERMEM_PRELOAD_LIB:-$build/allocator/preload/libtiermem-preload.so}
command -v "$1" > /dev/null || { echo "SKIP: $1 is not installed"; exit 77; }
[ -x "$memd" ] || { echo "SKIP: $memd was not built"; exit 77; }

work=$(mktemp -d /tmp/tiermem-example-XXXXXX)
trap 'kill "$memd_pid" 2> /dev/null || true; rm -rf "$work"' EXIT
# README uses --listen 127.0.0.1:7471; port 0 lets the kernel pick a free one here.
"$memd" --listen 127.0.0.1:0 --port-file "$work/port" --capacity 1G 2> "$work/memd.log" &
memd_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
[ -s "$work/port" ] || { echo "FAIL: tiermem-memd did not start"; cat "$work/memd.log"; exit 1; }

LD_PRELOAD=$preload TIERMEM_DRAM_LIMIT=64M TIERMEM_REMOTE=tcp://127.0.0.1:$(cat "$work/port") \
  TIERMEM_STATS=stderr "$@" 2> "$work/stderr"
grep "^tiermem stats" "$work/stderr" || true
kill "$memd_pid" && wait "$memd_pid" 2> /dev/null || true
# The heap must really have reached the memory server: pages on the remote tier at exit, or
# memd freed the pages the program had written to it when its connection closed.
if ! grep -E "^tiermem stats: tier remote +available" "$work/stderr" |
     grep -qvE "allocated 0 bytes, .*migrated in 0 pages" &&
   ! grep -qE "freed [1-9][0-9]* pages" "$work/memd.log"; then
  echo "FAIL: no page reached the remote tier"
  cat "$work/stderr" "$work/memd.log"
  exit 1
fi
echo "OK: part of the heap was on the remote tier"
