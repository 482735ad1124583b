#!/bin/sh
# Guest test for the `cxl` topology (and the CXL half of `full`), inside the QEMU guest.
# The CXL type-3 device must be onlined as system-ram on node QEMU_CXL_NODE (1), node 1
# memory-only, and hold what is written to it (cxl_data_probe: move_pages and mbind, no tiermem).
# Then the API/tiermemctl test binary, if given, runs.
#
#   check_cxl.sh [TEST_BINARY [ARGS...]]
set -eu

fail() { echo "check_cxl: FAIL: $*"; exit 1; }

node=${QEMU_CXL_NODE:-}
[ -n "$node" ] || { echo "check_cxl: SKIP: not in a topology with a CXL node"; exit 77; }
numactl -H
daxctl list > /tmp/dax.json
cat /tmp/dax.json
grep -q '"mode":"system-ram"' /tmp/dax.json || fail "no dax device in system-ram mode"
grep -q "\"target_node\":$node" /tmp/dax.json || fail "no dax device targets node $node"
cxl list -M -R > /tmp/cxl.json
grep -q '"region":"region[0-9]*"' /tmp/cxl.json || fail "cxl list shows no region"
if [ "${QEMU_CXL_MODE:-}" = ram ]; then
  # cxl-cli 76 does not print a RAM region's type: ask sysfs.
  for r in /sys/bus/cxl/devices/region*; do
    echo "$(basename "$r"): mode $(cat "$r/mode")"
    grep -qx ram "$r/mode" || fail "$(basename "$r") is not a RAM region"
  done
fi
[ -z "$(cat "/sys/devices/system/node/node$node/cpulist")" ] || fail "node $node has CPUs"
kb=$(awk '/MemTotal/ { print $4 }' "/sys/devices/system/node/node$node/meminfo")
echo "node $node MemTotal ${kb} kB"
[ "$kb" -ge 262144 ] || fail "node $node has only $kb kB"
echo "check_cxl: sysfs/daxctl/cxl OK (cxl mode ${QEMU_CXL_MODE:-?}, kernel ${QEMU_KERNEL_RELEASE:-?})"
cxl_data_probe || fail "memory on node $node does not hold what was written to it"

if [ $# -gt 0 ]; then
  "$@"
fi
echo "check_cxl: PASS"
