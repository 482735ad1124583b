#!/bin/bash
# bench_check.sh hotset|memcached TIERMEM_BENCH [RSS_SLACK_BYTES]
# Runs a small `tiermem-bench preload-hotset` (every setup) or `tiermem-bench memcached` (the
# tiermem setup) and checks its JSON with bench_json_check.py; with RSS_SLACK_BYTES, memcached's
# peak RSS is checked too. The memcached variant exits 77 (ctest: skipped) where memcached is not
# installed.
set -u
mode=$1 bench=$2 slack=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp /tmp/tiermem-bench-check-XXXXXX)
trap 'rm -f "$out"' EXIT
case $mode in
  hotset)
    # 64 MiB, 2 s per setup: the shape and the checksums, not the figures.
    args=(preload-hotset --size 64M --seconds 2 --setup-timeout 120 --json) ;;
  memcached)
    command -v memcached > /dev/null || { echo "SKIP: memcached is not installed"; exit 77; }
    # About 62 MiB of values (30k keys), DRAM limit a sixth of it, 8 s of gets.
    args=(memcached --setups tiermem --keys 30000 --connections 4 --seconds 8 --json) ;;
  *) echo "usage: bench_check.sh hotset|memcached TIERMEM_BENCH [RSS_SLACK_BYTES]"; exit 2 ;;
esac
"$bench" "${args[@]}" > "$out"
rc=$?
echo "tiermem-bench ${args[*]}: exit $rc"
head -c 4000 "$out"
echo
python3 "$here/bench_json_check.py" "$mode" "$out" "$slack" || exit 1
[ "$rc" = 0 ] || { echo "FAIL: tiermem-bench exited $rc"; exit 1; }
