# Shared by the observe_* tests: a tiermem-memd on loopback and a preloaded program to watch.
#   . observe_lib.sh; observe_setup "$@"    (arguments: TIERMEMCTL PRELOAD_LIB MEMD TARGET)
# sets ctl, preload, memd, target and a scratch directory `work`; at exit it stops what the test
# started (memd_pid, target_pid, serve_pid, sleeper, reused) and removes `work` and the files in `forged`.
forged=""
observe_cleanup() {
  kill ${serve_pid:-} ${sleeper:-} ${reused:-} ${target_pid:-} ${memd_pid:-} 2> /dev/null || true
  # A target stopped here (the test failed) leaves its block behind: not for the next test to see.
  [ -n "${target_pid:-}" ] && rm -f "/dev/shm/tiermem.$(id -u).$target_pid"
  rm -f $forged
  rm -rf "$work"
}
observe_setup() {
  ctl=$1 preload=$2 memd=$3 target=$4
  [ -x "$memd" ] || { echo "SKIP: tiermem-memd was not built"; exit 77; }
  work=$(mktemp -d /tmp/tiermem-observe-XXXXXX)
  trap observe_cleanup EXIT
}
fail() { echo "FAIL: $*"; [ -n "${work:-}" ] && cat "$work"/*.log 2> /dev/null | tail -40; exit 1; }

# Starts memd (pid in memd_pid, port in memd_port).
start_memd() {
  "$memd" --listen 127.0.0.1:0 --port-file "$work/memd.port" --capacity 1G --no-rdma "$@" 2> "$work/memd.log" &
  memd_pid=$!
  for _ in $(seq 1200); do [ -s "$work/memd.port" ] && break; sleep 0.05; done
  [ -s "$work/memd.port" ] || fail "tiermem-memd did not start"
  memd_port=$(cat "$work/memd.port")
}

# Starts the target under the preload library with a small DRAM limit, its heap beyond it on
# memd (pid in target_pid), and waits until it has allocated; allocated bytes in target_bytes.
# $1: MiB to allocate, $2: TIERMEM_DRAM_LIMIT, $3: a name for its files, then VAR=VALUE settings.
start_target() {
  local mib=$1 limit=$2 name=$3
  shift 3
  env LD_PRELOAD="$preload" TIERMEM_DRAM_LIMIT="$limit" TIERMEM_REMOTE="tcp://127.0.0.1:$memd_port" "$@" \
    "$target" "$mib" "$work/$name.ready" "$work/$name.done" 2> "$work/$name.log" &
  target_pid=$!
  for _ in $(seq 1200); do [ -s "$work/$name.ready" ] && break; sleep 0.05; done
  [ -s "$work/$name.ready" ] || fail "the target did not get ready"
  target_bytes=$(awk '{print $2}' "$work/$name.ready")
}

# Lets the target check its data and exit; fails when it does not exit 0.
finish_target() {
  local name=$1
  touch "$work/$name.done"
  wait "$target_pid" || fail "the target failed (exit $?)"
}
