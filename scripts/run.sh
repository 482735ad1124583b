#!/usr/bin/env bash
# The main job: installs the dependencies, builds, and shows what tiermem finds on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
BUILD_DIR=${BUILD_DIR:-build}
"$BUILD_DIR"/tools/tiermemctl topology
echo
"$BUILD_DIR"/tools/tiermemctl tiers
