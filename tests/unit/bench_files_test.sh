#!/bin/sh
# bench.writes_only_where_told: a short `tiermem-bench gups` (the tiered mode alone, 8M, 2 s) run
# in an empty working directory leaves nothing there; with --timeline PREFIX its timeline is
# written under PREFIX and nowhere else.
# Usage: bench_files_test.sh path/to/tiermem-bench
set -u
bench=$1
work=$(mktemp -d)
out=$(mktemp -d)
trap 'rm -rf "$work" "$out"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
run() {  # ARGS...: gups in $work, its output in $out
  (cd "$work" && TIERMEM_BENCH_GUPS_MODES=tiered timeout 120 "$bench" gups --size 8M --seconds 2 --rounds 1 \
     --json "$@" > "$out/stdout" 2> "$out/stderr")
}
run || bad "gups exited $?: $(cat "$out/stderr")"
grep -q '"tiered_gups"' "$out/stdout" || bad "gups printed no tiered_gups: $(head -c 300 "$out/stdout")"
left=$(ls -A "$work")
[ -z "$left" ] || bad "gups without --timeline left files in its working directory: $left"
mkdir "$out/timeline"
run --timeline "$out/timeline/t" || bad "gups --timeline exited $?: $(cat "$out/stderr")"
[ -s "$out/timeline/t-tiered.jsonl" ] || bad "gups --timeline wrote no $out/timeline/t-tiered.jsonl: $(ls -A "$out/timeline")"
left=$(ls -A "$work")
[ -z "$left" ] || bad "gups --timeline elsewhere left files in its working directory: $left"
[ "$fail" = 0 ] && echo "PASS: gups writes files only where told"
exit "$fail"
