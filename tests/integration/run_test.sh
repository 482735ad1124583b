#!/usr/bin/env bash
# `tiermem run` (docs/run.md): the program's exit status, signals passed on, a bad option refused
# before the program starts, a memd of the run's own that leaves no process behind.
# Usage: run_test.sh TIERMEM HOTSET_PROG
set -uo pipefail
tm=$1 prog=$2
work=$(mktemp -d /tmp/tiermem-run-test-XXXXXX)
cleanup() { kill ${bg:-} ${orphan:-} 2> /dev/null; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; tail -20 "$work"/*.log 2> /dev/null; exit 1; }
# Waits (bounded, 30 s) until the command succeeds.
wait_for() { for _ in $(seq 600); do "$@" && return 0; sleep 0.05; done; return 1; }
alive() { kill -0 "$1" 2> /dev/null; }
gone() { ! alive "$1"; }

# The program's exit status, and 128+N for a signal.
"$tm" run -q -- sh -c 'exit 7'; rc=$?
[ $rc -eq 7 ] || fail "exit 7 gave $rc"
"$tm" run -q -- sh -c 'kill -KILL $$'; rc=$?
[ $rc -eq 137 ] || fail "a program killed by SIGKILL gave $rc, not 137"
"$tm" run -q -- /nonexistent/program; rc=$?
[ $rc -eq 127 ] || fail "a program that is not there gave $rc, not 127"

# SIGTERM to tiermem reaches the program, and its status is the program's.
"$tm" run -q -- sleep 60 & bg=$!
wait_for pgrep -P $bg -x sleep > /dev/null || fail "the program did not start"
child=$(pgrep -P $bg -x sleep)
kill -TERM $bg
wait $bg; rc=$?
[ $rc -eq 143 ] || fail "SIGTERM gave $rc, not 143"
gone "$child" || fail "the program outlived SIGTERM"
bg=""

# A bad --set is refused, naming it, before the program starts.
"$tm" run --set dram_limt=1G -- touch "$work/started" 2> "$work/bad.log"; rc=$?
[ $rc -eq 2 ] || fail "a bad option name gave $rc, not 2"
grep -q "dram_limt" "$work/bad.log" || fail "the refusal does not name the option"
"$tm" run --set dram_limit=lots -- touch "$work/started" 2> "$work/bad.log"; rc=$?
[ $rc -eq 2 ] && grep -q "lots" "$work/bad.log" || fail "a bad value was not refused by name ($rc)"
"$tm" run --set novalue -- touch "$work/started" 2> /dev/null && fail "--set without = was taken"
[ ! -e "$work/started" ] || fail "the program ran despite a refused option"

# --local-memd: the program's heap beyond a small DRAM limit goes to a memd of the run's own,
# whose pid the program writes down; after the run that memd is gone, and the summary shows
# pages evicted to it and faulted back.
"$tm" run --local-memd 256M --dram-limit 8M -- \
  sh -c 'pgrep -P $PPID -x tiermem-memd > '"$work"'/memd.pid; exec "$0" --size 48M --seconds 1' "$prog" \
  > "$work/out.log" 2> "$work/run.log"; rc=$?
[ $rc -eq 0 ] || fail "the run under --local-memd gave $rc"
grep -q '"verified":true' "$work/out.log" || fail "the program's data did not verify"
memd=$(cat "$work/memd.pid")
[ -n "$memd" ] || fail "no memd was running beside the program"
gone "$memd" || fail "memd $memd outlived the run"
grep -Eq "tiermem run: pid [0-9]+ \(tiermem-hotset-\).* [1-9][0-9]* remote faults, [1-9][0-9]* pages evicted" \
  "$work/run.log" || fail "the summary does not show the pages that went to memd"

# tiermem killed outright: its memd ends with it (the orphaned program is the user's to end).
"$tm" run -q --local-memd 64M -- sleep 60 & bg=$!
wait_for pgrep -P $bg -x tiermem-memd > /dev/null || fail "memd did not start"
memd=$(pgrep -P $bg -x tiermem-memd)
wait_for pgrep -P $bg -x sleep > /dev/null || fail "the program did not start"
orphan=$(pgrep -P $bg -x sleep)
kill -KILL $bg
wait $bg 2> /dev/null
bg=""
wait_for gone "$memd" || fail "memd $memd outlived a tiermem killed with SIGKILL"
echo "PASS"
