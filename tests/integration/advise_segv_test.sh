#!/usr/bin/env bash
# `tiermem advise` on a program with a SIGSEGV handler of its own (docs/advise.md, "Reads in the
# record"): protection sampling stops there, and the advice says so (`record_reads_lost`); left
# to itself the advisor records again with soft-eviction sampling (uffd), which sees the reads;
# with --record-reads protect given it keeps the write scan's record and says it has no reads.
# Usage: advise_segv_test.sh TIERMEM OWN_SEGV_PROG
set -uo pipefail
tm=$1 prog=$2
. "$(dirname "$0")/advise_lib.sh"

# 32 MiB written once, then reads only, nine in ten on a tenth of it; 5 ms policy rounds.
args=(--json --check-share -1 --tcp-us 50 --set sample_interval_ms=5)
for mode in picked protect; do
  extra=(); [ $mode = protect ] && extra=(--record-reads protect)
  "$tm" advise "${args[@]}" "${extra[@]}" -- "$prog" 32 20000000 > "$work/$mode.out" 2> "$work/$mode.log"; rc=$?
  [ $rc -eq 0 ] || fail "advise ($mode) gave status $rc (139: a sampled page reached the program's handler)"
  tail -1 "$work/$mode.out" > "$work/$mode.json"
done
grep -q "recording again with --record-reads uffd" "$work/picked.log" || fail "the second record is not said"
grep -q "its record has no reads" "$work/protect.log" || fail "the lost reads are not said with --record-reads protect"
python3 - "$work/picked.json" "$work/protect.json" << 'PY' || fail "the advice does not say how its reads were recorded"
import json, sys
picked, protect = (json.load(open(p)) for p in sys.argv[1:])
assert picked["record_reads"] == "uffd" and picked["record_reads_lost"] is True, picked
assert protect["record_reads"] == "protect" and protect["record_reads_lost"] is True, protect
# The write scan alone sees the fill (about a page-round a page); the soft sampler the reads of
# the hot tenth, round after round.
assert protect["record_touches"] < 2.5 * protect["pages_seen"], protect
assert picked["record_touches"] > 2 * protect["record_touches"], (picked["record_touches"], protect["record_touches"])
PY
echo PASS
