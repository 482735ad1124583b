#!/bin/bash
# cluster_test.sh CASE MEMD TIERMEMCTL PRELOAD_LIB PATTERN: tests on the multi-host bed
# (cluster.sh): a client and three memory hosts in their own network namespaces. PATTERN
# (pattern.c) stores 24 MiB (12 in slow) under the preload library with TIERMEM_DRAM_LIMIT=4M,
# waits, then reads every byte back and checks it.
#   placement     every one of the three memds holds written pages of the client (tiermemctl memd
#                 asked from the client's namespace while the program waits), and every byte
#                 verifies.
#   server_loss   the same; then host 2's memd is killed (SIGKILL) before the read-back: the
#                 program exits 75 with one error line naming 10.77.0.2:7471.
#   link_cut      the same with host 2's link taken down instead (silence, not a reset): exit 75
#                 and the one line once TIERMEM_REMOTE_TIMEOUT_MS (2000 here) has passed.
#   slow          host 2's link slowed (cluster_slow: netem 10 ms each way, or tbf 4 Mbit/s)
#                 before the read-back: every byte verifies.
#   unreachable   host 2's link is down from the start: one warning names it, the pages go to
#                 hosts 1 and 3, and every byte verifies.
#   replicated_server_loss  TIERMEM_REPLICAS=2: host 2's memd killed while the program waits; the
#                 pager finds it down (its once-a-second probe), one warning names it, the pages
#                 that had a copy there are copied to the other two hosts until they hold as many
#                 copies as the three did (the time it took is printed), and every byte verifies.
#   replicated_link_cut     the same with host 2's link cut (found once the probe times out);
#                 then the link is back up, and host 2 is connected again (one warning says so).
#   replicated_slow         TIERMEM_REPLICAS=2, the program run twice: once as it is, once with
#                 host 2 slowed (cluster_slow 5ms) before the read-back, prefetching off so each
#                 page read back is a fault. Faults read the replica
#                 that answered fastest: host 2 serves under 10% of the slowed run's faults (about
#                 a third when nothing is slow); both read-back times are printed.
#   coded_two_hosts_lost    six hosts, TIERMEM_REMOTE_CODE=4+2: each page is six pieces, one per
#                 host; hosts 2 and 5 killed while the program waits (the loss of both is found
#                 by the probe or the first reads, one warning each), and every byte verifies,
#                 decoded from the four hosts left.
#   replicated_loss_under_load / replicated_cut_under_load   TIERMEM_REPLICAS=2, 1 GiB stored
#                 (memds of 2 GiB each: the two left hold every copy), then read back by 8
#                 threads, each page once, at random (a fault per page, prefetching off); a tenth of
#                 the way into the read-back host 2's memd is killed (SIGKILL) / its link cut. The program
#                 runs on and every byte verifies; hosts 1 and 3 hold as many copies as the three
#                 did (the time it took is printed, from the failure), and the read-back's time
#                 is printed.
# Exit 77 (ctest: skipped) when namespaces cannot be made.
set -u
case=$1 memd=$2 ctl=$3 lib=$4 prog=$5
source "$(dirname "$0")/cluster.sh"

fail() {
  echo "FAIL ($case): $*"
  echo "--- stdout"; cat "$CLUSTER_WORK/out" 2> /dev/null
  echo "--- stderr"; head -40 "$CLUSTER_WORK/err" 2> /dev/null
  local k
  for k in $(seq "$CLUSTER_N"); do echo "--- memd $k"; tail -5 "$(cluster_memd_log "$k")"; done
  exit 1
}

mib=24
threads=""        # pattern's THREADS: read back at random by that many threads ("" one, in order)
prog_timeout=240  # seconds the program may run in all (a bound on a hang; ctest allows 300)
capacity=64M      # each memd's
replicas=1
code=""
prefetch=auto
start_program() {  # the program (mib MiB) in the client namespace, in the background; sets prog_pid
  rm -f "$CLUSTER_WORK/ready" "$CLUSTER_WORK/go" "$CLUSTER_WORK/go.reading"
  rm -f "$CLUSTER_WORK/stats.json"
  cluster_exec_client timeout -s KILL "$prog_timeout" env TIERMEM_LOG=warn TIERMEM_REMOTE="$1" TIERMEM_REPLICAS=$replicas \
    TIERMEM_REMOTE_CODE="$code" \
    TIERMEM_STATS="$CLUSTER_WORK/stats.json" TIERMEM_PREFETCH=$prefetch \
    TIERMEM_DRAM_LIMIT=4M TIERMEM_REMOTE_TIMEOUT_MS=2000 LD_PRELOAD="$lib" \
    "$prog" "$mib" "$CLUSTER_WORK/ready" "$CLUSTER_WORK/go" ${threads:+"$threads"} > "$CLUSTER_WORK/out" \
    2> "$CLUSTER_WORK/err" &
  prog_pid=$!
  cluster_track "$prog_pid"
  for _ in $(seq $((prog_timeout * 20))); do
    [ -e "$CLUSTER_WORK/ready" ] && return 0
    kill -0 "$prog_pid" 2> /dev/null || break
    sleep 0.05
  done
  fail "the program did not finish writing"
}

