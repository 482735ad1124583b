#!/usr/bin/env bash
# A preloaded program moves most of its heap to a memd on loopback; from another process,
# `tiermemctl stat PID --json` (and ps, top, stat --interval) must agree with the program's own
# view: the tiers' bytes add up to what it allocated, the remote tier holds some, DRAM stays
# within its limit.
#   observe_stat_test.sh TIERMEMCTL PRELOAD_LIB MEMD TARGET
set -euo pipefail
. "$(dirname "$0")/observe_lib.sh"
observe_setup "$@"

start_memd
# The policy thread (opt-in under the preload library) evicts the heap beyond the DRAM limit to
# memd. Wait, with a bound, until memd holds some of it and DRAM (resident and counted) is back
# under the limit: pages the program's libc touched since the last resident count join DRAM's
# count late, and the next round's relief evicts for them, so a moment's count may be a few
# pages over (the checks below say what was missing if it never settles).
start_target 64 16M stat TIERMEM_SAMPLE_MODE=faults TIERMEM_STATS="$work/run.jsonl" TIERMEM_STATS_INTERVAL_MS=100
settled() {
  python3 -c "import json,sys; s=json.load(sys.stdin); held=sum(v['bytes_held'] for v in s['servers']);
dram=[t['allocated_bytes'] for t in s['tiers'] if t['tier'] == 'dram'][0]
sys.exit(0 if held > 0 and max(s['dram_resident_bytes'], dram) <= s['dram_limit_bytes'] else 1)"
}
for _ in $(seq 600); do
  "$ctl" stat "$target_pid" --json > "$work/stat.json" 2> "$work/stat.log" || fail "stat --json failed"
  settled < "$work/stat.json" && break
  sleep 0.1
done
python3 - "$work/stat.json" "$target_pid" "$target_bytes" "$(basename "$target")" <<'PY' || fail "stat --json disagrees with the program"
import json, sys
s = json.load(open(sys.argv[1]))
pid, allocated = int(sys.argv[2]), int(sys.argv[3])
tiers = {t["tier"]: t for t in s["tiers"]}
total = sum(t["allocated_bytes"] for t in s["tiers"])
problems = []
def need(ok, what):
    if not ok:
        problems.append(what)
need(s["pid"] == pid, "pid %s" % s["pid"])
need(not s["stale"], "a live process reported stale")
need(s["command"] == sys.argv[4][:15], "command %r" % s["command"])  # /proc comm: 15 characters
# The program's blocks, plus what libc and the program's own bookkeeping took (a few MiB). A page
# the last resident count found not yet touched is in no tier (dram_untouched_bytes, as of that
# count; the program is idle now): under load a count may fall between an allocation and its writes.
untouched = s.get("dram_untouched_bytes", 0)
need(allocated <= total + untouched <= allocated + (16 << 20),
     "tiers hold %d bytes and %d are untouched, the program allocated %d" % (total, untouched, allocated))
need(tiers["remote"]["allocated_bytes"] > 0, "no bytes on the remote tier")
need(s["dram_limit_bytes"] == 16 << 20, "dram limit %d" % s["dram_limit_bytes"])
need(tiers["dram"]["allocated_bytes"] <= s["dram_limit_bytes"],
     "dram holds %d bytes, over its limit %d" % (tiers["dram"]["allocated_bytes"], s["dram_limit_bytes"]))
need(s["dram_resident_bytes"] <= s["dram_limit_bytes"],
     "dram resident %d over the limit %d" % (s["dram_resident_bytes"], s["dram_limit_bytes"]))
need(s["servers"][0]["bytes_held"] > 0 and s["pages_evicted"] > 0, "nothing reached memd")
need(all(t["pages"] * s["page_size"] == t["allocated_bytes"] for t in s["tiers"]), "pages and bytes disagree")
need(len(s["servers"]) == 1 and s["servers"][0]["up"], "servers %r" % s["servers"])
for p in problems:
    print(p)
