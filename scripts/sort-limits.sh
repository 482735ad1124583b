#!/bin/bash
# Side by side: a preloaded GNU sort of one file with no limit, then under TIERMEM_DRAM_LIMIT at
# multiples of its unlimited peak RSS (a memd on loopback started here as the remote tier), and,
# where this runs as root with a memory cgroup (v2, or v1's memory controller), plain sort under the kernel's swap in a memory cgroup at
# --kernel-limit; interleaved --rounds times. Prints one JSON object: per setup the median wall
# time, its ratio to tiermem unlimited, and the medians of remote faults and pages evicted (from
# the TIERMEM_STATS exit line) or major faults (the kernel's).
# Usage: scripts/sort-limits.sh BUILD_DIR INPUT_FILE [ROUNDS] [FACTORS] [KERNEL_LIMIT] [SWAP_DIR]
#   INPUT_FILE: the text sort sorts; FACTORS: multiples of the unlimited peak RSS (default
#   "3 1.5"); KERNEL_LIMIT: bytes with K/M/G (default: none, the kernel's side is left out);
#   SWAP_DIR: where the kernel side's swap file goes (ext4 or xfs, default /var/tmp). With a
#   KERNEL_LIMIT tiermem also runs at that limit, beside the kernel.
set -euo pipefail
build=${1:?build folder}
input=${2:?a file for sort}
rounds=${3:-3}
factors=${4:-3 1.5}
kernel_limit=${5:-}
swap_dir=${6:-/var/tmp}
preload="$build/allocator/preload/libtiermem-preload.so"
memd="$build/tools/memd/tiermem-memd"
for f in "$preload" "$memd" "$input"; do
  [ -e "$f" ] || { echo "sort-limits: $f not found" >&2; exit 2; }
done
work=$(mktemp -d)
memd_pid=""
. "$(cd "$(dirname "$0")" && pwd)/kernel-swap.sh"
cleanup() {
  [ -n "$memd_pid" ] && kill "$memd_pid" 2>/dev/null && wait "$memd_pid" 2>/dev/null
  kernel_swap_cleanup
  rm -rf "$work"
}
trap cleanup EXIT
port=$((20000 + $$ % 20000))
"$memd" --capacity 16G --listen "127.0.0.1:$port" 2> "$work/memd.log" &
memd_pid=$!
for _ in $(seq 1 100); do grep -q serving "$work/memd.log" && break; sleep 0.1; done
grep -q serving "$work/memd.log" || { echo "sort-limits: memd did not start: $(cat "$work/memd.log")" >&2; exit 1; }

