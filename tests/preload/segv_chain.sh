#!/usr/bin/env bash
# A program that installs its own SIGSEGV handler while protection sampling runs (segv_chain.c,
# as redis-server does at start) keeps tiermem's handler in the kernel under the preload library
# (allocator/preload/signals.cc): once `tiermemctl stat` shows pages armed and accesses sampled,
# the program sets its handler (with sigaction or signal: MODE), and sampling must go on (the
# sampled accesses grow past their count at the hand-over, the mode stays protect) while the
# program churns its heap; no sampled page may reach the program's handler, its own fault must,
# and the previous actions it is given back are its own. Before the hand-over the program
# replaced tiermem's handler: sampling stopped (mode faults, no sample after) or a page armed
# before was touched and the program died.
#   segv_chain.sh MODE PRELOAD_LIB TIERMEMCTL PROGRAM
set -uo pipefail
mode=$1 lib=$2 ctl=$3 prog=$4
work=$(mktemp -d /tmp/tiermem-segv-chain-XXXXXX)
trap 'kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
fail() {
  echo "FAIL ($mode): $*"
  tail -5 "$work/err" 2>/dev/null
  exit 1
}

TIERMEM_SAMPLE_MODE=protect TIERMEM_DRAM_LIMIT=1G TIERMEM_SAMPLE_INTERVAL_MS=5 TIERMEM_STATS=stderr \
  LD_PRELOAD="$lib" "$prog" "$mode" "$work/go" "$work/stop" > "$work/out" 2> "$work/err" &
pid=$!

# counters FIELD...: the fields of the program's live counters, one line; fails once it is gone.
counters() {
  "$ctl" stat "$pid" --json 2> /dev/null |
    python3 -c "import json,sys; s=json.load(sys.stdin); print(*[s[k] for k in sys.argv[1:]])" "$@" 2> /dev/null
}
# wait_for CONDITION: polls the counters (every 50 ms, 120 s at most) until CONDITION, a Python
# expression over armed, samples and mode, holds.
wait_for() {
  local end=$((SECONDS + 120))
  while ((SECONDS < end)); do
    kill -0 "$pid" 2> /dev/null || return 1
    if read -r armed samples mode_now < <(counters pages_armed sampling_faults sampling_mode) &&
       python3 -c "import sys; armed, samples, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]; sys.exit(0 if ($1) else 1)" \
         "$armed" "$samples" "$mode_now"; then
      return 0
    fi
    sleep 0.05
  done
  return 1
}

wait_for "armed > 0 and samples > 0 and mode == 'protect'" || fail "protection sampling never armed a page before the hand-over"
read -r samples0 < <(counters sampling_faults)
touch "$work/go"
wait_for "mode == 'protect' and samples >= $samples0 + 200" ||
  fail "sampling stopped after the program set its SIGSEGV handler (samples $samples0 at the hand-over, mode now: $(counters sampling_mode))"
touch "$work/stop"
wait "$pid"
rc=$?
pid=
[ $rc -eq 0 ] || fail "the program exited $rc (139: a SIGSEGV it did not cause reached its handler)"
[ "$(cat "$work/out")" = ok ] || fail "the program printed: $(cat "$work/out")"
grep -qE "^tiermem stats: .*; policy protect: [0-9]+ rounds" "$work/err" || fail "the exit report's sampling mode is not protect"
! grep -q "replaced tiermem's SIGSEGV handler" "$work/err" || fail "the runtime says its handler was replaced"
echo "OK ($mode): $samples0 samples at the hand-over, sampling went on; the program's own fault reached its handler"
