#!/usr/bin/env bash
# `tiermem advise` on a program with a SIGSEGV handler of its own (docs/advise.md, "Reads in the
# record"). Installed with sigaction, the preload library chains tiermem's handler to it and
# protection sampling goes on: --record-reads protect keeps its reads. Installed with the raw
# system call (replacing tiermem's), protection sampling stops there without the program meeting
# a protected page, and with --record-reads protect the advice says so (`record_reads_lost`, a
# line on stderr); the default (auto) records again with uffd (soft eviction, no handler):
# nothing lost, reads seen.
# Usage: advise_segv_test.sh TIERMEM OWN_SEGV_PROG
set -uo pipefail
tm=$1 prog=$2
. "$(dirname "$0")/advise_lib.sh"

# 32 MiB written once, then reads only, nine in ten on a tenth of it; 5 ms policy rounds.
args=(--json --check-share -1 --tcp-us 50 --set sample_interval_ms=5)
for run in protect:raw auto:raw protect:sigaction; do
  mode=${run%:*} how=${run#*:}
  extra=()
  [ "$how" = raw ] && extra=(raw)
  "$tm" advise "${args[@]}" --record-reads $mode -- "$prog" 32 20000000 "${extra[@]}" > "$work/$mode.out" 2> "$work/$mode.log"; rc=$?
  [ $rc -eq 0 ] || fail "advise ($mode, $how) gave status $rc (139: a sampled page reached the program's handler)"
  tail -1 "$work/$mode.out" > "$work/$mode.$how.json"
  [ "$how" = raw ] && mv "$work/$mode.log" "$work/$mode.$how.log"
done
grep -q "stopped the record's protect sampling" "$work/protect.raw.log" || fail "the lost reads are not said"
! grep -q "recording again" "$work/protect.raw.log" || fail "an explicit protect recorded again"
grep -q "stopped the record's protect sampling" "$work/protect.log" && fail "sampling stopped for a handler set with sigaction"
grep -q "stopped the record's protect sampling .*; recording again with --record-reads uffd" "$work/auto.raw.log" ||
  fail "auto's record made again is not said"
python3 - "$work/auto.raw.json" "$work/protect.raw.json" "$work/protect.sigaction.json" << 'PY' || fail "the advice does not say how its reads were recorded"
import json, sys
uffd, protect, chained = (json.load(open(p)) for p in sys.argv[1:])
assert uffd["record_reads"] == "uffd" and uffd["record_reads_lost"] is False, uffd
first, last = uffd["record"]["attempts"]
assert first["reads"] == "protect" and first["reads_lost"] and first["exit"]["as_plain"], first
assert last["reads"] == "uffd" and not last["reads_lost"] and "recorded again with uffd" in uffd["record"]["why"], uffd["record"]
assert protect["record_reads"] == "protect" and protect["record_reads_lost"] is True, protect
assert len(protect["record"]["attempts"]) == 1 and protect["record"]["asked"] == "protect", protect["record"]
# The write scan alone sees the fill (about a page-round a page); the soft sampler the reads of
# the hot tenth, round after round.
assert protect["record_touches"] < 2.5 * protect["pages_seen"], protect
assert uffd["record_touches"] > 2 * protect["record_touches"], (uffd["record_touches"], protect["record_touches"])
# Chained to (sigaction): protection sampling saw the reads as well.
assert chained["record_reads"] == "protect" and chained["record_reads_lost"] is False, chained
assert chained["record_touches"] > 2 * protect["record_touches"], (chained["record_touches"], protect["record_touches"])
PY
echo PASS
