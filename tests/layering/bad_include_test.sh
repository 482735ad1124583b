#!/usr/bin/env bash
# The layering check must pass on a clean tree and refuse every kind of include that goes up or
# sideways: run it on a scratch tree with one file per folder (each including what its layer
# allows), then once per bad include added to that tree, and check the refusal names the file
# and line. Usage: bad_include_test.sh CHECK_LAYERING
set -euo pipefail
check=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

clean() {  # a tree where every include goes down
  rm -rf "$tmp/tree"
  local -A files=(
    [include/tiermem/a.hpp]='tiermem/status.hpp'
    [base/a.cc]='base/os.h tiermem/status.hpp'
    [protocol/a.cc]='protocol/wire.h base/os.h'
    [backends/a.cc]='backends/numa/numa.h protocol/wire.h base/os.h'
    [runtime/topology/a.cc]='runtime/topology/topology.h backends/numa/numa.h base/os.h'
    [runtime/stats/a.cc]='runtime/stats/stats_block.h base/os.h'
    [runtime/pages/a.cc]='runtime/pages/region.h base/os.h'
    [runtime/paging/a.cc]='runtime/paging/pager.h runtime/pages/region.h backends/remote/client.h protocol/wire.h'
    [runtime/tiering/a.cc]='runtime/tiering/policy.h runtime/pages/sampler.h backends/numa/numa.h'
    [runtime/core/a.cc]='runtime/core/runtime_impl.h runtime/paging/pager.h runtime/tiering/policy.h runtime/pages/region.h'
    [allocator/a.cc]='allocator/heap.h runtime/core/heap_runtime.h base/os.h'
    [tools/memd/a.cc]='tools/memd/server.h protocol/wire.h base/os.h'
    [tools/a.cc]='tools/tiermemctl/commands.h tiermem/tiermem.hpp'
    [bench/a.cc]='bench/compare_util.h tiermem/tiermem.hpp'
    [examples/a.cc]='tiermem/tiermem.hpp'
  )
  local f inc
  for f in "${!files[@]}"; do
    mkdir -p "$(dirname "$tmp/tree/$f")"
    for inc in ${files[$f]}; do printf '#include "%s"\n' "$inc"; done > "$tmp/tree/$f"
  done
}

clean
"$check" "$tmp/tree" > "$tmp/out" || { echo "FAIL: a clean tree was refused:"; cat "$tmp/out"; exit 1; }

# FILE INCLUDE: each kind of include against the layers.
bad=(
  "include/tiermem/a.hpp base/os.h"                  # the public API on the internals
  "base/a.cc protocol/wire.h"                        # the floor reaching up
  "protocol/a.cc backends/numa/numa.h"
  "backends/a.cc runtime/core/runtime_impl.h"
  "runtime/topology/a.cc runtime/core/runtime_impl.h"
  "runtime/stats/a.cc runtime/core/runtime_impl.h"
  "runtime/pages/a.cc runtime/paging/pager.h"        # the runtime's floor reaching up
  "runtime/pages/a.cc runtime/core/runtime_impl.h"
  "runtime/pages/a.cc backends/numa/numa.h"
  "runtime/paging/a.cc runtime/core/runtime_impl.h"  # paging up into the core
  "runtime/tiering/a.cc runtime/core/runtime_impl.h" # tiering up into the core
  "runtime/paging/a.cc runtime/tiering/policy.h"     # sideways
  "runtime/tiering/a.cc runtime/paging/pager.h"
  "runtime/tiering/a.cc backends/remote/client.h"
  "allocator/a.cc runtime/core/runtime_impl.h"       # past its narrow interface
  "allocator/a.cc runtime/pages/region.h"
  "allocator/a.cc runtime/paging/pager.h"
  "tools/memd/a.cc backends/remote/client.h"
  "tools/a.cc runtime/core/runtime_impl.h"
  "bench/a.cc runtime/core/runtime_impl.h"
  "bench/a.cc base/os.h"
  "examples/a.cc base/os.h"
)
for entry in "${bad[@]}"; do
  read -r file inc <<< "$entry"
  clean
  printf '#include "%s"\n' "$inc" >> "$tmp/tree/$file"
  line=$(wc -l < "$tmp/tree/$file")
  if "$check" "$tmp/tree" > "$tmp/out"; then
    echo "FAIL: $file includes $inc and the check passed"; exit 1
  fi
  grep -q "^$file:$line: includes \"$inc\"" "$tmp/out" ||
    { echo "FAIL: the refusal of $file -> $inc does not name the file and line:"; cat "$tmp/out"; exit 1; }
  [ "$(grep -c ': includes "' "$tmp/out")" -eq 1 ] ||
    { echo "FAIL: $file -> $inc: more than the one bad include refused:"; cat "$tmp/out"; exit 1; }
done
echo "ok: the check passes a clean tree and refuses ${#bad[@]} kinds of include against the layers"