# run NAME ENV...: one sort; appends "name wall_s faults evicted" to $work/runs.
run() {
  local name=$1; shift
  : > "$work/stats"
  local s e
  s=$(date +%s%N)
  /usr/bin/time -f "%M" -o "$work/rss" env LC_ALL=C "$@" sort -o "$work/out" "$input"
  e=$(date +%s%N)
  LC_ALL=C sort -c "$work/out" || { echo "sort-limits: $name: output not in order" >&2; exit 1; }
  local fe="0 0"
  if [ -s "$work/stats" ]; then
    fe=$(python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
c = [l for l in lines if l.get("command") == "sort"][-1]
c = c.get("counters", c)
print(c.get("remote_faults", 0), c.get("pages_evicted", 0))' "$work/stats")
  fi
  echo "$name $(( (e - s) / 1000 )) $fe $(cat "$work/rss")" >> "$work/runs"
}

# kernel NAME LIMIT: plain sort in a memory cgroup of LIMIT with a swap file of its own.
kernel() {
  local before after
  before=$(kernel_swap_majfaults)
  local s e
  s=$(date +%s%N)
  kernel_swap_exec env LC_ALL=C sort -o "$work/out" "$input"
  e=$(date +%s%N)
  LC_ALL=C sort -c "$work/out" || { echo "sort-limits: kernel: output not in order" >&2; exit 1; }
  after=$(kernel_swap_majfaults)
  echo "kernel_swap $(( (e - s) / 1000 )) $((after - before)) 0 0" >> "$work/runs"
}

# The scale: tiermem unlimited's peak RSS (KiB) in one run first.
run probe LD_PRELOAD="$preload" TIERMEM_STATS="$work/stats"
peak_kb=$(awk '{print $5}' "$work/runs")
: > "$work/runs"
kernel_note="not asked (no KERNEL_LIMIT)"
if [ -n "$kernel_limit" ]; then
  kernel_swap_setup tiermem-sort-limits "$kernel_limit" "$swap_dir/tiermem-sort-limits-$$.swap" $((peak_kb * 2048))
  kernel_note=$KS_WHY
fi
for r in $(seq 1 "$rounds"); do
  run unlimited LD_PRELOAD="$preload" TIERMEM_STATS="$work/stats"
  for f in $factors; do
    limit=$(python3 -c "print(int($f * $peak_kb * 1024) // 4096 * 4096)")
    run "x$f" LD_PRELOAD="$preload" TIERMEM_STATS="$work/stats" TIERMEM_DRAM_LIMIT="$limit" \
      TIERMEM_REMOTE="tcp://127.0.0.1:$port"
  done
  if [ -n "$kernel_limit" ]; then
    run at_kernel_limit LD_PRELOAD="$preload" TIERMEM_STATS="$work/stats" TIERMEM_DRAM_LIMIT="$kernel_limit" \
      TIERMEM_REMOTE="tcp://127.0.0.1:$port"
    if [ -z "$kernel_note" ]; then kernel; fi
  fi
done
python3 - "$work/runs" "$peak_kb" "$rounds" "$input" "$kernel_limit" "$kernel_note" "$factors" <<'PY'
import json, statistics, sys
path, peak_kb, rounds, infile, klimit, knote, factors = sys.argv[1:]
runs = {}
for line in open(path):
    name, us, faults, evicted, rss = line.split()
    runs.setdefault(name, []).append((int(us) / 1e6, int(faults), int(evicted)))
base = statistics.median(t for t, _, _ in runs["unlimited"])
out = {"input": infile, "rounds": int(rounds), "unlimited_peak_rss_bytes": int(peak_kb) * 1024,
       "unlimited_seconds": base, "setups": []}
for f in factors.split():
    r = runs.get("x" + f, [])
    out["setups"].append({"setup": "tiermem", "factor": float(f),
                          "dram_limit_bytes": int(float(f) * int(peak_kb) * 1024) // 4096 * 4096,
                          "seconds": statistics.median(t for t, _, _ in r),
                          "vs_unlimited": statistics.median(t for t, _, _ in r) / base,
                          "remote_faults": statistics.median(x for _, x, _ in r),
                          "pages_evicted": statistics.median(x for _, _, x in r),
                          "seconds_all": [t for t, _, _ in r]})
if klimit:
    r = runs["at_kernel_limit"]
    out["setups"].append({"setup": "tiermem", "limit": klimit, "seconds": statistics.median(t for t, _, _ in r),
                          "vs_unlimited": statistics.median(t for t, _, _ in r) / base,
                          "remote_faults": statistics.median(x for _, x, _ in r),
                          "pages_evicted": statistics.median(x for _, _, x in r), "seconds_all": [t for t, _, _ in r]})
    k = {"setup": "kernel_swap", "limit": klimit}
    if knote:
        k["skipped"] = knote
    else:
        r = runs["kernel_swap"]
        k.update({"seconds": statistics.median(t for t, _, _ in r),
                  "vs_unlimited": statistics.median(t for t, _, _ in r) / base,
                  "major_faults": statistics.median(x for _, x, _ in r), "seconds_all": [t for t, _, _ in r]})
    out["setups"].append(k)
out["unlimited_seconds_all"] = [t for t, _, _ in runs["unlimited"]]
print(json.dumps(out))
PY