finish_program() {  # let the program read back; sets rc
  touch "$CLUSTER_WORK/go"
  wait "$prog_pid"
  rc=$?
}

written_pages() {  # written_pages K: pages the client (not tiermemctl itself) keeps on host K
  cluster_exec_client "$ctl" memd --json "$(cluster_addr "$1")" |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(sum(c["written_pages"] or 0 for c in j["clients"] if not c["self"]))'
}

expect_on_hosts() {  # expect_on_hosts K...: each host holds pages of the client
  local k n
  for k in "$@"; do
    n=$(written_pages "$k")
    [ -n "$n" ] && [ "$n" -gt 0 ] || fail "memd on host $k holds no page of the client ('$n')"
    echo "host $k ($(cluster_addr "$k")): $n pages of the client"
  done
}

expect_one_line() {  # expect_one_line GREP GLOB: stderr has one line matching GREP, and it is GLOB
  local n line
  n=$(grep -c -- "$1" "$CLUSTER_WORK/err")
  [ "$n" -eq 1 ] || fail "$n lines with '$1' on stderr, expected one"
  line=$(grep -- "$1" "$CLUSTER_WORK/err")
  # shellcheck disable=SC2053 # $2 is a glob
  [[ $line == $2 ]] || fail "the line is not '$2': $line"
  echo "one line: $line"
}

wait_copies_still() {  # sets copies: page copies on the three hosts, once that held still for a second
  # The DRAM limit's relief goes on evicting for a while after the program is done writing.
  local before=-1 same=0 now k
  for _ in $(seq 100); do
    now=0
    for k in 1 2 3; do now=$((now + $(written_pages "$k"))); done
    if [ "$now" -eq "$before" ]; then same=$((same + 1)); else same=0; fi
    before=$now
    [ "$same" -ge 5 ] && break
    sleep 0.2
  done
  copies=$before
}

