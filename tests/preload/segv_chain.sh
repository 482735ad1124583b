#!/usr/bin/env bash
# A program that installs its own SIGSEGV handler while protection sampling runs (segv_chain.c,
# as redis-server does at start) keeps tiermem's handler in the kernel under the preload library
# (allocator/preload/signals.cc), and protection sampling stops (docs/tiering.md: a program that
# handles its own faults is where system calls on sampled heap buffers fail with EFAULT). Once
# `tiermemctl stat` shows pages armed and accesses sampled, the program sets its handler (with
# sigaction or signal: MODE) and at once reads every page of its heap, pages armed before its
# call among them: none of those may reach its handler (tiermem's handler, still installed,
# lifts them). Then the mode must become faults (every page disarmed, one warning) while the
# program churns its heap with no stray SIGSEGV; its own fault must reach its handler, and the
# previous actions it is given back are its own. Without the hand-over (the library of 24953ce)
# the program's call replaced tiermem's handler and was given it back as the previous action,
# and a page armed before the call reached the program's handler; with the hand-over but
# sampling kept on, the mode stayed protect.
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
touch "$work/go"
wait_for "mode == 'faults'" ||
  fail "sampling went on after the program set its SIGSEGV handler (mode now: $(counters sampling_mode))"
touch "$work/stop"
wait "$pid"
rc=$?
pid=
[ $rc -eq 0 ] || fail "the program exited $rc (139: a SIGSEGV it did not cause reached its handler)"
[ "$(cat "$work/out")" = ok ] || fail "the program printed: $(cat "$work/out")"
grep -qE "^tiermem stats: .*; policy faults: [0-9]+ rounds" "$work/err" || fail "the exit report's sampling mode is not faults"
[ "$(grep -c "the program installed its own SIGSEGV handler; access sampling stops" "$work/err")" = 1 ] ||
  fail "the runtime did not warn once that sampling stops"
echo "OK ($mode): sampling stopped after the program set its handler; no sampled page reached it, its own fault did"
