#!/bin/sh
# Guest test for the `full` topology: the CXL-vs-RDMA comparison rows (dram, cxl with every
# pattern, the pointer chase included, remote-rdma) from tiermem-bench compare; GUPS under tiermem
# on three tiers (DRAM, CXL, remote) and on the kernel's two (DRAM, CXL) with the same DRAM budget
# (tiering_full_test: the placement goals are asserted there); then (unless QEMU_TIERING_KERNEL=0)
# the same workload without tiermem under the kernel's own tiering (demotion + numa_balancing=2),
# which must finish, and all of them side by side (TIERING_SIDE_BY_SIDE_JSON and a table). TCG
# timings are not hardware timings: GUPS are reported, as ratios within this guest, never asserted.
set -eu
[ "${QEMU_TOPOLOGY:-}" = full ] || { echo "tiering_full: SKIP: not in the full topology"; exit 77; }
modprobe rdma_ucm 2>/dev/null || :
warmup=${QEMU_TIERING_SECONDS:-60}
measure=${QEMU_TIERING_MEASURE_SECONDS:-15}
fail() { echo "tiering_full: FAIL: $*"; exit 1; }

echo "=== tiermem-bench compare (this guest) ==="
tiermem-bench compare --size 8M --remote-size 1M --reps 3 --memd-host 10.9.0.2 --json > /tmp/compare.json
cat /tmp/compare.json
# Measured rows are in "results" (after "absent", "method" and "notes": the keys are sorted).
sed -n '/"results": \[/,$p' /tmp/compare.json > /tmp/compare.rows
for t in dram remote-rdma cxl; do
  n=$(grep -c "\"tier\": *\"$t\"" /tmp/compare.rows || :)
  [ "${n:-0}" -gt 0 ] || fail "no compare rows for $t"
  echo "tiering_full: compare rows for $t: $n"
done
# Every pattern on CXL, the chase included: the chase follows pointers stored in CXL memory, so it
# runs only where that memory holds what was written.
for p in chase rand64 seq page4k; do
  grep -A3 '"node": 1' /tmp/compare.rows | grep -q "\"pattern\": *\"$p\"" || fail "no $p row for the CXL node"
done
! grep -q '"note"' /tmp/compare.json || fail "compare left a note (a tier's memory failed its data check?)"

# With the defaults, prefetching included (TIERMEM_PREFETCH=auto; set it in the guest's
# environment to compare).
run_tiermem() {  # $1: gtest filter, $2: JSON file
  QEMU_TIERING_SECONDS=$warmup QEMU_TIERING_MEASURE_SECONDS=$measure QEMU_TIERING_JSON=$2 \
    tiering_full_test --gtest_color=no --gtest_filter="$1"
}
rc=0
echo "=== three-tier gups under tiermem: DRAM, CXL, remote (warm-up ${warmup} s, measured ${measure} s) ==="
run_tiermem 'TieringFull.ThreeTier*' /tmp/tiermem3.json || rc=1
[ -s /tmp/tiermem3.json ] && sed 's/^/TIERING_FULL_JSON /' /tmp/tiermem3.json
echo "=== two-tier gups under tiermem: DRAM, CXL, the kernel's setup (warm-up ${warmup} s, measured ${measure} s) ==="
run_tiermem 'TieringFull.TwoTier*' /tmp/tiermem2.json || rc=1
[ -s /tmp/tiermem2.json ] && sed 's/^/TIERING_FULL_2TIER_JSON /' /tmp/tiermem2.json

if [ "${QEMU_TIERING_KERNEL:-1}" != 1 ]; then
  [ $rc -eq 0 ] || fail "tiering_full_test"
  echo "tiering_full: PASS (kernel tiering skipped: QEMU_TIERING_KERNEL=$QEMU_TIERING_KERNEL)"
  exit 0
fi
kwarmup=${QEMU_TIERING_KERNEL_SECONDS:-$warmup}
echo "=== the same workload under the kernel's tiering, no tiermem (warm-up ${kwarmup} s, measured ${measure} s) ==="
for t in /sys/devices/virtual/memory_tiering/memory_tier*; do
  [ -e "$t/nodelist" ] && echo "$(basename "$t"): nodes $(cat "$t/nodelist")"
done
echo 1 > /sys/kernel/mm/numa/demotion_enabled
echo 2 > /proc/sys/kernel/numa_balancing
krc=0
tiermem-bench gups --kernel --json --warmup "$kwarmup" --seconds "$measure" --baseline-seconds 5 \
  > /tmp/kernel.json || krc=$?
