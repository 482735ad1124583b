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
. "$here/kernel-swap.sh"
work=$(mktemp -d /var/tmp/kernel-swap-map.XXXXXX)
cleanup() {
  kernel_swap_cleanup
  rm -rf "$work"
}
trap cleanup EXIT
cc -O2 -Wall -Wextra -o "$work/swap_map" "$here/swap_map.c"
kernel_swap_setup kernel-swap-map "$limit" "$work/swap" $((2 << 30))
[ -z "$KS_WHY" ] || { echo "kernel-swap-map: $KS_WHY" >&2; exit 1; }
before=$(kernel_swap_majfaults)
s=$(date +%s%N)
kernel_swap_exec "$@" &
pid=$!
"$work/swap_map" "$pid" "$interval" &
mapper=$!
rc=0; wait "$pid" || rc=$?
e=$(date +%s%N)
wait "$mapper" || true
after=$(kernel_swap_majfaults)
echo "exit $rc, $(( (e - s) / 1000000 )) ms, major faults $((after - before)), limit $limit"
