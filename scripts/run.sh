#!/usr/bin/env bash
# The main job: installs the dependencies, builds, and compares every memory tier this machine
# has (DRAM, each CXL node, remote over RDMA, remote over TCP) on the same access patterns.
# A tiermem-memd is started on loopback for the remote rows; absent tiers are named with the
# reason. Where this machine lacks CXL or a verbs device, the same comparison also runs inside the
# QEMU `full` guest (qemu/run-guest.sh: an emulated CXL node and soft-RoCE), printed after the
# host's table with each row marked emulated; ratios to DRAM are taken within each table.
# Writes one JSON (build/compare.json, an `emulated` flag per row) and one plot of both
# (build/compare.png).
#
#   scripts/run.sh [--no-qemu] [tiermem-bench compare options...]
#
# --no-qemu skips the guest. The other arguments go to the host's `tiermem-bench compare`; the
# guest's run has sizes of its own (TCG runs ~100x slower than the host).
set -euo pipefail
cd "$(dirname "$0")/.."
qemu=1
args=()
for a in "$@"; do
  if [[ $a == --no-qemu ]]; then qemu=0; else args+=("$a"); fi
done
scripts/install-deps.sh
scripts/build.sh >/dev/null
BUILD_DIR=${BUILD_DIR:-build}
"$BUILD_DIR"/tools/tiermemctl topology
echo
"$BUILD_DIR"/bench/tiermem-bench compare --json "${args[@]}" > "$BUILD_DIR"/compare-host.json

report=(--host "$BUILD_DIR"/compare-host.json)
# The guest, when the host's run left CXL or remote-rdma absent.
lacking=$(python3 -c 'import json, sys
print(" ".join(sorted({a["tier"] for a in json.load(open(sys.argv[1]))["absent"]} & {"cxl", "remote-rdma"})))' \
  "$BUILD_DIR"/compare-host.json)
if [[ $qemu == 1 && -n "$lacking" ]]; then
  echo "run: this machine has no $lacking: the comparison also runs in the QEMU full guest (--no-qemu skips it)" >&2
  guest_log="$BUILD_DIR"/compare-emulated.log
  if qemu/run-guest.sh --cache "$BUILD_DIR"/qemu-cache --topology full --kernel k612 --smp 1 --timeout 300 \
       --file "$BUILD_DIR"/bench/tiermem-bench --file "$BUILD_DIR"/tools/memd/tiermem-memd \
       -- sh -c 'modprobe rdma_ucm 2>/dev/null; tiermem-bench compare --size 8M --remote-size 1M --reps 3 --memd-host 10.9.0.2 --json' \
       > "$BUILD_DIR"/compare-emulated.json 2> "$guest_log"; then
    info=$(sed -n "s/^run-guest: booting topology 'full' on kernel \([^ ]*\) (\([^)]*\)).*/kernel \1, \2/p" "$guest_log")
    report+=(--emulated "$BUILD_DIR"/compare-emulated.json --emulated-info "QEMU full topology, TCG, $info")
  else
    echo "run: the QEMU guest's comparison failed (log: $guest_log):" >&2
    grep '^run-guest:' "$guest_log" >&2 || tail -5 "$guest_log" >&2
    report+=(--emulated-absent "the QEMU guest's run failed: $(grep -m1 'FAILED' "$guest_log" || echo "see $guest_log")")
  fi
elif [[ -n "$lacking" ]]; then
  report+=(--emulated-absent "skipped (--no-qemu)")
fi
scripts/compare-report.py "${report[@]}" --json "$BUILD_DIR"/compare.json --plot "$BUILD_DIR"/compare.png
echo "JSON: $BUILD_DIR/compare.json, plot: $BUILD_DIR/compare.png"
