#!/bin/sh
# bench.help: every tiermem-bench subcommand answers --help (exit 0, its flags and a "JSON keys"
# footer), and rejects a bogus flag and a bad value with an error and exit status 2, before it
# runs anything (a timeout, 124, means it ran). The subcommands are read from `tiermem-bench --help`, so a new one is covered.
# Usage: bench_help_test.sh path/to/tiermem-bench
set -u
bench=$1
fail=0
bad() { echo "FAIL: $*"; fail=1; }

top=$("$bench" --help) || bad "tiermem-bench --help exited non-zero"
subs=$(printf '%s\n' "$top" | sed -n '/^[Ss]ubcommands:/,$p' | sed -n 's/^  \([a-z][a-z0-9-]*\) .*/\1/p')
[ -n "$subs" ] || bad "tiermem-bench --help lists no subcommands"

for sub in $subs "gups --kernel"; do
  # shellcheck disable=SC2086  # "gups --kernel" is two words
  out=$(timeout 20 "$bench" $sub --help 2>&1) || bad "$sub --help exited non-zero"
  printf '%s\n' "$out" | grep -q "JSON keys" || bad "$sub --help has no 'JSON keys' footer"
  printf '%s\n' "$out" | grep -q -- "--json" || bad "$sub --help does not list --json"
  # shellcheck disable=SC2086
  err=$(timeout 20 "$bench" $sub --no-such-flag 2>&1)
  rc=$?
  [ "$rc" = 2 ] || bad "$sub --no-such-flag exited $rc, not 2"
  [ -n "$err" ] || bad "$sub --no-such-flag printed no error"
done

# Bad values: out of range, not a size, not in the list.
for args in "gups --size 4M" "gups --rounds 21" "gups --seconds 1" "kv --size 8M" "kv --setups dram,bogus" \
            "compare --reps 0" "compare --size 12Q" "malloc --runs 0" "malloc --workloads bogus" \
            "remote-fault --pages -1" "remote-fault --transport bogus" "gups --kernel --node0-free x" \
            "preload-hotset --size 1M" "preload-hotset --setups plain,bogus" "memcached --keys 10" \
            "memcached --connections 0" "kv-replay --size 1M" "kv-replay --requests 5" "kv-replay --requests x" \
            "track --mechanisms bogus" "track --rounds 0" "track --sizes 12Q" "track --hot-percent 101"; do
  # shellcheck disable=SC2086
  timeout 20 "$bench" $args >/dev/null 2>&1
  rc=$?
  [ "$rc" = 2 ] || bad "'$args' exited $rc, not 2"
done

# Every malloc workload is named in its --help (the ones not run by default are only found there).
mhelp=$("$bench" malloc --help 2>&1)
for w in small prodcons larson realloc mixed fanin large_touch thread_churn small_loop factor \
         remote_free false_share small_churn thread_loop; do
  printf '%s\n' "$mhelp" | grep -q "$w" || bad "malloc --help does not name the workload $w"
done

[ "$fail" = 0 ] && echo "PASS: $(printf '%s\n' $subs | wc -l) subcommands and gups --kernel"
exit "$fail"
