#!/usr/bin/env bash
# `tiermem advise` on a program with a SIGSEGV handler of its own (docs/advise.md, "Reads in the
# record"), installed with sigaction (the preload library keeps tiermem's handler and chains to
# the program's) or with the raw system call (which replaces tiermem's): either way protection
# sampling stops without the program meeting a protected page, and with --record-reads protect
# the advice says so (`record_reads_lost`, a line on stderr); the default (auto) records again
# with uffd (soft eviction, no handler) at once: nothing lost, reads seen.
# Usage: advise_segv_test.sh TIERMEM OWN_SEGV_PROG
set -uo pipefail
tm=$1 prog=$2
. "$(dirname "$0")/advise_lib.sh"

# 32 MiB written once, then reads only, nine in ten on a tenth of it; 5 ms policy rounds.
args=(--json --check-share -1 --tcp-us 50 --set sample_interval_ms=5)
for how in sigaction raw; do
  extra=()
  [ "$how" = raw ] && extra=(raw)
  for mode in protect auto; do
    "$tm" advise "${args[@]}" --record-reads $mode -- "$prog" 32 20000000 "${extra[@]}" > "$work/$mode.$how.out" 2> "$work/$mode.$how.log"; rc=$?
    [ $rc -eq 0 ] || fail "advise ($mode, $how) gave status $rc (139: a sampled page reached the program's handler)"
    tail -1 "$work/$mode.$how.out" > "$work/$mode.$how.json"
  done
  grep -q "stopped the record's protect sampling" "$work/protect.$how.log" || fail "the lost reads are not said ($how)"
  ! grep -q "recording again" "$work/protect.$how.log" || fail "an explicit protect recorded again ($how)"
  grep -q "stopped the record's protect sampling .*; recording again with --record-reads uffd" "$work/auto.$how.log" ||
    fail "auto's record made again is not said ($how)"
  python3 - "$work/auto.$how.json" "$work/protect.$how.json" << 'PY' || fail "the advice does not say how its reads were recorded ($how)"
import json, sys
uffd, protect = (json.load(open(p)) for p in sys.argv[1:])
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
PY
done
echo PASS
