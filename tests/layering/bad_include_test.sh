#!/usr/bin/env bash
# The layering check must fail on an include against the layers and pass on a clean tree: run it
# on a scratch tree of two files, once clean and once with bench/ reaching into the runtime.
set -euo pipefail
check=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bench" "$tmp/base"
printf '#include "tiermem/tiermem.hpp"\n#include "bench/compare_util.h"\n' > "$tmp/bench/a.cc"
printf '#include "base/os.h"\n' > "$tmp/base/b.cc"
"$check" "$tmp" > "$tmp/clean.out" || { echo "FAIL: a clean tree was refused:"; cat "$tmp/clean.out"; exit 1; }
printf '#include "runtime/core/runtime_impl.h"\n' >> "$tmp/bench/a.cc"
if "$check" "$tmp" > "$tmp/bad.out"; then
  echo "FAIL: bench/a.cc includes runtime/core/runtime_impl.h and the check passed"; exit 1
fi
grep -q 'bench/a.cc:3: includes "runtime/core/runtime_impl.h"' "$tmp/bad.out" ||
  { echo "FAIL: the refusal does not name the file and line:"; cat "$tmp/bad.out"; exit 1; }
echo "ok: the check refuses the bad include and names it"
