#!/usr/bin/env bash
# `tiermem advise` (docs/advise.md) on a small hot-set program: the JSON's keys, shares in
# order with below-DRAM bytes growing as the share falls, predictions of at least 1, the check
# present and measured; bad options refused by name before the program starts; a failing
# program's status reported.
# Usage: advise_test.sh TIERMEM HOTSET_PROG
set -uo pipefail
tm=$1 prog=$2
work=$(mktemp -d /tmp/tiermem-advise-test-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; tail -30 "$work"/*.log 2> /dev/null; exit 1; }

# Bad options: refused with status 2, naming the option, and the program never started.
for bad in "--cxl-ns 0" "--rdma-us -1" "--shares 0.5,0.75" "--shares 1.5" "--cxl-lines 65" "--set dram_limt=1G" \
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
"$tm" advise --json --check-target 1.3 -- "$prog" --size 32M --seconds 1000 --updates 2000000 > "$work/advice.out" \
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
assert j["peak_rss_bytes"] >= 32 << 20 and j["rounds"] >= 2, j
PY

# The table: a row per share and the check's line.
"$tm" advise --tcp-us 50 --check-share -1 --plot "$work/advice.png" -- "$prog" --size 16M --seconds 1000 --updates 3000000 > "$work/table.out" 2> "$work/table.log" \
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
