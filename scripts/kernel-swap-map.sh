#!/bin/bash
# Where the kernel's swap takes a program's pages from: runs COMMAND (no preload library) in a
# memory cgroup of LIMIT (v2 memory.max, or v1's memory controller) with a swap file of its own,
# and prints scripts/swap_map.c's lines for it (the largest mapping's pages, the share swapped out
# by part and tenth) every INTERVAL_MS, then the run's time and major faults. Needs root.
# Usage: scripts/kernel-swap-map.sh LIMIT [INTERVAL_MS] -- COMMAND [ARGS...]
#   e.g. scripts/kernel-swap-map.sh 350M -- env LC_ALL=C sort -o /dev/null big.txt
set -euo pipefail
limit=${1:?limit, e.g. 350M}; shift
interval=300
if [ "${1:-}" != "--" ]; then interval=$1; shift; fi
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "kernel-swap-map: no command" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "kernel-swap-map: needs root (a memory cgroup, swapon, another process's pagemap)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /var/tmp/kernel-swap-map.XXXXXX)
cg=""
cleanup() {
  swapoff "$work/swap" 2>/dev/null || true
  [ -n "$cg" ] && rmdir "$cg" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cc -O2 -Wall -Wextra -o "$work/swap_map" "$here/swap_map.c"
v1=$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
if [ -e /sys/fs/cgroup/cgroup.controllers ]; then
  cg=/sys/fs/cgroup/kernel-swap-map-$$; mkdir "$cg"
  numfmt --from=iec "$limit" > "$cg/memory.max"; echo max > "$cg/memory.swap.max"
  stat_file=$cg/memory.stat; key=pgmajfault
elif [ -n "$v1" ] && [ -d "/sys/fs/cgroup/memory$v1" ]; then
  cg=/sys/fs/cgroup/memory${v1%/}/kernel-swap-map-$$; mkdir "$cg"
  numfmt --from=iec "$limit" > "$cg/memory.limit_in_bytes"
  stat_file=$cg/memory.stat; key=pgmajfault
else
  echo "kernel-swap-map: no memory cgroup found" >&2; exit 1
fi
fallocate -l 2G "$work/swap"; chmod 600 "$work/swap"; mkswap -q "$work/swap" >/dev/null; swapon "$work/swap"
before=$(awk -v k=$key '$1 == k {print $2}' "$stat_file")
s=$(date +%s%N)
bash -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' _ "$cg" "$@" &
pid=$!
"$work/swap_map" "$pid" "$interval" &
mapper=$!
rc=0; wait "$pid" || rc=$?
e=$(date +%s%N)
wait "$mapper" || true
after=$(awk -v k=$key '$1 == k {print $2}' "$stat_file")
echo "exit $rc, $(( (e - s) / 1000000 )) ms, major faults $((after - before)), limit $limit"
