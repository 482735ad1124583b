#!/bin/sh
# Reads go to the faster replica (docs/protocol.md, "Replicas"), shown with `netem delay`, which
# the host kernel of the build machine lacks: three memd "hosts" in this guest, each in a network
# namespace of its own behind a veth pair, and two replicas. tiermem-bench remote-fault evicts
# 2000 pages and faults them back at random, first with every link as it is, then with
# `tc qdisc add ... netem delay 5ms` on host 2's link (both directions). Prints both JSON lines
# and fault_p50 delayed/undelayed. TCG timings: read the ratio, not the microseconds.
set -eu
IP=/usr/sbin/ip
TC=/usr/sbin/tc
export TIERMEM_TOKEN=qemu-guest-token
fail() { echo "netem_replicas: FAIL: $*"; exit 1; }
modprobe sch_netem || fail "no sch_netem module"
mkdir -p /run/netns
servers=""
for k in 1 2 3; do
  $IP netns add h$k
  $IP link add vh$k type veth peer name eth0 netns h$k
  $IP addr add 10.7.$k.1/24 dev vh$k
  $IP link set vh$k up
  $IP -n h$k addr add 10.7.$k.2/24 dev eth0
  $IP -n h$k link set eth0 up
  $IP -n h$k link set lo up
  $IP netns exec h$k tiermem-memd --listen 10.7.$k.2:7471 --capacity 256M --no-rdma > /tmp/memd-h$k.log 2>&1 &
  servers="$servers${servers:+,}10.7.$k.2:7471"
done
sleep 2
run() {  # $1: label
  tiermem-bench remote-fault --server "$servers" --replicas 2 --pages "${NETEM_PAGES:-2000}" --json > "/tmp/rf-$1.json" ||
    fail "remote-fault ($1)"
  grep -q "\"verified_pages\":${NETEM_PAGES:-2000}" "/tmp/rf-$1.json" || { cat "/tmp/rf-$1.json"; fail "not every page verified ($1)"; }
  echo "NETEM_$1=$(cat "/tmp/rf-$1.json")"
}
p50() { sed 's/.*"fault_p50_us":\([0-9.]*\).*/\1/' "$1"; }
for r in ${NETEM_ROUNDS:-1}; do
  run plain
  $TC qdisc add dev vh2 root netem delay 5ms
  $IP netns exec h2 $TC qdisc add dev eth0 root netem delay 5ms
  # The delay is there: a ping of host 2 takes at least 10 ms (a lower bound load cannot break).
  rtt=$(ping -c 2 -W 5 10.7.2.2 | sed -n 's/.*time=\([0-9.]*\) ms.*/\1/p' | tail -n 1)
  echo "NETEM_HOST2_PING_MS=$rtt"
  awk -v t="${rtt:-0}" 'BEGIN { exit !(t >= 10) }' || fail "netem did not delay host 2's link (ping ${rtt:-none} ms)"
  run delayed
  $TC qdisc del dev vh2 root
  $IP netns exec h2 $TC qdisc del dev eth0 root
  echo "NETEM_P50_RATIO=$(awk -v d="$(p50 /tmp/rf-delayed.json)" -v p="$(p50 /tmp/rf-plain.json)" 'BEGIN { printf "%.3f", d / p }')"
done
echo "netem_replicas: PASS"
