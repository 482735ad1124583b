#!/bin/sh
# In the rdma topology: `tiermem-bench remote-fault` over rxe (RDMA) and over TCP, next to
# `ib_read_lat -s 4096` measured in the same guest (printed by check_rdma.sh), so the page-fault
# cost can be read as a ratio to the bare RDMA read. TCG timings are not hardware timings.
set -eu
check_rdma.sh
for t in rdma tcp; do
  # memd refuses to listen beyond loopback without a token.
  TIERMEM_TOKEN=qemu-guest-token tiermem-bench remote-fault --transport "$t" --pages 2000 \
    --host 10.9.0.2 --json > "/tmp/rf-$t.json" ||
    { echo "remote_fault_rdma: FAIL: remote-fault over $t"; exit 1; }
  grep -q '"verified_pages":2000' "/tmp/rf-$t.json" ||
    { echo "remote_fault_rdma: FAIL: not every page verified over $t"; cat "/tmp/rf-$t.json"; exit 1; }
  echo "REMOTE_FAULT_$(echo "$t" | tr a-z A-Z)=$(cat "/tmp/rf-$t.json")"
done
echo "remote_fault_rdma: PASS"
