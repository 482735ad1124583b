#!/bin/sh
# Guest test for the `numa` topology (runs inside the QEMU guest, busybox sh).
# Node 1 must be memory-only and the HMAT figures in sysfs must equal what QEMU was given
# (QEMU_HMAT_* from run-guest.sh). Then the API/tiermemctl test binary, if given, runs.
#
#   check_numa.sh [TEST_BINARY [ARGS...]]
set -eu

fail() { echo "check_numa: FAIL: $*"; exit 1; }

[ "${QEMU_TOPOLOGY:-}" = numa ] || { echo "check_numa: SKIP: not in the numa topology"; exit 77; }
numactl -H
[ -d /sys/devices/system/node/node1 ] || fail "no node 1"
[ -z "$(cat /sys/devices/system/node/node1/cpulist)" ] || fail "node 1 has CPUs"
[ -n "$(cat /sys/devices/system/node/node0/cpulist)" ] || fail "node 0 has no CPUs"

for n in 0 1; do
  d=/sys/devices/system/node/node$n/access0/initiators
  [ -d "$d" ] || fail "node $n: no HMAT access0 attributes in sysfs"
  if [ "$n" = 0 ]; then
    want_lat=$QEMU_HMAT_NODE0_LATENCY_NS want_bw=$QEMU_HMAT_NODE0_BANDWIDTH_MIBS
  else
    want_lat=$QEMU_HMAT_NODE1_LATENCY_NS want_bw=$QEMU_HMAT_NODE1_BANDWIDTH_MIBS
  fi
  for a in read_latency write_latency read_bandwidth write_bandwidth; do
    v=$(cat "$d/$a")
    case $a in *latency) want=$want_lat ;; *) want=$want_bw ;; esac
    echo "node$n $a=$v (QEMU: $want)"
    [ "$v" = "$want" ] || fail "node $n $a is $v, QEMU was given $want"
  done
done
echo "check_numa: sysfs OK"

if [ $# -gt 0 ]; then
  "$@"
fi
echo "check_numa: PASS"
