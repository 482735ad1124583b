#!/usr/bin/env bash
# The whole test suite: installs the dependencies, builds, and runs every ctest label
# (unit, integration, preload, programs, package, cluster, fuzz, qemu), then the stress pass
# (scripts/stress.sh: the integration, cluster and preload labels again beside two busy loops;
# TIERMEM_STRESS=0 skips it). Exits non-zero when either run failed. .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
rc=0
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure --timeout 900 -j2 "$@") || rc=$?
if [[ "${TIERMEM_STRESS:-1}" != 0 ]]; then
  stress_rc=0
  scripts/stress.sh || stress_rc=$?
  if [[ $rc == 0 ]]; then rc=$stress_rc; fi
fi
exit "$rc"
