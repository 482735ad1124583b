#!/usr/bin/env bash
# Debian's redis-server (built with malloc=jemalloc: it calls mallctl, nallocx and
# malloc_stats_print) under the preload library, with 50 MB of data (DEBUG POPULATE): INFO's
# allocator_allocated (mallctl "stats.allocated") must be within 10% (+2 MiB) of used_memory
# (redis's own count of what it allocated), and MEMORY MALLOC-STATS must be tiermem's report.
# Before the library exported jemalloc's API, allocator_allocated was libjemalloc's: 28,672 bytes
# for a 500 MB dataset.
# usage: redis_info.sh LIBRARY   (exit 77 without redis-server >= 7 built with jemalloc)
set -uo pipefail
lib=$1
for p in redis-server redis-cli; do
  command -v "$p" > /dev/null || { echo "skip: $p is not installed"; exit 77; }
done
version=$(redis-server --version)
[[ $version == *malloc=jemalloc* ]] || { echo "skip: redis-server is not built with jemalloc: $version"; exit 77; }
[[ $version =~ v=([0-9]+) ]] && (( BASH_REMATCH[1] >= 7 )) ||
  { echo "skip: redis-server older than 7 (no --enable-debug-command): $version"; exit 77; }
work=$(mktemp -d /tmp/tiermem-redis-XXXXXX)
sock=$work/redis.sock
trap 'redis-cli -s "$sock" shutdown nosave > /dev/null 2>&1; [ -n "${pid:-}" ] && kill "$pid" 2> /dev/null; wait 2> /dev/null; rm -rf "$work"' EXIT
LD_PRELOAD=$lib redis-server --port 0 --unixsocket "$sock" --save '' --appendonly no \
  --enable-debug-command yes --dir "$work" > "$work/redis.log" 2>&1 &
pid=$!
for _ in $(seq 200); do redis-cli -s "$sock" ping > /dev/null 2>&1 && break; sleep 0.05; done
redis-cli -s "$sock" ping > /dev/null 2>&1 || { echo "FAIL: redis-server did not start"; cat "$work/redis.log"; exit 1; }
[[ $(redis-cli -s "$sock" debug populate 50000 key 1000) == OK ]] || { echo "FAIL: DEBUG POPULATE"; exit 1; }
field() { sed -n "s/^$1://p" <<< "$info"; }
# redis reads the allocator_* fields in its cron (every 100 ms), so an INFO right after the
# populate can show the figures from before it: ask again for up to 30 s.
for _ in $(seq 300); do
  info=$(redis-cli -s "$sock" info memory | tr -d '\r')
  used=$(field used_memory) allocated=$(field allocator_allocated)
  [[ -n $used && -n $allocated ]] || { echo "FAIL: INFO memory lacks the fields"; echo "$info"; exit 1; }
  diff=$(( allocated > used ? allocated - used : used - allocated ))
  (( diff <= used / 10 + (2 << 20) )) && break
  sleep 0.1
done
echo "used_memory $used, allocator_allocated $allocated, allocator_active $(field allocator_active), allocator_resident $(field allocator_resident)"
if (( diff > used / 10 + (2 << 20) )); then
  echo "FAIL: allocator_allocated is not tiermem's count of redis's memory"
  exit 1
fi
redis-cli -s "$sock" memory malloc-stats | grep -q "Begin tiermem statistics" ||
  { echo "FAIL: MEMORY MALLOC-STATS is not tiermem's report"; exit 1; }
echo "ok"
