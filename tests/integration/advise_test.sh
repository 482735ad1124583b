#!/usr/bin/env bash
# `tiermem advise` (docs/advise.md) on a small hot-set program: the JSON's keys, shares in
# order with below-DRAM bytes growing as the share falls, predictions of at least 1, the check
# present and measured; bad options refused by name before the program starts; a failing
# program's status reported.
# Usage: advise_test.sh TIERMEM HOTSET_PROG
set -uo pipefail
tm=$1 prog=$2
. "$(dirname "$0")/advise_lib.sh"

# Policy rounds of 5 ms: the record needs two rounds at least, and on an idle machine these
# programs run for well under a tenth of a second.
rounds="--set sample_interval_ms=5"

# Bad options: refused with status 2, naming the option, and the program never started.
for bad in "--record-reads all" "--track-pages 5" "--sample-pages 5000" "--cxl-ns 0" "--rdma-us -1" "--shares 0.5,0.75" "--shares 1.5" "--cxl-lines 65" "--set dram_limt=1G" \
           "--set heat_log_pages=0"; do
  # shellcheck disable=SC2086
  "$tm" advise $bad -- touch "$work/started" > /dev/null 2> "$work/bad.log"; rc=$?
  [ $rc -eq 2 ] || fail "'$bad' gave status $rc, not 2"
  name=${bad%% *}
  [ "$name" = "--set" ] && name=$(echo "$bad" | sed 's/--set \([a-z_]*\)=.*/\1/')
  grep -qi -- "$name" "$work/bad.log" || fail "the refusal of '$bad' does not name $name: $(cat "$work/bad.log")"
  [ ! -e "$work/started" ] || fail "the program ran despite '$bad'"
done

# A program that fails: its status, and no advice.
"$tm" advise --json -- sh -c 'exit 5' > "$work/fail.out" 2> "$work/fail.log"; rc=$?
[ $rc -eq 5 ] || fail "a program exiting with 5 gave $rc"
grep -q "status 5" "$work/fail.log" || fail "the failure does not say the program's status"
[ ! -s "$work/fail.out" ] || fail "advice was printed for a failed program"

# The advice: 32 MiB, a tenth of it hot, a fixed number of updates (the runs do the same work);
# the program's own JSON line comes first on stdout, the advice last.
"$tm" advise --json --check-target 1.3 $rounds -- "$prog" --size 32M --seconds 1000 --updates 2000000 > "$work/advice.out" \
  2> "$work/advise.log"
rc=$?
[ $rc -eq 0 ] || fail "advise gave $rc"
tail -1 "$work/advice.out" > "$work/advice.json"
python3 - "$work/advice.json" << 'PY' || fail "the advice does not hold: $(cat "$work/advice.json")"
import json, sys
j = json.load(open(sys.argv[1]))
shares = j["shares"]
assert [s["share"] for s in shares] == [1.0, 0.75, 0.5, 0.25, 0.125], shares
below = [s["below_dram_bytes"] for s in shares]
assert below == sorted(below) and below[0] == 0 and below[-1] > 24 << 20, below
faults = [s["faults_per_s"] for s in shares]
assert faults == sorted(faults) and faults[0] == 0 and faults[-1] > 0, faults
for s in shares:
    p = s["predicted_slowdown"]
    assert set(p) == {"cxl", "rdma", "tcp"} and all(v >= 1 for v in p.values()), s
    assert p["tcp"] >= p["rdma"] or j["costs"]["tcp_us"] < j["costs"]["rdma_us"], s
c = j["check"]
assert set(c) >= {"share", "tier", "predicted_slowdown", "measured_slowdown"}, c
assert c["tier"] == "tcp" and c["share"] in [s["share"] for s in shares] and c["share"] < 1, c
assert c["predicted_slowdown"] >= 1 and c["measured_slowdown"] > 0 and c["remote_faults"] > 0, c
assert c["predicted_faults"] > 0 and "us_per_fault" in c and "runtime_own_bytes" in c, c
# The check's cost per fault, and the shares at it, where the check was slower than the plain run.
cal = j["costs"]["tcp_us_check"]
assert cal == (c["us_per_fault"] if c["us_per_fault"] > 0 else 0), (cal, c)
for s in shares:
    k = s["predicted_slowdown_tcp_at_check_cost"]
    assert (k == 0) if cal == 0 else abs(k - (1 + s["faults_per_s"] * cal * 1e-6)) < 1e-6 * k, (s, cal)
assert j["record_slowdown"] > 0 and j["record_reads"] == "protect" and j["record_reads_lost"] is False, j
assert j["peak_rss_bytes"] >= 32 << 20 and j["rounds"] >= 2, j
PY

# Reads in the record: a hot set only read after the fill (--reads 100). With reads unseen
# (--record-reads none) the record is the fill's writes alone, about one page-round a page;
# the default record sees the reads, the hot pages in every round.
for mode in none default; do
  extra=(); [ $mode = none ] && extra=(--record-reads none)
  "$tm" advise --json --check-share -1 --tcp-us 50 $rounds "${extra[@]}" -- "$prog" --size 32M --seconds 1000 --updates 4000000 \
    --reads 100 > "$work/reads-$mode.out" 2> "$work/reads-$mode.log" || fail "advise on a read-only hot set ($mode) failed"
  tail -1 "$work/reads-$mode.out" > "$work/reads-$mode.json"
done
python3 - "$work/reads-none.json" "$work/reads-default.json" << 'PY' || fail "reads do not show in the record"
import json, sys
none, seen = (json.load(open(p)) for p in sys.argv[1:])
assert none["record_reads"] == "none" and seen["record_reads"] == "protect", (none["record_reads"], seen["record_reads"])
# Unseen: the fill's writes alone (a page's weight is more than 1 when the fill outlasts a
# scan's round); seen: the hot tenth alone is read in every round, 0.1 * 8192 page-rounds a
# round where the program ran throughout: at least half that, as a loaded machine can starve it
# for whole rounds.
assert none["record_touches"] < 2.5 * none["pages_seen"], none
assert seen["rounds"] >= 5 and seen["record_touches"] > 0.05 * seen["rounds"] * 8192, seen
assert seen["record_touches"] > 3 * none["record_touches"], (seen["record_touches"], none["record_touches"])
# So the model has the reads' faults: at half the peak many more than the unseen record's.
f = lambda j: j["shares"][2]["faults_per_s"] * j["plain_seconds"]
assert f(seen) > 3 * f(none), (f(seen), f(none))
PY

# The table: a row per share and the check's line.
"$tm" advise --tcp-us 50 --check-share -1 $rounds --plot "$work/advice.png" -- "$prog" --size 16M --seconds 1000 --updates 3000000 > "$work/table.out" 2> "$work/table.log" \
  || fail "advise (table) failed"
[ "$(grep -Ec '^ +[0-9.]+% ' "$work/table.out")" -eq 5 ] || fail "the table has not 5 rows: $(cat "$work/table.out")"
grep -q "TCP 50.0 us a fault (--tcp-us)" "$work/table.out" || fail "the given TCP cost is not shown"
! grep -q "^check:" "$work/table.out" || fail "--check-share -1 still checked"
# The plot: a PNG where gnuplot is installed, else a line saying it is not (and the table stands).
if command -v gnuplot > /dev/null; then
  [ "$(head -c 4 "$work/advice.png" | tail -c 3)" = "PNG" ] || fail "no PNG from --plot: $(cat "$work/table.log")"
else
  grep -q "gnuplot is not installed" "$work/table.log" || fail "a missing gnuplot is not said"
fi
echo PASS
