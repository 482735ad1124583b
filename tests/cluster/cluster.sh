# shellcheck shell=bash
# cluster.sh: a test bed of several "hosts" on one machine, sourced by the cluster tests.
#
#   source tests/cluster/cluster.sh
#   cluster_up 3 "$memd" 64M      # a client, three hosts, a memd on each; or exit 77
#   TIERMEM_REMOTE=$(cluster_remote) cluster_exec_client ./program
#
# Layout (every name carries this shell's PID, so runs under ctest -j2 never meet):
#   tmcl<PID>-br   a namespace holding only the bridge br0; every host's link ends here
#   tmcl<PID>-c    the client: eth0 10.77.0.100/24
#   tmcl<PID>-hK   host K (1..N): eth0 10.77.0.K/24, a tiermem-memd on 10.77.0.K:7471
# Each link is a veth pair made inside the bridge namespace: its end there (vK for host K, vc for
# the client) is a port of br0, its other end is moved into the host as eth0. lo is up in every
# namespace. Nothing is made in the root namespace, so the test's traffic never leaves these
# namespaces, and deleting them (cluster_down) deletes every veth and the bridge with them.
#
# Functions (K is a host number):
#   cluster_up N MEMD CAPACITY [MEMD ARGS...]  make the bed and start a memd on each host
#   cluster_addr K            10.77.0.K:7471
#   cluster_remote [K...]     TIERMEM_REMOTE for the given hosts (default all): tcp://...,tcp://...
#   cluster_exec_client CMD.. run CMD in the client namespace (TIERMEM_TOKEN set)
#   cluster_memd_log K        the path of host K's memd log
#   cluster_kill K            SIGKILL host K's memd (its sockets close: the client sees resets)
#   cluster_cut K / cluster_uncut K   take host K's link down (silence: no reset, no answer) / up
#   cluster_slow K [DELAY]    slow host K's link both ways: netem delay DELAY (default 10ms, so
#                             20 ms more round trip) when the kernel has sch_netem, else a tbf rate
#                             limit of 4 Mbit/s (a 4 KiB page then takes about 8 ms on the wire: a
#                             narrow link more than a long one); prints which it used
#   cluster_unslow K          remove it
#   cluster_track PID         have cluster_down end PID too (SIGTERM: a `timeout` passes it on)
#   cluster_down              end tracked processes, kill every memd, delete every namespace;
#                             runs on EXIT/INT/TERM
# Test traffic is TCP (memd --no-rdma). memd requires a token beyond loopback: the bed makes one.
# CLUSTER_WORK is a scratch directory removed by cluster_down.

CLUSTER_ID=tmcl$$
CLUSTER_NS=()
CLUSTER_PIDS=()
CLUSTER_TRACKED=()
CLUSTER_N=0
CLUSTER_WORK=""
CLUSTER_PORT=7471

cluster_skip() {
  echo "SKIP: $*"
  exit 77
}

cluster_down() {
  local pid ns
  for pid in "${CLUSTER_TRACKED[@]}"; do
    kill -TERM "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
  done
  CLUSTER_TRACKED=()
  for pid in "${CLUSTER_PIDS[@]}"; do
    [ -n "$pid" ] && kill -KILL "$pid" 2> /dev/null
  done
  for pid in "${CLUSTER_PIDS[@]}"; do
    [ -n "$pid" ] && wait "$pid" 2> /dev/null
  done
  CLUSTER_PIDS=()
  for ns in "${CLUSTER_NS[@]}"; do
    ip netns del "$ns" 2> /dev/null
  done
  CLUSTER_NS=()
  [ -n "$CLUSTER_WORK" ] && rm -rf "$CLUSTER_WORK"
  CLUSTER_WORK=""
}
trap 'cluster_down' EXIT
trap 'cluster_down; exit 130' INT
trap 'cluster_down; exit 143' TERM

cluster_ns_add() {  # cluster_ns_add NAME: a namespace with lo up, deleted by cluster_down
  ip netns add "$1" || return 1
  CLUSTER_NS+=("$1")
  ip -n "$1" link set lo up
}

cluster_link() {  # cluster_link NS PORT ADDR: NS's eth0 (ADDR/24) wired to br0 through PORT
  local br=$CLUSTER_ID-br
  ip -n "$br" link add "$2" type veth peer name eth0 netns "$1" || return 1
  ip -n "$br" link set "$2" master br0 up || return 1
  ip -n "$1" addr add "$3/24" dev eth0 || return 1
  ip -n "$1" link set eth0 up
}

