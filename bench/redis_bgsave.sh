#!/usr/bin/env bash
# redis BGSAVE with its data on the remote tier, TIERMEM_FORK=share and =fetch side by side:
# Debian's redis-server under the preload library with TIERMEM_DRAM_LIMIT and a memd on loopback,
# KEYS keys of 1000 bytes (DEBUG POPULATE); once RSS has settled (at most 120 s), BGSAVE, with
# the server's RSS sampled every 10 ms until the save ends. One JSON line per mode: RSS before,
# max during the save, the save's time and status, and redis-check-rdb's verdict on the file.
# usage: redis_bgsave.sh PRELOAD_LIB MEMD [KEYS [DRAM_LIMIT]]   (exit 77 without redis-server)
set -uo pipefail
lib=$1 memd=$2 keys=${3:-500000} limit=${4:-64M}
for p in redis-server redis-cli redis-check-rdb; do
  command -v "$p" > /dev/null || { echo "skip: $p is not installed"; exit 77; }
done
work=$(mktemp -d /tmp/tiermem-bgsave-XXXXXX)
sock=$work/redis.sock
cleanup() {
  redis-cli -s "$sock" shutdown nosave > /dev/null 2>&1
  [ -n "${rpid:-}" ] && kill "$rpid" 2> /dev/null
  [ -n "${mpid:-}" ] && kill "$mpid" 2> /dev/null
  wait 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
rss_kib() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status" 2> /dev/null; }
for mode in share fetch; do
  rm -f "$work/port" "$work/dump.rdb" "$work/max"
  "$memd" --listen 127.0.0.1:0 --port-file "$work/port" --capacity 2G 2> "$work/memd.log" &
  mpid=$!
  for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
  env TIERMEM_REMOTE="tcp://127.0.0.1:$(cat "$work/port")" TIERMEM_DRAM_LIMIT="$limit" TIERMEM_FORK=$mode \
    LD_PRELOAD="$lib" redis-server --port 0 --unixsocket "$sock" --save '' --appendonly no \
    --enable-debug-command yes --dir "$work" > "$work/redis.log" 2>&1 &
  rpid=$!
  for _ in $(seq 200); do redis-cli -s "$sock" ping > /dev/null 2>&1 && break; sleep 0.05; done
  redis-cli -s "$sock" debug populate "$keys" key 1000 > /dev/null
  prev=0
  for _ in $(seq 240); do  # settled: RSS changed by less than 1 MiB in 0.5 s
    sleep 0.5
    now=$(rss_kib "$rpid")
    (( now - prev < 1024 && prev - now < 1024 )) && break
    prev=$now
  done
  before=$(rss_kib "$rpid")
  # RSS sampled every 10 ms by a loop of its own: redis answers nothing while it forks.
  ( max=0; while [ ! -e "$work/stop" ]; do r=$(rss_kib "$rpid"); (( r > max )) && max=$r && echo "$max" > "$work/max"; sleep 0.01; done ) &
  spid=$!
  t0=$(date +%s.%N)
  redis-cli -s "$sock" bgsave > /dev/null
  for _ in $(seq 12000); do  # at most 600 s
    redis-cli -s "$sock" info persistence | grep -q '^rdb_bgsave_in_progress:0' && break
    sleep 0.05
  done
  t1=$(date +%s.%N)
  touch "$work/stop"
  wait "$spid"
  rm -f "$work/stop"
  max=$(cat "$work/max")
  status=$(redis-cli -s "$sock" info persistence | sed -n 's/^rdb_last_bgsave_status:\([a-z]*\).*/\1/p')
  check=$(redis-check-rdb "$work/dump.rdb" 2>&1 | grep -c 'RDB looks OK')
  dbkeys=$(redis-cli -s "$sock" dbsize)
  printf '{"mode":"%s","keys":%s,"dram_limit":"%s","rss_before_save_mib":%.1f,"rss_max_during_save_mib":%.1f,"save_s":%.2f,"bgsave_status":"%s","rdb_ok":%s}\n' \
    "$mode" "$dbkeys" "$limit" "$(echo "$before / 1024" | bc -l)" "$(echo "$max / 1024" | bc -l)" \
    "$(echo "$t1 - $t0" | bc -l)" "$status" "$([ "$check" -ge 1 ] && echo true || echo false)"
  redis-cli -s "$sock" shutdown nosave > /dev/null 2>&1
  wait "$rpid" 2> /dev/null
  kill "$mpid" 2> /dev/null
  wait "$mpid" 2> /dev/null
  rpid='' mpid=''
done
