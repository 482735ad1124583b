#!/usr/bin/env bash
# `tiermem advise` on runs that end otherwise than the plain run (docs/advise.md, "Runs that end
# differently"), with a program that passes heap buffers to read(2): under protection sampling
# a read(2) into an armed page fails with EFAULT and the program aborts, in the record only.
# The default (auto) records again with uffd and advises from that; an explicit protect gives no
# advice, with the run's exit and stderr said; a child that dies under a script that exits 0 is
# found by its missing exit report; a check run that fails where the plain run did not ends the
# advice with its status; a record that never ends is stopped at its bound; one the user stops
# ends the advice.
# Usage: advise_exit_test.sh TIERMEM EFAULT_PROG
set -uo pipefail
tm=$1 prog=$2
. "$(dirname "$0")/advise_lib.sh"

# 32 MiB written once, then 300,000 read(2)s into it; 5 ms policy rounds.
args=(--json --check-share -1 --tcp-us 50 --set sample_interval_ms=5)

# auto: protect's record aborts (SIGABRT), recorded again with uffd, advice from that.
"$tm" advise "${args[@]}" -- "$prog" 32 300000 > "$work/auto.out" 2> "$work/auto.log"; rc=$?
[ $rc -eq 0 ] || fail "advise (auto) gave status $rc"
grep -q "record run (--record-reads protect) ended otherwise than the plain run: killed by SIGABRT" "$work/auto.log" ||
  fail "the record's death is not said"
grep -q "  | efault_prog: read(2) into the heap at .*: Bad address" "$work/auto.log" || fail "the record's stderr is not shown"
grep -q "recording again with --record-reads uffd" "$work/auto.log" || fail "the record made again is not said"
tail -1 "$work/auto.out" > "$work/auto.json"

# protect asked: no advice; status 134 (SIGABRT), the JSON says why and has no shares.
"$tm" advise "${args[@]}" --record-reads protect -- "$prog" 32 300000 > "$work/protect.out" 2> "$work/protect.log"; rc=$?
[ $rc -eq 134 ] || fail "advise (protect) gave status $rc, not 134"
grep -q "no advice (--record-reads uffd or auto" "$work/protect.log" || fail "no advice is not said"
! grep -q "recording again" "$work/protect.log" || fail "an explicit protect recorded again"
tail -1 "$work/protect.out" > "$work/protect.json"

# The program aborts under a script that exits 0: its missing exit report says so (status 1).
"$tm" advise "${args[@]}" --record-reads protect -- sh -c '"$0" 32 300000; exit 0' "$prog" > "$work/script.out" \
  2> "$work/script.log"; rc=$?
[ $rc -eq 1 ] || fail "advise (protect, under a script) gave status $rc, not 1"
grep -q "ended otherwise than the plain run: status 0; no exit report from efault_prog" "$work/script.log" ||
  fail "the script's dead child is not named"
tail -1 "$work/script.out" > "$work/script.json"

# A check that fails where the plain run did not (the program exits 7 under a DRAM limit).
"$tm" advise --json --check-share 0.5 --tcp-us 50 --record-reads none --set sample_interval_ms=5 -- \
  sh -c '[ -z "$TIERMEM_DRAM_LIMIT" ] || exit 7; exec "$0" 16 300000' "$prog" > "$work/check.out" 2> "$work/check.log"; rc=$?
[ $rc -eq 7 ] || fail "advise with a failing check gave status $rc, not 7"
grep -q "the check run ended otherwise than the plain run: status 7" "$work/check.log" || fail "the check's failure is not said"
tail -1 "$work/check.out" > "$work/check.json"

# A record that never ends (the program and a child of it wait in protect's record only):
# stopped at its bound (30 s at least), its whole process group with it; recorded again with uffd.
"$tm" advise "${args[@]}" --record-timeout 1 -- "$prog" 16 300000 "$work/hung.pid" > "$work/hang.out" 2> "$work/hang.log"; rc=$?
[ $rc -eq 0 ] || fail "advise on a record that hangs gave status $rc"
grep -q "record run (--record-reads protect) ended otherwise than the plain run: stopped after [0-9]* s, still running" \
  "$work/hang.log" || fail "the stopped record is not said"
[ -s "$work/hung.pid" ] || fail "the waiting child did not start"
# Gone, or a zombie its new parent has not reaped yet: a bounded wait.
hung=$(cat "$work/hung.pid")
for _ in $(seq 100); do
  state=$(awk '{print $3}' "/proc/$hung/stat" 2> /dev/null); [ -z "$state" ] || [ "$state" = Z ] && break
  sleep 0.05
done
[ -z "$state" ] || [ "$state" = Z ] || fail "the stopped record's child $hung is still there ($state)"
tail -1 "$work/hang.out" > "$work/hang.json"

# A record the user stops (SIGTERM to tiermem, passed on to the program): the advice ends with
# the program's status, and no record is made again.
"$tm" advise "${args[@]}" -- "$prog" 16 300000 "$work/stopped.pid" > "$work/stopped.out" 2> "$work/stopped.log" &
adv=$!
for _ in $(seq 600); do [ -s "$work/stopped.pid" ] && break; sleep 0.05; done
[ -s "$work/stopped.pid" ] || fail "the record run did not start"
kill -TERM $adv
wait $adv; rc=$?
[ $rc -eq 143 ] || fail "advise stopped by SIGTERM in its record gave status $rc, not 143"
! grep -q "recording again" "$work/stopped.log" || fail "a record the user stopped was made again"

python3 - "$work"/{auto,protect,script,check,hang}.json << 'PY' || fail "the JSON does not say how the runs ended"
import json, sys
auto, protect, script, check, hang = (json.load(open(p)) for p in sys.argv[1:])
rec = auto["record"]
assert auto["record_reads"] == "uffd" and rec["reads"] == "uffd" and rec["asked"] == "auto", rec
first, last = rec["attempts"]
assert first["reads"] == "protect" and first["exit"]["signal"] == "SIGABRT" and first["exit"]["status"] is None, first
assert not first["exit"]["as_plain"] and "Bad address" in first["exit"]["stderr_tail"], first
assert last["reads"] == "uffd" and last["exit"]["as_plain"] and last["exit"]["status"] == 0, last
assert rec["exit"] == last["exit"] and "recorded again with uffd" in rec["why"], rec
assert auto["plain_exit"]["status"] == 0 and len(auto["shares"]) == 5 and auto["rounds"] >= 2, auto
for j in (protect, script, check):
    assert "shares" not in j and j["error"], j
assert protect["record"]["exit"]["signal"] == "SIGABRT" and len(protect["record"]["attempts"]) == 1, protect
assert script["record"]["exit"]["status"] == 0 and script["record"]["exit"]["no_exit_report"] == ["efault_prog"], script
first, last = hang["record"]["attempts"]
assert first["exit"]["stopped_after_s"] >= 30 and first["exit"]["signal"] == "SIGTERM" and not first["exit"]["as_plain"], first
assert last["reads"] == "uffd" and last["exit"]["as_plain"] and last["exit"]["stopped_after_s"] == 0, last
assert check["check"]["exit"]["status"] == 7 and check["check"]["share"] == 0.5 and check["record"]["exit"]["as_plain"], check
PY
echo PASS
