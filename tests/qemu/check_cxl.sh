#!/bin/sh
# Guest test for the `cxl` topology (and the CXL half of `full`), inside the QEMU guest.
# The CXL type-3 device must be onlined as system-ram on node QEMU_CXL_NODE (1), node 1
# memory-only. Then the API/tiermemctl test binary, if given, runs.
#
#   check_cxl.sh [TEST_BINARY [ARGS...]]
set -eu

fail() { echo "check_cxl: FAIL: $*"; exit 1; }

node=${QEMU_CXL_NODE:-}
[ -n "$node" ] || { echo "check_cxl: SKIP: not in a topology with a CXL node"; exit 77; }
numactl -H
daxctl list > /tmp/dax.json
cat /tmp/dax.json
grep -q '"mode":"system-ram"' /tmp/dax.json || fail "dax0.0 is not in system-ram mode"
grep -q "\"target_node\":$node" /tmp/dax.json || fail "dax0.0 does not target node $node"
cxl list -M -R | grep -q '"region":"region0"' || fail "cxl list shows no region0"
[ -z "$(cat "/sys/devices/system/node/node$node/cpulist")" ] || fail "node $node has CPUs"
kb=$(awk '/MemTotal/ { print $4 }' "/sys/devices/system/node/node$node/meminfo")
echo "node $node MemTotal ${kb} kB"
[ "$kb" -ge 262144 ] || fail "node $node has only $kb kB"
echo "check_cxl: sysfs/daxctl/cxl OK"

if [ $# -gt 0 ]; then
  "$@"
fi
echo "check_cxl: PASS"
