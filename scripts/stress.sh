#!/usr/bin/env bash
# The stress pass: the integration, cluster and preload labels once more, beside two busy loops
# that keep every core of a two-core machine contended, so a test that only passes when its
# threads get the CPU on time fails here instead of on a user's loaded machine.
# Runs from an existing build (BUILD_DIR, default build); scripts/test.sh calls it after the
# normal run. Extra arguments go to ctest. Exits with ctest's status.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
if [[ ! -f "$build/CTestTestfile.cmake" ]]; then
  echo "stress.sh: $build has no tests: build first (scripts/build.sh)" >&2
  exit 2
fi

loops=()
stop_loops() {
  local pid
  for pid in "${loops[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${loops[@]}"; do wait "$pid" 2>/dev/null || true; done
  loops=()
}
trap stop_loops EXIT
trap 'exit 130' INT TERM
for _ in 1 2; do
  sh -c 'while :; do :; done' &
  loops+=("$!")
done

echo "=== stress pass: ctest -L 'integration|cluster|preload' beside two busy loops (pids ${loops[*]}) ==="
start=$(date +%s)
log=$(mktemp)
rc=0
(cd "$build" && ctest -L 'integration|cluster|preload' --output-on-failure --timeout 900 -j2 "$@") \
  2>&1 | tee "$log" || rc=$?
stop_loops
summary=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -n 1 || true)
rm -f "$log"
echo "=== stress pass: ${summary:-no ctest summary}; exit status $rc; $(( $(date +%s) - start )) s ==="
exit "$rc"
