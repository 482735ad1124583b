#!/usr/bin/env bash
# The whole test suite: installs the dependencies, builds, and runs every ctest label
# (unit, integration, preload, programs, cluster, fuzz, qemu). .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --timeout 900 -j2 "$@"
