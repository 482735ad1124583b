#!/bin/bash
# fork_outlive.sh MODE PRELOAD_LIB MEMD TIERMEMCTL PROGRAM: a forked child outlives its parent.
# PROGRAM is fork_outlive.c: MIB MiB (FORK_OUTLIVE_MIB, default 128) in 4 KiB blocks under
# TIERMEM_DRAM_LIMIT (FORK_OUTLIVE_LIMIT_MIB, default 16) with the rest on memd, then a fork; the
# child SIGKILLs the parent, reads every block, and forks a grandchild that reads them all again.
#   one        one memd.
#   replicas   TIERMEM_REPLICAS=2 on two memds; the second is SIGKILLed halfway through the
#              child's reads.
#   lost       one memd, SIGKILLed halfway through the child's reads: no copy of the rest is
#              left, so the child must exit 75 with one line naming the server, never read zeros.
# Checks: the parent died of SIGKILL, the child read every block with its fork-time bytes and
# exited 0; while the child read (its parent gone) memd still held the slots, and once both are
# gone memd's reserved slot count is back to zero.
set -u
mode=$1 lib=$2 memd=$3 ctl=$4 prog=$5
mib=${FORK_OUTLIVE_MIB:-128} limit=${FORK_OUTLIVE_LIMIT_MIB:-16}
work=$(mktemp -d /tmp/tiermem-fork-outlive-XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL ($mode): $*"; echo "--- stdout"; cat "$work/out"; echo "--- stderr"; head -40 "$work/err"; exit 1; }
start_memd() {  # start_memd NAME: its port in $work/NAME.port
  "$memd" --listen 127.0.0.1:0 --port-file "$work/$1.port" --capacity $(( mib * 2 + 64 ))M --no-rdma 2> "$work/$1.log" &
  pids+=($!)
  for _ in $(seq 200); do [ -s "$work/$1.port" ] && break; sleep 0.05; done
  [ -s "$work/$1.port" ] || { echo "FAIL: tiermem-memd did not start"; cat "$work/$1.log"; exit 1; }
}
reserved() {  # reserved NAME: memd's reserved slots (empty when it cannot be asked)
  "$ctl" memd "127.0.0.1:$(cat "$work/$1.port")" --json 2>/dev/null | sed -n 's/^ *"reserved_pages": \([0-9]*\),*$/\1/p'
}
val() { sed -n "s/^$1 \([0-9]*\)$/\1/p" "$work/out"; }

start_memd a
remote="tcp://127.0.0.1:$(cat "$work/a.port")" replicas=1
if [ "$mode" = replicas ]; then
  start_memd b
  remote="$remote,tcp://127.0.0.1:$(cat "$work/b.port")" replicas=2
fi
start=$(date +%s%N)
env TIERMEM_LOG=warn TIERMEM_REMOTE="$remote" TIERMEM_REPLICAS=$replicas TIERMEM_DRAM_LIMIT=${limit}M \
  "$prog" run "$lib" "$mib" "$limit" "$work/go" > "$work/out" 2> "$work/err" &
run_pid=$!
pids+=($run_pid)
for _ in $(seq 3000); do  # 300 s at most: the parent stores, evicts and forks; the child reads half
  grep -q '^child_half' "$work/out" && break
  kill -0 $run_pid 2>/dev/null || break
  sleep 0.1
done
grep -q '^child_half 0$' "$work/out" || fail "the child did not read the first half intact"
held=$(reserved a)
[ -n "$held" ] && [ "$held" -gt 0 ] || fail "with the parent gone, memd holds no slot for the child (reserved '${held}')"
victim=
[ "$mode" = replicas ] && victim=${pids[1]}
[ "$mode" = lost ] && victim=${pids[0]}
if [ -n "$victim" ]; then
  kill -9 "$victim"
  wait "$victim" 2>/dev/null
fi
touch "$work/go"
wait $run_pid || fail "the launcher failed"
end=$(date +%s%N)
grep -q '^parent_signal 9$' "$work/out" || fail "the parent did not die of SIGKILL"
if [ "$mode" = lost ]; then
  [ "$(val child_status)" = 75 ] || fail "with its only memd gone the child exited $(val child_status), not 75"
  lines=$(grep -c "could not be fetched from memory server tcp://127.0.0.1:$(cat "$work/a.port")" "$work/err")
  [ "$lines" = 1 ] || fail "the child did not print one line naming its server ($lines)"
  ! grep -q '^child_bad' "$work/out" || fail "the child finished its reads without its server"
  echo "ok ($mode): the child exited 75: $(grep 'could not be fetched' "$work/err")"
  exit 0
fi
[ "$(val child_status)" = 0 ] || fail "the child exited $(val child_status)"
if [ "$mode" = replicas ]; then  # the child's reads met the dead memd and turned to the other
  grep -q "memory server tcp://127.0.0.1:$(cat "$work/b.port") is down" "$work/err" ||
    fail "the child never noticed the memd killed during its reads"
fi
[ "$(val child_bad)" = 0 ] || fail "the child saw $(val child_bad) blocks with other bytes than at the fork"
[ "$(val grandchild_ok)" = 1 ] || fail "the grandchild, forked by the child serving itself, did not see every block"
[ "$(val child_blocks)" = $(( mib * 256 )) ] || fail "the child checked $(val child_blocks) blocks of $(( mib * 256 ))"
before=$(val rss_before_kib)
[ "$before" -le $(( (limit + 24) * 1024 )) ] || fail "the data was not pushed out before the fork (RSS $before KiB)"
left=
for _ in $(seq 100); do  # memd frees the session's slots when its last connection is gone
  left=$(reserved a)
  [ "$left" = 0 ] && break
  sleep 0.1
done
[ "$left" = 0 ] || fail "memd still holds $left slots with parent and child gone"
echo "ok ($mode): $(val blocks) blocks of 4 KiB, parent RSS at the fork $before KiB, memd held $held slots" \
     "for the child, child read every block in $(val child_ms) ms (0 bad), run $(( (end - start) / 1000000 )) ms," \
     "memd back to 0 slots"