print(json.dumps({t: tiers[t]["allocated_bytes"] for t in tiers}))
sys.exit(1 if problems else 0)
PY

# memd's view of the same process: every page it holds there sits in a slot memd saw written.
"$ctl" memd "127.0.0.1:$memd_port" --json > "$work/memd.json" || fail "tiermemctl memd failed"
python3 - "$work/memd.json" "$work/stat.json" <<'PY' || fail "memd and stat disagree"
import json, sys
m, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
others = [c for c in m["clients"] if not c["self"]]
assert len(others) == 1, others
assert others[0]["written_pages"] * s["page_size"] >= s["servers"][0]["bytes_held"] > 0, (others, s["servers"])
assert others[0]["slots"] >= others[0]["written_pages"], others
PY

# The same process in ps, top and the rates of stat --interval.
"$ctl" ps > "$work/ps.out" || fail "ps failed"
grep -qE "^ *$target_pid +[a-z_]+ +live " "$work/ps.out" || fail "ps does not list it: $(cat "$work/ps.out")"
"$ctl" ps --json | python3 -c "import json,sys; ps=json.load(sys.stdin); sys.exit(0 if any(p['pid']==$target_pid and not p['stale'] for p in ps) else 1)" ||
  fail "ps --json does not list it"
"$ctl" top --count 2 --interval 100 > "$work/top.out" || fail "top failed"
[ "$(grep -cE "^ *$target_pid +[a-z_]+ +live " "$work/top.out")" -eq 2 ] || fail "top: $(cat "$work/top.out")"
"$ctl" stat "$target_pid" --json --interval 100 --count 2 > "$work/rates.jsonl" || fail "stat --interval failed"
python3 - "$work/rates.jsonl" <<'PY' || fail "stat --interval --json"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 2, len(lines)
for l in lines:
    r = l["rates"]
    assert r["interval_s"] > 0 and r["remote_faults_per_s"] >= 0 and len(r["moves"]) == 6, r
PY
# Those lines are a timeline, as the runtime writes one: plot draws them.
if command -v gnuplot > /dev/null; then
  "$ctl" plot "$work/rates.jsonl" -o "$work/rates.png" > /dev/null || fail "plot of stat --json --interval"
fi
"$ctl" stat "$target_pid" > "$work/stat.txt" || fail "stat (text) failed"
grep -q "^remote " "$work/stat.txt" || fail "stat text has no remote tier line"

# A watch that outlives the program ends when the program exits cleanly.
"$ctl" stat "$target_pid" --interval 50 > "$work/watch.out" 2> "$work/watch.err" &
watch_pid=$!
# The watch must have found the program before it exits (otherwise it is rightly told there is
# no such tiermem process): wait, with a bound, for its first sample.
for _ in $(seq 300); do [ -s "$work/watch.out" ] && break; sleep 0.05; done
[ -s "$work/watch.out" ] || fail "stat --interval printed nothing: $(cat "$work/watch.err")"
finish_target stat
wait "$watch_pid" || fail "stat --interval of a process that exited: exit $?, $(cat "$work/watch.err")"
grep -q "pid $target_pid exited" "$work/watch.err" || fail "stat --interval: $(cat "$work/watch.err")"
# A clean exit removes the block.
if "$ctl" stat "$target_pid" 2> "$work/gone.err"; then fail "stat of an exited process succeeded"; fi
grep -q "is not a tiermem process" "$work/gone.err" || fail "after exit: $(cat "$work/gone.err")"
# The timeline the program wrote (TIERMEM_STATS_INTERVAL_MS) is what plot draws.
[ -s "$work/run.jsonl" ] || fail "no timeline in TIERMEM_STATS"
if command -v gnuplot > /dev/null; then
  "$ctl" plot "$work/run.jsonl" -o "$work/run.png" > "$work/plot.out" || fail "plot of the timeline: $(cat "$work/plot.out")"
  [ -s "$work/run.png" ] || fail "plot wrote no run.png"
fi
echo "OK: tiermemctl stat agrees with the program"
