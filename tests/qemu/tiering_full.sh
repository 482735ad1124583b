#!/bin/sh
# Guest test for the `full` topology: the CXL-vs-RDMA comparison rows (dram, cxl,
# remote-rdma) from tiermem-bench compare; three-tier GUPS under tiermem (tiering_full_test: the
# placement goal is asserted there); then (unless QEMU_TIERING_KERNEL=0) the same workload without
# tiermem under the kernel's own tiering (demotion + numa_balancing=2), and both side by side. TCG
# timings are not hardware timings: GUPS are reported as ratios within this guest, never asserted.
set -eu
[ "${QEMU_TOPOLOGY:-}" = full ] || { echo "tiering_full: SKIP: not in the full topology"; exit 77; }
modprobe rdma_ucm 2>/dev/null || :
warmup=${QEMU_TIERING_SECONDS:-60}
measure=${QEMU_TIERING_MEASURE_SECONDS:-15}

echo "=== tiermem-bench compare (this guest) ==="
tiermem-bench compare --size 8M --remote-size 1M --reps 3 --memd-host 10.9.0.2 --json > /tmp/compare.json
cat /tmp/compare.json
# Measured rows are in "results" (after "absent" and "notes": the keys are sorted). The CXL node
# does not hold data under QEMU 7.2 TCG, so compare's data check fails there: it skips the
# pointer chase and times the other patterns, with a note (docs/qemu.md).
sed -n '/"results": \[/,$p' /tmp/compare.json > /tmp/compare.rows
for t in dram remote-rdma cxl; do
  n=$(grep -c "\"tier\": *\"$t\"" /tmp/compare.rows || :)
  [ "${n:-0}" -gt 0 ] || { echo "tiering_full: FAIL: no compare rows for $t"; exit 1; }
  echo "tiering_full: compare rows for $t: $n"
done
grep -q '"tier": *"cxl"' /tmp/compare.json && grep -q "data check failed" /tmp/compare.json &&
  echo "tiering_full: compare: cxl timed without the chase: its memory read back other data (QEMU 7.2 TCG)"

echo "=== three-tier gups under tiermem (warm-up ${warmup} s, measured ${measure} s) ==="
rc=0
QEMU_TIERING_SECONDS=$warmup QEMU_TIERING_MEASURE_SECONDS=$measure QEMU_TIERING_JSON=/tmp/tiermem.json \
  tiering_full_test --gtest_color=no || rc=1
[ -s /tmp/tiermem.json ] && sed 's/^/TIERING_FULL_JSON /' /tmp/tiermem.json

# The kernel's tiering side by side, in the same guest (QEMU_TIERING_KERNEL=0 skips it). Under
# QEMU 7.2 TCG the CXL node does not hold data (docs/qemu.md), and with node 0 under pressure
# the kernel put other processes' pages there too, init's included: init died of SIGSEGV and the
# guest panicked. The other processes are kept on node 0 by a cgroup (below); `gups --kernel`
# locks the guest's program and library files and itself (not its working set).
if [ "${QEMU_TIERING_KERNEL:-1}" != 1 ]; then
  [ $rc -eq 0 ] || { echo "tiering_full: FAIL: tiering_full_test"; exit 1; }
  echo "tiering_full: PASS (kernel tiering skipped: QEMU_TIERING_KERNEL=$QEMU_TIERING_KERNEL)"
  exit 0
fi
echo "=== the same workload under the kernel's tiering (no tiermem) ==="
for t in /sys/devices/virtual/memory_tiering/memory_tier*; do
  [ -e "$t/nodelist" ] && echo "$(basename "$t"): nodes $(cat "$t/nodelist")"
done
# Every process but the workload goes into a cgroup that keeps its memory on node 0: its
# cpuset.mems is node 0 (new pages never fall back to the CXL node when node 0 runs short), and
# its memory.min covers it (reclaim, kswapd's demotion included, leaves a cgroup below its
# memory.min alone). The CXL node holds no data under QEMU 7.2: without this, init's pages ended
# there and the guest panicked (init killed by SIGSEGV) 25-55 s into the warm-up.
cg=/sys/fs/cgroup
grep -q " $cg cgroup2 " /proc/mounts || mount -t cgroup2 none $cg ||
  { echo "tiering_full: FAIL: cannot mount cgroup2 (needed to keep init off the CXL node)"; exit 1; }
