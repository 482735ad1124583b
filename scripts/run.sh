#!/usr/bin/env bash
# The main job: installs the dependencies, builds, and compares every memory tier this machine
# has (DRAM, each CXL node, remote over RDMA, remote over TCP) on the same access patterns.
# A tiermem-memd is started on loopback for the remote rows; absent tiers are named with the
# reason. Writes the table to stdout, the JSON to build/compare.json and a plot to
# build/compare.png. Extra arguments go to `tiermem-bench compare`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
BUILD_DIR=${BUILD_DIR:-build}
"$BUILD_DIR"/tools/tiermemctl topology
echo
"$BUILD_DIR"/bench/tiermem-bench compare --plot "$BUILD_DIR"/compare.png "$@"
"$BUILD_DIR"/bench/tiermem-bench compare --json "$@" > "$BUILD_DIR"/compare.json
echo "JSON: $BUILD_DIR/compare.json, plot: $BUILD_DIR/compare.png"
