#!/usr/bin/env bash
# tiermemctl plot: draws a timeline of JSON lines, and refuses an empty or malformed file and a
# missing gnuplot with one line each and a non-zero exit.
#   plot_test.sh TIERMEMCTL
set -euo pipefail
ctl=$1
work=$(mktemp -d /tmp/tiermem-plot-test-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Expects a non-zero exit and exactly one line on stderr containing $1.
refuses() {
  local want=$1; shift
  if "$@" > "$work/out" 2> "$work/err"; then fail "$* succeeded"; fi
  [ "$(wc -l < "$work/err")" -eq 1 ] || { cat "$work/err"; fail "$* printed more than one line"; }
  grep -qF -- "$want" "$work/err" || { cat "$work/err"; fail "$*: expected '$want'"; }
}

# Ten seconds of a process whose heap grows onto the remote tier: cumulative counters.
t0=1700000000000000000
for i in $(seq 0 10); do
  printf '{"t_ns":%d,"tiers":[{"tier":"dram","allocated_bytes":%d},{"tier":"cxl","allocated_bytes":0},{"tier":"remote","allocated_bytes":%d}],"resident_bytes":%d,"dram_resident_bytes":%d,"remote_faults":%d,"moves":[[0,0,%d],[0,0,0],[%d,0,0]],"pages_evicted":%d,"sampling_faults":%d}\n' \
    $((t0 + i * 1000000000)) $((16 << 20)) $((i << 22)) $((16 << 20)) $((16 << 20)) $((i * 100)) \
    $((i * 1024)) $((i * 10)) $((i * 1024)) $((i * 50))
done > "$work/timeline.jsonl"

refuses "no timeline lines" "$ctl" plot /dev/null -o "$work/empty.png"
echo '{"t_ns": 1, "tiers": [' > "$work/bad.jsonl"
refuses "bad.jsonl:1: not a timeline line" "$ctl" plot "$work/bad.jsonl" -o "$work/bad.png"
{ head -1 "$work/timeline.jsonl"; echo '{"tiers": []}'; } > "$work/no_time.jsonl"
refuses "no_time.jsonl:2: not a timeline line (no t_ns)" "$ctl" plot "$work/no_time.jsonl" -o "$work/x.png"
refuses "plot needs gnuplot" "$ctl" plot "$work/timeline.jsonl" -o "$work/x.png" --gnuplot /nonexistent/gnuplot
refuses "cannot read it" "$ctl" plot "$work/missing.jsonl" -o "$work/x.png"

command -v gnuplot > /dev/null || { echo "SKIP: gnuplot is not installed (apt install gnuplot-nox)"; exit 77; }
"$ctl" plot "$work/timeline.jsonl" -o "$work/out.png" > "$work/out" || fail "plot failed: $(cat "$work/out")"
grep -q "11 points over 10.0 s" "$work/out" || fail "unexpected summary: $(cat "$work/out")"
[ "$(head -c 4 "$work/out.png" | od -An -c | tr -d ' ')" = '211PNG' ] || fail "out.png is not a PNG"
echo "OK: plot draws a timeline and refuses bad input"
