# Sourced, not run: the kernel's side of a side-by-side run, for the scripts that put a program
# under the kernel's swap in a memory cgroup of its own (kernel-swap-map.sh, sort-limits.sh).
# One place for the cgroup (v2: memory.max with swap unlimited; v1: a child of this process's
# memory cgroup with memory.limit_in_bytes, swap unlimited where memsw is not set) and its swap
# file. The bench's kernel_swap setups make theirs in C++ (bench/kernel_swap.h).
#
# kernel_swap_setup NAME LIMIT SWAPFILE SWAP_BYTES
#   Makes the cgroup NAME-PID with LIMIT (bytes, or K/M/G) and a swap file of SWAP_BYTES at
#   SWAPFILE (on ext4 or xfs), swapped on. Sets KS_CG (the cgroup's folder) and KS_WHY: empty
#   when ready, else why not (nothing is left behind then but what kernel_swap_cleanup removes).
# kernel_swap_majfaults   the cgroup's major faults so far.
# kernel_swap_exec CMD... runs CMD in the cgroup (exec'd by a shell that joined it).
# kernel_swap_cleanup     swap off, the swap file and the cgroup removed; safe to call twice.
KS_CG=""
KS_SWAP=""
KS_WHY=""

kernel_swap_setup() {
  local name=$1 limit=$2 swapfile=$3 swap_bytes=$4 v1 limit_file
  KS_WHY=""
  if [ "$(id -u)" != 0 ]; then
    KS_WHY="needs root"
    return 0
  fi
  v1=$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
  if [ -e /sys/fs/cgroup/cgroup.controllers ]; then
    KS_CG=/sys/fs/cgroup/$name-$$
    limit_file=memory.max
  elif [ -n "$v1" ] && [ -d "/sys/fs/cgroup/memory$v1" ]; then
    KS_CG=/sys/fs/cgroup/memory${v1%/}/$name-$$
    limit_file=memory.limit_in_bytes
  else
    KS_WHY="no memory cgroup found"
    return 0
  fi
  if mkdir "$KS_CG" 2>/dev/null && numfmt --from=iec "$limit" > "$KS_CG/$limit_file" &&
     { [ "$limit_file" = memory.limit_in_bytes ] || echo max > "$KS_CG/memory.swap.max"; } &&
     KS_SWAP=$swapfile && fallocate -l "$swap_bytes" "$swapfile" && chmod 600 "$swapfile" &&
     mkswap -q "$swapfile" >/dev/null && swapon "$swapfile"; then
    return 0
  fi
  KS_WHY="the cgroup or the swap file could not be made"
}

kernel_swap_majfaults() {
  awk '$1 == "pgmajfault" {print $2}' "$KS_CG/memory.stat"
}

kernel_swap_exec() {
  bash -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' _ "$KS_CG" "$@"
}

kernel_swap_cleanup() {
  if [ -n "$KS_SWAP" ]; then
    swapoff "$KS_SWAP" 2>/dev/null || true
    rm -f "$KS_SWAP"
  fi
  if [ -n "$KS_CG" ]; then rmdir "$KS_CG" 2>/dev/null || true; fi
  KS_SWAP=""
  KS_CG=""
}
