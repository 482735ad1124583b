#!/bin/bash
# remote_full.sh CASE PRELOAD_LIB MEMD PROGRAM: a full or missing remote tier under the preload
# library (docs/protocol.md, "When the remote tier is full or absent"). PROGRAM is remote_full.c:
# it stores MiB in 1 MiB chunks until malloc fails, then checks every byte it stored.
#   overcommit    memd --capacity 8M, DRAM limit 8M, 48 MiB stored: all of it, intact, and the
#                 "remote tier full" warning exactly once (not once per page or per batch).
#   fail          the same with TIERMEM_ON_REMOTE_FULL=fail: malloc returns NULL with ENOMEM
#                 before 48 MiB, what was stored is intact, the warning once.
#   required      TIERMEM_REMOTE a closed loopback port and TIERMEM_REMOTE_REQUIRED=1: the
#                 program (and `true`) exits 75 before main, with the error line once.
#   badtoken      the same with a memd that refuses the token.
#   unreachable   a closed port without REQUIRED: main runs, the error line once; overcommit: all
#                 32 MiB stored past the 8M limit. unreachable_fail: malloc fails near the limit.
set -u
case=$1 lib=$2 memd=$3 prog=$4
work=$(mktemp -d /tmp/tiermem-remote-full-XXXXXX)
trap 'rm -rf "$work"; [ -n "${memd_pid:-}" ] && kill "$memd_pid" 2>/dev/null; wait 2>/dev/null' EXIT
fail() { echo "FAIL ($case): $*"; echo "--- stdout"; cat "$work/out"; echo "--- stderr"; head -40 "$work/err"; exit 1; }

start_memd() {  # start_memd CAPACITY [memd args...]
  local cap=$1
  shift
  "$memd" --listen 127.0.0.1:0 --port-file "$work/port" --capacity "$cap" "$@" 2> "$work/memd.log" &
  memd_pid=$!
  for _ in $(seq 1200); do [ -s "$work/port" ] && break; sleep 0.05; done
  [ -s "$work/port" ] || { echo "FAIL: tiermem-memd did not start"; cat "$work/memd.log"; exit 1; }
  remote="tcp://127.0.0.1:$(cat "$work/port")"
}
closed_port() {  # a loopback port nobody listens on: bound by the kernel, then closed
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
run() {  # run ENV... -- ARGS...: the program under the preload library; sets rc
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env TIERMEM_LOG=warn "${envs[@]}" LD_PRELOAD="$lib" "$@" > "$work/out" 2> "$work/err"
  rc=$?
}
count() { grep -c -- "$1" "$work/err"; }
full_line="tiermem: warn: remote tier full: no memory server can take more pages (tcp://127.0.0.1:"
absent_line="tiermem: error: remote tier unavailable: TIERMEM_REMOTE=tcp://127.0.0.1:"

case $case in
  overcommit|fail)
    start_memd 8M
    policy=overcommit
    [ "$case" = fail ] && policy=fail
    run TIERMEM_REMOTE="$remote" TIERMEM_DRAM_LIMIT=8M TIERMEM_ON_REMOTE_FULL=$policy -- "$prog" 48
    [ $rc -eq 0 ] || fail "exit $rc"
    grep -q "^0 bad words" "$work/out" || fail "stored data did not read back intact"
    [ "$(count "$full_line")" -eq 1 ] || fail "the remote-full warning $(count "$full_line") times, not once"
    grep -q ":[0-9]*: 8 MiB, [0-9]* pages used); DRAM holds [0-9]* bytes, [0-9]* over its limit of 8388608 (TIERMEM_DRAM_LIMIT); TIERMEM_ON_REMOTE_FULL=$policy" "$work/err" ||
      fail "the warning does not name the server's capacity, the bytes over the limit and the policy"
    [ "$(grep -c "^tiermem" "$work/err")" -le 2 ] || fail "more than the warning on stderr"
    stored=$(sed -n 's/^stored \([0-9]*\) of.*/\1/p' "$work/out")
    if [ "$case" = overcommit ]; then
      [ "$stored" = 48 ] || fail "overcommit stored $stored of 48 chunks"
    else
      grep -q "^malloc: NULL errno=ENOMEM" "$work/out" || fail "no malloc failure with ENOMEM"
      # At most the DRAM limit, memd's 8M and the slack (4M); at least the limit, less the
      # heap's first segment (allocations count whole, touched or not).
      [ "$stored" -ge 4 ] && [ "$stored" -le 20 ] || fail "fail stored $stored MiB"
    fi ;;
  required|badtoken)
    if [ "$case" = badtoken ]; then
      echo right-token > "$work/token"
      start_memd 64M --token-file "$work/token"
      envs=(TIERMEM_REMOTE="$remote" TIERMEM_TOKEN=wrong-token)
    else
      envs=(TIERMEM_REMOTE="tcp://127.0.0.1:$(closed_port)")
    fi
    for cmd in "$prog 1" true; do
      run "${envs[@]}" TIERMEM_REMOTE_REQUIRED=1 -- $cmd
      [ $rc -eq 75 ] || fail "$cmd: exit $rc, not 75"
      [ ! -s "$work/out" ] || fail "$cmd: main ran"
      [ "$(count "$absent_line")" -eq 1 ] || fail "$cmd: the error line $(count "$absent_line") times"
      grep -q "TIERMEM_REMOTE_REQUIRED=1: exiting (status 75)$" "$work/err" || fail "$cmd: the line does not say why it exits"
    done
    if [ "$case" = badtoken ]; then
      grep -q "token" "$work/err" || fail "the line does not say the token was refused"
    fi ;;
  unreachable|unreachable_fail)
    policy=overcommit
    [ "$case" = unreachable_fail ] && policy=fail
    run TIERMEM_REMOTE="tcp://127.0.0.1:$(closed_port)" TIERMEM_DRAM_LIMIT=8M TIERMEM_ON_REMOTE_FULL=$policy -- "$prog" 32
    [ $rc -eq 0 ] || fail "exit $rc"
    grep -q "^main" "$work/out" || fail "main did not run"
    grep -q "^0 bad words" "$work/out" || fail "stored data did not read back intact"
    [ "$(count "$absent_line")" -eq 1 ] || fail "the error line $(count "$absent_line") times, not once"
    [ "$(grep -c "^tiermem" "$work/err")" -eq 1 ] || fail "more than the error line on stderr"
    stored=$(sed -n 's/^stored \([0-9]*\) of.*/\1/p' "$work/out")
    if [ "$policy" = overcommit ]; then
      grep -q "running on DRAM only; TIERMEM_DRAM_LIMIT is not kept" "$work/err" || fail "the line does not say the limit is not kept"
      [ "$stored" = 32 ] || fail "overcommit stored $stored of 32 chunks"
    else
      grep -q "running on DRAM only; TIERMEM_DRAM_LIMIT stays a cap" "$work/err" || fail "the line does not say the limit stays"
      grep -q "^malloc: NULL errno=ENOMEM" "$work/out" || fail "no malloc failure with ENOMEM"
      # Allocations count whole, touched or not: the heap's first 4 MiB segment is in the limit.
      [ "$stored" -ge 2 ] && [ "$stored" -le 8 ] || fail "fail stored $stored MiB at an 8M limit"
    fi ;;
  *) echo "unknown case $case"; exit 2 ;;
esac
echo "OK ($case): $(tr '\n' ' ' < "$work/out")"
