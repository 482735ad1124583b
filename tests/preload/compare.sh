#!/bin/bash
# compare.sh MODE PRELOAD_LIB MEMD -- COMMAND...
# Runs COMMAND (a bash command line) once without and once with LD_PRELOAD=PRELOAD_LIB and
# requires byte-identical stdout and a zero exit status from both.
#   MODE plain:  the preload library with no configuration (DRAM only).
#   MODE remote: a tiermem-memd on loopback (port chosen by the kernel) and TIERMEM_DRAM_LIMIT
#                small enough that most of the heap is placed on the remote tier;
#                TIERMEM_STATS=stderr shows where the pages went. MEMD_CAPACITY sets memd's
#                --capacity (2G by default; smaller than the heap fills the remote tier).
# Exit 77 (ctest: skipped) when a program the command needs is missing (REQUIRE="git sqlite3").
set -u
mode=$1 lib=$2 memd=$3
shift 3
[ "$1" = "--" ] && shift
cmd=$1
for p in ${REQUIRE:-}; do
  command -v "$p" > /dev/null || { echo "SKIP: $p is not installed"; exit 77; }
done
work=$(mktemp -d /tmp/tiermem-preload-XXXXXX)
trap 'rm -rf "$work"; [ -n "${memd_pid:-}" ] && kill "$memd_pid" 2>/dev/null; wait 2>/dev/null' EXIT
export TEST_WORK=$work

mkdir -p "$work/a" "$work/b"
(cd "$work/a" && env -u LD_PRELOAD bash -c "$cmd") > "$work/out.glibc" 2> "$work/err.glibc"
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: without the preload library, exit $rc"; cat "$work/err.glibc"; exit 1; }

extra=()
if [ "$mode" = remote ]; then
  "$memd" --listen 127.0.0.1:0 --port-file "$work/port" --capacity "${MEMD_CAPACITY:-2G}" 2> "$work/memd.log" &
  memd_pid=$!
  for _ in $(seq 1200); do [ -s "$work/port" ] && break; sleep 0.05; done
  [ -s "$work/port" ] || { echo "FAIL: tiermem-memd did not start"; cat "$work/memd.log"; exit 1; }
  extra=(TIERMEM_REMOTE="tcp://127.0.0.1:$(cat "$work/port")" TIERMEM_DRAM_LIMIT="${DRAM_LIMIT:-16M}"
         TIERMEM_STATS=stderr)
fi
(cd "$work/b" && env "${extra[@]}" LD_PRELOAD="$lib" bash -c "$cmd") > "$work/out.tiermem" \
  2> "$work/err.tiermem"
rc=$?
cat "$work/err.tiermem" | grep "^tiermem" | sort | uniq -c | sort -rn | head -8
if [ $rc -ne 0 ]; then
  echo "FAIL: under LD_PRELOAD=$lib ($mode), exit $rc"
  tail -20 "$work/err.tiermem"
  exit 1
fi
if [ "$mode" = remote ]; then
  kill "$memd_pid" 2>/dev/null
  wait "$memd_pid" 2>/dev/null
  memd_pid=""
fi
# The remote variant must really have used the remote tier: some process placed or moved pages
# there (its TIERMEM_STATS line "tier remote available allocated N bytes, ... migrated in M pages"
# with N or M > 0), or memd gave a session slots for written pages ("freed N pages" at its end;
# programs such as sort close stderr before the stats are printed at exit).
if [ "$mode" = remote ] &&
   ! grep -E "^tiermem stats: tier remote +available" "$work/err.tiermem" |
     grep -qvE "allocated 0 bytes, .*migrated in 0 pages" &&
   ! grep -qE "freed [1-9][0-9]* pages" "$work/memd.log"; then
  echo "FAIL: no page reached the remote tier (DRAM limit ${DRAM_LIMIT:-16M} too large?)"
  exit 1
fi
# EXPECT_SAMPLED=1: the policy thread must have armed pages and caught accesses to them
# ("policy uffd: N rounds, A pages armed, S accesses sampled, ...").
if [ -n "${EXPECT_SAMPLED:-}" ] &&
   ! grep -qE "policy [a-z]+: [0-9]+ rounds, [1-9][0-9]* pages armed, [1-9][0-9]* accesses sampled" "$work/err.tiermem"; then
  echo "FAIL: the sampler armed no page or caught no access"
  grep "policy" "$work/err.tiermem"
  exit 1
fi
if ! cmp -s "$work/out.glibc" "$work/out.tiermem"; then
  echo "FAIL: output differs under the preload library ($mode)"
  diff "$work/out.glibc" "$work/out.tiermem" | head -20
  exit 1
fi
echo "OK: $(wc -c < "$work/out.glibc") bytes of output identical ($mode)"
