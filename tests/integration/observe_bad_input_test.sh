#!/usr/bin/env bash
# tiermemctl stat on bad input: one clear line on stderr and a non-zero exit for a pid that is
# not a tiermem process, a block that is not tiermem's (or of another layout version), and a
# stale block left by a killed process (which --allow-stale prints).
#   observe_bad_input_test.sh TIERMEMCTL PRELOAD_LIB MEMD TARGET
set -euo pipefail
. "$(dirname "$0")/observe_lib.sh"
observe_setup "$@"

# Expects a non-zero exit and exactly one line on stderr containing $1.
refuses() {
  local want=$1; shift
  if "$@" > "$work/out" 2> "$work/err"; then fail "$* succeeded"; fi
  [ "$(wc -l < "$work/err")" -eq 1 ] || { cat "$work/err"; fail "$*: more than one line"; }
  grep -qF -- "$want" "$work/err" || { cat "$work/err"; fail "$*: expected '$want'"; }
}

# A live process that is not running tiermem: this shell.
refuses "pid $$ is not a tiermem process" "$ctl" stat $$
refuses "pid $$ is not a tiermem process" "$ctl" stat $$ --json
refuses "pid $$ is not a tiermem process" "$ctl" stat $$ --prometheus
refuses "0 is not a process id" "$ctl" stat 0

# A file where a block would be that is not one: another version's, or not tiermem's at all.
sleep 120 &
sleeper=$!
forged=/dev/shm/tiermem.$(id -u).$sleeper
head -c 4096 /dev/zero | tr '\0' 'x' > "$forged"
chmod 600 "$forged"
refuses "pid $sleeper:" "$ctl" stat $sleeper

start_memd
# A block of another layout version: a live target's block with its version (the u32 after the
# 8-byte magic, runtime/stats/stats_block.h) changed, then put back.
start_target 8 4M version
block=/dev/shm/tiermem.$(id -u).$target_pid
[ -f "$block" ] || fail "no block $block for a running target"
set_version() { python3 -c "import struct,sys; f=open(sys.argv[1],'r+b'); f.seek(8); f.write(struct.pack('<I', int(sys.argv[2])))" "$block" "$1"; }
version=$(python3 -c "import struct,sys; f=open(sys.argv[1],'rb'); f.seek(8); print(struct.unpack('<I', f.read(4))[0])" "$block")
set_version 999
refuses "pid $target_pid:" "$ctl" stat "$target_pid"
grep -q "999" "$work/err" || fail "the refusal does not name the block's version: $(cat "$work/err")"
set_version "$version"
"$ctl" stat "$target_pid" > /dev/null || fail "stat after restoring the version"
# A block written with another counter list (tiermem/counter_list.hpp): its hash, the u64 after
# the size, changed, then put back.
hash_at() { python3 -c "import struct,sys; f=open(sys.argv[1],'r+b'); f.seek(16); o=struct.unpack('<Q', f.read(8))[0]; f.seek(16); f.write(struct.pack('<Q', o ^ int(sys.argv[2])))" "$block" "$1"; }
hash_at 1
refuses "pid $target_pid:" "$ctl" stat "$target_pid"
grep -q "other counters" "$work/err" || fail "the refusal does not say the counters differ: $(cat "$work/err")"
hash_at 1
"$ctl" stat "$target_pid" > /dev/null || fail "stat after restoring the counter list hash"
finish_target version

# A killed process leaves a stale block: stat says so and fails, --allow-stale prints it.
start_target 8 4M stale
kill -KILL "$target_pid"
wait "$target_pid" 2> /dev/null || true
block=/dev/shm/tiermem.$(id -u).$target_pid
forged="$forged $block"
refuses "is gone: its stats block is stale" "$ctl" stat "$target_pid"
"$ctl" stat "$target_pid" --allow-stale --json > "$work/stale.json" || fail "--allow-stale failed"
python3 -c "import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if s['stale'] else 1)" "$work/stale.json" ||
  fail "--allow-stale --json does not say stale"
"$ctl" ps > "$work/ps.out"
grep -qE "^ *$target_pid +[a-z_]+ +stale " "$work/ps.out" || fail "ps: $(cat "$work/ps.out")"
# That stale block under the pid of a live process that runs no tiermem (a pid reused): the
# process is not a tiermem process, whatever block its pid's name finds.
sleep 120 &
reused=$!
forged="$forged /dev/shm/tiermem.$(id -u).$reused"
cp "$block" "/dev/shm/tiermem.$(id -u).$reused"
refuses "pid $reused is not a tiermem process (its stats block was left by an earlier process" "$ctl" stat "$reused"
"$ctl" stat "$reused" --allow-stale > /dev/null || fail "--allow-stale on a reused pid's block failed"
target_pid=""
echo "OK: bad input is refused with one line each"
