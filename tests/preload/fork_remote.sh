#!/bin/bash
# fork_remote.sh MODE PRELOAD_LIB MEMD PROGRAM: fork() with most data remote under the preload
# library. PROGRAM is fork_remote.c: 96 MiB stored with TIERMEM_DRAM_LIMIT=16M and a memd, then a
# fork; the child checks every page while the parent writes.
#   share   (TIERMEM_FORK default): the child sees the fork-time bytes, the parent its own; the
#           parent's RSS right after the fork grows by at most 8 MiB, and while the child lives
#           stays within its RSS before the fork + the pages written since + 8 MiB.
#   fetch   TIERMEM_FORK=fetch: the same bytes; the data came back for the fork (the child's RSS
#           as it starts at least 64 MiB above the limit: the parent's may already be down again,
#           relief evicting what came back), which the share case is compared against.
set -u
mode=$1 lib=$2 memd=$3 prog=$4
work=$(mktemp -d /tmp/tiermem-fork-remote-XXXXXX)
trap 'rm -rf "$work"; [ -n "${memd_pid:-}" ] && kill "$memd_pid" 2>/dev/null; wait 2>/dev/null' EXIT
fail() { echo "FAIL ($mode): $*"; echo "--- stdout"; cat "$work/out"; echo "--- stderr"; head -40 "$work/err"; exit 1; }
"$memd" --listen 127.0.0.1:0 --port-file "$work/port" --capacity 256M 2> "$work/memd.log" &
memd_pid=$!
for _ in $(seq 1200); do [ -s "$work/port" ] && break; sleep 0.05; done
[ -s "$work/port" ] || { echo "FAIL: tiermem-memd did not start"; cat "$work/memd.log"; exit 1; }
env TIERMEM_LOG=warn TIERMEM_REMOTE="tcp://127.0.0.1:$(cat "$work/port")" TIERMEM_DRAM_LIMIT=16M \
  TIERMEM_FORK="$mode" LD_PRELOAD="$lib" "$prog" 96 16 > "$work/out" 2> "$work/err"
rc=$?
[ $rc -eq 0 ] || fail "exit $rc"
val() { sed -n "s/^$1 \([0-9]*\)$/\1/p" "$work/out"; }
grep -q "^child_bad 0$" "$work/out" || fail "the child did not see the fork-time bytes of every page"
grep -q "^parent_bad 0$" "$work/out" || fail "the parent did not see its own bytes"
before=$(val rss_before_kib) after=$(val rss_after_fork_kib) max=$(val rss_max_kib) written=$(val written_pages)
child=$(val child_rss_at_start_kib)
[ "$before" -le $(( (16 + 24) * 1024 )) ] || fail "the data was not pushed out before the fork (RSS $before KiB)"
if [ "$mode" = share ]; then
  [ "$after" -le $(( before + 8 * 1024 )) ] || fail "RSS grew from $before to $after KiB at the fork"
  bound=$(( before + written * 4 + 8 * 1024 ))
  [ "$max" -le "$bound" ] || fail "RSS reached $max KiB while the child lived, over $bound KiB ($written pages written)"
else
  [ "$child" -ge $(( (16 + 64) * 1024 )) ] || fail "fetch: the child's RSS as it started only $child KiB"
fi
echo "ok ($mode): RSS before fork $before KiB, after $after KiB, max during the child $max KiB, $written pages written, the child's at its start $child KiB"
