#!/bin/bash
# Side by side: preloaded programs with TIERMEM_TRACK=off and TIERMEM_TRACK=scan (no DRAM limit,
# no remote tier: what the write scan costs where nothing needs to move), interleaved --rounds
# times. One JSON line per run: wall time, the policy thread's CPU, the scan's time, pages
# scanned and found written (from the TIERMEM_STATS exit line).
# Usage: scripts/track-compare.sh BUILD_DIR INPUT_FILE [ROUNDS]
#   INPUT_FILE: the text GNU sort sorts (any file of lines).
set -euo pipefail
build=${1:?build folder}
input=${2:?a file for sort}
rounds=${3:-3}
preload="$build/allocator/preload/libtiermem-preload.so"
workload="$build/bench/tiermem-malloc-workload"
for f in "$preload" "$workload" "$input"; do
  [ -e "$f" ] || { echo "track-compare: $f not found" >&2; exit 2; }
done
stats=$(mktemp)
trap 'rm -f "$stats"' EXIT
for r in $(seq 1 "$rounds"); do
  for track in off scan; do
    for w in sort mixed; do
      if [ "$w" = sort ]; then cmd=(sort -S 400M -o /dev/null "$input"); else cmd=("$workload" mixed 20); fi
      : > "$stats"
      s=$(date +%s%N)
      env LD_PRELOAD="$preload" TIERMEM_TRACK="$track" TIERMEM_STATS="$stats" "${cmd[@]}" > /dev/null
      e=$(date +%s%N)
      python3 - "$stats" "$r" "$w" "$track" "$((e - s))" <<'PY'
import json, sys
path, rnd, work, track, ns = sys.argv[1:]
d = json.loads(open(path).read().splitlines()[-1])
c = d.get("counters", d)
print(json.dumps({"round": int(rnd), "workload": work, "track": track, "wall_s": int(ns) / 1e9,
                  "track_mode": c["track_mode"], "policy_cpu_s": c["policy_cpu_ns"] / 1e9,
                  "track_scan_s": c["track_scan_ns"] / 1e9, "track_pages_scanned": c["track_pages_scanned"],
                  "track_written_pages": c["track_written_pages"], "policy_rounds": c["policy_rounds"]}))
PY
    done
  done
done
