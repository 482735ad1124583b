#!/bin/sh
# Guest test for the `full` topology: the CXL and RDMA checks in one guest, then the API/tiermemctl
# test binary, if given, once (it checks every tier the topology has).
#
#   check_full.sh [TEST_BINARY [ARGS...]]
set -eu
[ "${QEMU_TOPOLOGY:-}" = full ] || { echo "check_full: SKIP: not in the full topology"; exit 77; }
check_cxl.sh
check_rdma.sh
if [ $# -gt 0 ]; then
  "$@"
fi
echo "check_full: PASS"