echo 0 > /proc/sys/kernel/numa_balancing
cat /tmp/kernel.json
[ $krc -eq 0 ] || { rc=1; echo "tiering_full: FAIL: the kernel's run did not finish (gups --kernel exit status $krc)"; }
grep -q '"gups":' /tmp/kernel.json || { rc=1; echo "tiering_full: FAIL: the kernel's run reported no GUPS"; }

# Side by side: one JSON object, then a table.
num() { sed -n "s/.*\"$2\": *\([-0-9.e+]*\).*/\1/p" "$1" | head -1; }
for f in /tmp/tiermem3.json /tmp/tiermem2.json /tmp/kernel.json; do [ -s $f ] || echo '{}' > $f; done
printf '{"two_tier": {"tiermem": %s, "kernel": %s}, "three_tier": {"tiermem": %s}}\n' \
  "$(cat /tmp/tiermem2.json)" "$(tr -d '\n' < /tmp/kernel.json)" "$(cat /tmp/tiermem3.json)" |
  sed 's/^/TIERING_SIDE_BY_SIDE_JSON /'
awk -v dg="$(num /tmp/kernel.json all_dram_gups)" \
    -v kg="$(num /tmp/kernel.json gups)" -v kh="$(num /tmp/kernel.json hot_on_node0)" \
    -v kw="$(num /tmp/kernel.json warm_on_lower)" -v kc="$(num /tmp/kernel.json cold_on_lower)" \
    -v kw0="$(num /tmp/kernel.json warm_on_node0)" -v kc0="$(num /tmp/kernel.json cold_on_node0)" \
    -v g2="$(num /tmp/tiermem2.json gups)" -v h2="$(num /tmp/tiermem2.json hot_on_node0_median)" \
    -v w2="$(num /tmp/tiermem2.json warm_on_cxl)" -v c2="$(num /tmp/tiermem2.json cold_on_cxl)" \
    -v w20="$(num /tmp/tiermem2.json warm_on_node0)" \
    -v m2="$(num /tmp/tiermem2.json migrate_ms)" -v s2="$(num /tmp/tiermem2.json seconds)" \
    -v wu2="$(num /tmp/tiermem2.json warmup_seconds)" \
    -v g3="$(num /tmp/tiermem3.json gups)" -v h3="$(num /tmp/tiermem3.json hot_on_node0_median)" \
    -v w3="$(num /tmp/tiermem3.json warm_on_cxl)" -v c3="$(num /tmp/tiermem3.json cold_remote)" \
    -v w30="$(num /tmp/tiermem3.json warm_on_node0)" \
    -v cc3="$(num /tmp/tiermem3.json cold_on_cxl)" 'BEGIN {
  # The working set on node 0, in MiB (5 hot, 10 warm, 33 cold chunks of 1 MiB): what each setup
  # really gave DRAM. The kernel'"'"'s budget is the room the hog leaves above node 0'"'"'s low
  # watermarks; what kswapd demotes of other memory adds to it.
  k0 = 5 * kh + 10 * kw0 + 33 * kc0
  t20 = 5 * h2 + 10 * w20 + 33 * (1 - c2)
  t30 = 5 * h3 + 10 * w30 + 33 * (1 - c3 - cc3)
  t = "TIERING_SIDE_BY_SIDE |"
  printf "%s setup | tiers | hot on node 0 | warm on cxl | cold below DRAM | working set on node 0 (MiB) | GUPS | GUPS / all-DRAM |\n", t
  printf "%s kernel (numa_balancing=2, demotion) | dram+cxl | %.3f | %.3f | %.3f | %.1f | %.6f | %.3f |\n", t, kh, kw, kc, k0, kg, (dg > 0 ? kg / dg : 0)
  printf "%s tiermem | dram+cxl | %.3f | %.3f | %.3f | %.1f | %.6f | %.3f |\n", t, h2, w2, c2, t20, g2, (dg > 0 ? g2 / dg : 0)
  printf "%s tiermem | dram+cxl+remote | %.3f | %.3f | %.3f | %.1f | %.6f | %.3f |\n", t, h3, w3, c3 + cc3, t30, g3, (dg > 0 ? g3 / dg : 0)
  printf "TIERING_SIDE_BY_SIDE two tiers: tiermem/kernel GUPS %.3f, hot set on node 0 %.3f vs %.3f (goal: GUPS >= the kernel'"'"'s, hot >= 0.95)\n", (kg > 0 ? g2 / kg : 0), h2, kh
  if (wu2 + s2 > 0) printf "TIERING_SIDE_BY_SIDE two tiers: tiermem'"'"'s policy thread spent %.0f ms in migrate calls over %.0f s of warm-up and measurement\n", m2, wu2 + s2
}'
[ $rc -eq 0 ] || fail "see above"
echo "tiering_full: PASS"
