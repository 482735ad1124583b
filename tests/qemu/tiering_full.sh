#!/bin/sh
# Guest test for the `full` topology: three-tier automatic tiering (tiering_full_test), then the
# CXL-vs-RDMA comparison rows (dram, cxl, remote-rdma) from tiermem-bench compare. TCG timings
# are not hardware timings: compare within this guest only.
set -eu
[ "${QEMU_TOPOLOGY:-}" = full ] || { echo "tiering_full: SKIP: not in the full topology"; exit 77; }
modprobe rdma_ucm 2>/dev/null || :
echo "=== tiermem-bench compare (this guest) ==="
tiermem-bench compare --size 8M --remote-size 1M --reps 3 --memd-host 10.9.0.2
tiermem-bench compare --size 8M --remote-size 1M --reps 3 --memd-host 10.9.0.2 --json > /tmp/compare.json
for t in dram cxl remote-rdma; do
  grep -q "\"tier\": \"$t\"" /tmp/compare.json || { echo "tiering_full: FAIL: no compare rows for $t"; exit 1; }
done
tiering_full_test --gtest_color=no
echo "tiering_full: PASS"