cluster_up() {  # cluster_up N MEMD CAPACITY [MEMD ARGS...]
  local n=$1 memd=$2 cap=$3
  shift 3
  [ "$(id -u)" = 0 ] || cluster_skip "network namespaces need root (uid $(id -u))"
  command -v ip > /dev/null || cluster_skip "ip (iproute2) is not installed"
  [ -x "$memd" ] || cluster_skip "tiermem-memd not built ($memd)"
  CLUSTER_WORK=$(mktemp -d "/tmp/$CLUSTER_ID-XXXXXX")
  ip netns add "$CLUSTER_ID-br" 2> "$CLUSTER_WORK/ns.err" ||
    cluster_skip "cannot make a network namespace: $(head -1 "$CLUSTER_WORK/ns.err")"
  CLUSTER_NS+=("$CLUSTER_ID-br")
  ip -n "$CLUSTER_ID-br" link set lo up
  ip -n "$CLUSTER_ID-br" link add br0 type bridge 2> "$CLUSTER_WORK/ns.err" ||
    cluster_skip "cannot make a bridge: $(head -1 "$CLUSTER_WORK/ns.err")"
  ip -n "$CLUSTER_ID-br" link set br0 up
  cluster_ns_add "$CLUSTER_ID-c" && cluster_link "$CLUSTER_ID-c" vc 10.77.0.100 ||
    { echo "FAIL: cannot make the client namespace"; exit 1; }
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$CLUSTER_WORK/token"
  local k
  for k in $(seq "$n"); do
    cluster_ns_add "$CLUSTER_ID-h$k" && cluster_link "$CLUSTER_ID-h$k" "v$k" "10.77.0.$k" ||
      { echo "FAIL: cannot make host $k"; exit 1; }
  done
  CLUSTER_N=$n
  for k in $(seq "$n"); do
    ip netns exec "$CLUSTER_ID-h$k" "$memd" --listen "$(cluster_addr "$k")" --no-rdma \
      --capacity "$cap" --token-file "$CLUSTER_WORK/token" --port-file "$CLUSTER_WORK/port$k" "$@" \
      2> "$CLUSTER_WORK/memd$k.log" &
    CLUSTER_PIDS[k]=$!
  done
  for k in $(seq "$n"); do
    for _ in $(seq 1200); do  # at most 60 s
      [ -s "$CLUSTER_WORK/port$k" ] && break
      sleep 0.05
    done
    [ -s "$CLUSTER_WORK/port$k" ] ||
      { echo "FAIL: memd on host $k did not start"; cat "$CLUSTER_WORK/memd$k.log"; exit 1; }
  done
}

cluster_track() { CLUSTER_TRACKED+=("$1"); }

cluster_addr() { echo "10.77.0.$1:$CLUSTER_PORT"; }

cluster_remote() {
  local hosts=("$@") out="" k
  [ ${#hosts[@]} -eq 0 ] && mapfile -t hosts < <(seq "$CLUSTER_N")
  for k in "${hosts[@]}"; do
    out+="${out:+,}tcp://$(cluster_addr "$k")"
  done
  echo "$out"
}

cluster_exec_client() {
  TIERMEM_TOKEN=$(cat "$CLUSTER_WORK/token") ip netns exec "$CLUSTER_ID-c" "$@"
}

cluster_memd_log() { echo "$CLUSTER_WORK/memd$1.log"; }

cluster_kill() {
  local pid=${CLUSTER_PIDS[$1]:-}
  [ -n "$pid" ] || return 0
  kill -KILL "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  CLUSTER_PIDS[$1]=""
}

cluster_cut() { ip -n "$CLUSTER_ID-br" link set "v$1" down; }
cluster_uncut() { ip -n "$CLUSTER_ID-br" link set "v$1" up; }

cluster_slow() {  # both directions: the bridge's port toward the host, and the host's eth0
  local k=$1 delay=${2:-10ms}
  if ip netns exec "$CLUSTER_ID-br" tc qdisc add dev "v$k" root netem delay "$delay" 2> /dev/null; then
    ip netns exec "$CLUSTER_ID-h$k" tc qdisc add dev eth0 root netem delay "$delay" || return 1
    echo "host $k slowed: netem delay $delay each way"
  else
    ip netns exec "$CLUSTER_ID-br" tc qdisc add dev "v$k" root tbf rate 4mbit burst 4kb latency 2s &&
      ip netns exec "$CLUSTER_ID-h$k" tc qdisc add dev eth0 root tbf rate 4mbit burst 4kb latency 2s ||
      return 1
    echo "host $k slowed: no sch_netem in this kernel, tbf rate 4mbit each way instead"
  fi
}

cluster_unslow() {
  ip netns exec "$CLUSTER_ID-br" tc qdisc del dev "v$1" root 2> /dev/null
  ip netns exec "$CLUSTER_ID-h$1" tc qdisc del dev eth0 root 2> /dev/null
  return 0
}