faults_share() {  # faults_share K: percent of the program's faults host K served, and the total
  python3 -c '
import json, sys
j = json.loads(open(sys.argv[1]).read().splitlines()[-1])
total = sum(s["remote_faults"] for s in j["servers"])
mine = sum(s["remote_faults"] for s in j["servers"] if s["address"].endswith("//" + sys.argv[2]))
print(0 if total == 0 else 100 * mine // total, total)' "$CLUSTER_WORK/stats.json" "$(cluster_addr "$1")"
}

wait_restored() {  # wait_restored BEFORE SECONDS: sets after, the copies on hosts 1 and 3 once they
  # hold BEFORE (fails after SECONDS); prints the time since $start
  local _
  after=0
  for _ in $(seq $(($2 * 5))); do
    after=$(($(written_pages 1) + $(written_pages 3)))
    [ "$after" -ge "$1" ] && break
    sleep 0.2
  done
  [ "$after" -ge "$1" ] || fail "hosts 1 and 3 hold $after page copies, not the $1 there were"
  echo "replicas restored $((($(date +%s%N) - start) / 1000000)) ms after host 2 failed: $after page copies on hosts 1 and 3"
}

timed_read_back() {  # sets ms: finish_program's time
  local start
  start=$(date +%s%N)
  finish_program
  ms=$((($(date +%s%N) - start) / 1000000))
}

expect_verified() {
  [ "$rc" -eq 0 ] || fail "exit $rc"
  grep -q "^verified $((mib << 20)) bytes, 0 bad words" "$CLUSTER_WORK/out" || fail "data did not verify"
  grep "^verified" "$CLUSTER_WORK/out"
}

hosts=3
if [ "$case" = coded_two_hosts_lost ]; then hosts=6; fi
case $case in *under_load) capacity=2G ;; esac  # the two survivors take every copy
cluster_up "$hosts" "$memd" "$capacity"
case $case in
  placement)
    start_program "$(cluster_remote)"
    expect_on_hosts 1 2 3
    finish_program
    expect_verified
    ;;
  server_loss|link_cut)
    start_program "$(cluster_remote)"
    expect_on_hosts 1 2 3
    if [ "$case" = server_loss ]; then cluster_kill 2; else cluster_cut 2; fi
    finish_program
    [ "$rc" -eq 75 ] || fail "exit $rc, expected 75"
    grep -q "^verified" "$CLUSTER_WORK/out" && fail "the program read back as if nothing was lost"
    expect_one_line "error" "*memory server tcp://$(cluster_addr 2):*"
    ;;
  slow)
    mib=12  # host 2's third of it, about 4 MiB, takes some 8 s at 4 Mbit/s
    start_program "$(cluster_remote)"
    expect_on_hosts 1 2 3
    cluster_slow 2 10ms || fail "cannot slow host 2's link"
    start=$(date +%s%N)
    finish_program
    echo "read back in $((($(date +%s%N) - start) / 1000000)) ms with host 2 slowed"
    expect_verified
    ;;
  unreachable)
    cluster_cut 2
    start_program "$(cluster_remote)"
    expect_one_line "tiermem" "*1 of 3 memory servers unreachable*$(cluster_addr 2)*"
    expect_on_hosts 1 3
    finish_program
    expect_verified
    ;;
  replicated_server_loss|replicated_link_cut)
    replicas=2
    start_program "$(cluster_remote)"
    wait_copies_still
    before=$copies
    [ "$before" -ge 8192 ] || fail "only $before page copies on the three hosts (2 x 16 MiB expected at least)"
    echo "$before page copies on the three hosts"
    if [ "$case" = replicated_server_loss ]; then cluster_kill 2; else cluster_cut 2; fi
    start=$(date +%s%N)
    wait_restored "$before" 30
    if [ "$case" = replicated_link_cut ]; then
      cluster_uncut 2
      for _ in $(seq 400); do  # 40 s: the repair thread backs off while the host is away (up to 30 s)
        grep -q "answers again" "$CLUSTER_WORK/err" && break
        sleep 0.1
      done
      expect_one_line "answers again" "*memory server tcp://$(cluster_addr 2) answers again*"
    fi
    finish_program
    expect_verified
    expect_one_line "is down" "*memory server tcp://$(cluster_addr 2) is down*"
    ;;
  replicated_loss_under_load|replicated_cut_under_load)
    replicas=2 prefetch=off mib=1024 threads=8 prog_timeout=540
    start_program "$(cluster_remote)"
    wait_copies_still
    before=$copies
    [ "$before" -ge $((2 * 250000)) ] || fail "only $before page copies on the three hosts (2 x 1 GiB expected)"
    echo "$before page copies on the three hosts"
    rm -f "$CLUSTER_WORK/go.reading"
    touch "$CLUSTER_WORK/go"
    read_start=$(date +%s%N)
    # A host fails once a tenth of the pages are read back (pattern.c makes go.reading then).
    for _ in $(seq 1200); do  # at most 120 s
      [ -e "$CLUSTER_WORK/go.reading" ] && break
      kill -0 "$prog_pid" 2> /dev/null || break
      sleep 0.1
    done
    [ -e "$CLUSTER_WORK/go.reading" ] || fail "the read-back did not get a tenth of the way in 120 s"
    kill -0 "$prog_pid" 2> /dev/null || fail "the read-back ended before a host failed: nothing was read while it did"
    if [ "$case" = replicated_loss_under_load ]; then cluster_kill 2; else cluster_cut 2; fi
    start=$(date +%s%N)
    wait_restored "$before" 120
    wait "$prog_pid"
    rc=$?
    echo "read back by $threads threads in $((($(date +%s%N) - read_start) / 1000000)) ms"
    expect_verified
    expect_one_line "is down" "*memory server tcp://$(cluster_addr 2) is down*"
    ;;
  coded_two_hosts_lost)
    code=4+2
    start_program "$(cluster_remote)"
    expect_on_hosts 1 2 3 4 5 6
    cluster_kill 2
    cluster_kill 5
    finish_program
    expect_verified
    n=$(grep -c "is down" "$CLUSTER_WORK/err")
    [ "$n" -eq 2 ] || fail "$n 'is down' lines on stderr, expected two (hosts 2 and 5)"
    grep "is down" "$CLUSTER_WORK/err"
    ;;
  replicated_slow)
    replicas=2 prefetch=off  # a fault per page read back: the faults tell which server served it
    start_program "$(cluster_remote)"
    wait_copies_still
    timed_read_back
    expect_verified
    read -r share total <<< "$(faults_share 2)"
    echo "nothing slowed: read back in $ms ms; host 2 served $share% of $total faults"
    start_program "$(cluster_remote)"
    wait_copies_still
    cluster_slow 2 5ms || fail "cannot slow host 2's link"
    timed_read_back
    expect_verified
    read -r share total <<< "$(faults_share 2)"
    echo "host 2 slowed: read back in $ms ms; host 2 served $share% of $total faults"
    [ "$total" -gt 1000 ] || fail "only $total faults: the read-back did not come from the servers"
    [ "$share" -lt 10 ] || fail "host 2 served $share% of the faults while slowed"
    ;;
  *)
    echo "unknown case $case"
    exit 2
    ;;
esac
echo "OK ($case)"