echo "+memory +cpuset" > $cg/cgroup.subtree_control && mkdir -p $cg/others $cg/workload &&
  echo 0 > $cg/others/cpuset.mems && echo 4G > $cg/others/memory.min ||
  { echo "tiering_full: FAIL: cannot set up the memory and cpuset cgroups"; exit 1; }
for p in $(cat $cg/cgroup.procs); do echo "$p" > $cg/others/cgroup.procs 2>/dev/null || :; done
echo "tiering_full: processes kept off the lower tier (memory.min): $(wc -l < $cg/others/cgroup.procs)"
echo 1 > /sys/kernel/mm/numa/demotion_enabled
echo 2 > /proc/sys/kernel/numa_balancing
# The kernel's run is reported, not asserted, and its failure does not fail the test: in 2 of 7
# runs the workload process itself died of corrupted memory ("stack smashing detected", "free():
# invalid pointer") 25-55 s into the warm-up, although its own pages are locked and bound to
# node 0 (bench/gups_kernel.cc); what reaches the CXL node under QEMU 7.2 is not fully known.
# Its progress lines above show the placement the kernel had reached.
krc=0
sh -c 'echo $$ > '$cg'/workload/cgroup.procs && exec "$@"' gups tiermem-bench gups --kernel --json \
    --warmup "${QEMU_TIERING_KERNEL_SECONDS:-30}" --seconds "$measure" --baseline-seconds 5 > /tmp/kernel.json ||
  krc=$?
echo 0 > /proc/sys/kernel/numa_balancing
if [ $krc -ne 0 ]; then
  echo "tiering_full: the kernel's run did not finish (exit status $krc; QEMU 7.2's CXL node holds no data): no side by side this time"
  printf '{"error": "gups --kernel exit status %s"}\n' "$krc" > /tmp/kernel.json
fi
cat /tmp/kernel.json

# Side by side: one JSON object, then a one-line table.
num() { sed -n "s/.*\"$2\": *\([-0-9.e+]*\).*/\1/p" "$1" | head -1; }
[ -s /tmp/tiermem.json ] || echo '{}' > /tmp/tiermem.json
printf '{"tiermem": %s, "kernel": %s}\n' "$(cat /tmp/tiermem.json)" "$(tr -d '\n' < /tmp/kernel.json)" \
  | sed 's/^/TIERING_SIDE_BY_SIDE_JSON /'
awk -v tg="$(num /tmp/tiermem.json gups)" -v th="$(num /tmp/tiermem.json hot_on_node0)" \
    -v tw="$(num /tmp/tiermem.json warm_on_cxl)" -v tc="$(num /tmp/tiermem.json cold_remote)" \
    -v kg="$(num /tmp/kernel.json gups)" -v kh="$(num /tmp/kernel.json hot_on_node0)" \
    -v kw="$(num /tmp/kernel.json warm_on_lower)" -v kc="$(num /tmp/kernel.json cold_on_lower)" \
    -v dg="$(num /tmp/kernel.json all_dram_gups)" 'BEGIN {
  printf "TIERING_SIDE_BY_SIDE | setup | hot on node 0 | warm on cxl | cold remote (tiermem) / on cxl (kernel) | GUPS / all-DRAM |\n"
  printf "TIERING_SIDE_BY_SIDE | tiermem | %.3f | %.3f | %.3f | %.3f |\n", th, tw, tc, (dg > 0 ? tg / dg : 0)
  printf "TIERING_SIDE_BY_SIDE | kernel (numa_balancing=2, demotion) | %.3f | %.3f | %.3f | %.3f |\n", kh, kw, kc, (dg > 0 ? kg / dg : 0)
  printf "TIERING_SIDE_BY_SIDE tiermem/kernel GUPS %.3f\n", (kg > 0 ? tg / kg : 0)
}'
[ $rc -eq 0 ] || { echo "tiering_full: FAIL: tiering_full_test"; exit 1; }
echo "tiering_full: PASS"
