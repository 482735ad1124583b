#!/usr/bin/env bash
# Checks that every #include "..." in the tree goes with the layers of docs/architecture.md:
# a folder includes only itself and the folders below it. Prints one line per offending include
# and exits 1; exits 0 when the tree is clean. Usage: scripts/check-layering.sh [ROOT]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# folder (most specific first) -> the include prefixes it may use. "tiermem/" is the public API.
rules=(
  "include/tiermem:tiermem/"
  "base:base/ tiermem/"
  "protocol:protocol/ base/ tiermem/"
  "backends:backends/ protocol/ base/ tiermem/"
  "runtime/topology:runtime/topology/ backends/ base/ tiermem/"
  "runtime/stats:runtime/stats/ base/ tiermem/"
  "runtime/pages:runtime/pages/ base/ tiermem/"
  "runtime/paging:runtime/paging/ runtime/pages/ backends/ protocol/ base/ tiermem/"
  "runtime/tiering:runtime/tiering/ runtime/pages/ backends/numa/ base/ tiermem/"
  "runtime/core:runtime/ backends/ protocol/ base/ tiermem/"
  "allocator:allocator/ runtime/core/heap_runtime.h base/ tiermem/"
  "tools/memd:tools/memd/ protocol/ base/ tiermem/"
  "tools:tools/ tiermem/"
  "bench:bench/ tiermem/"
  "examples:tiermem/"
)
bad=0
checked=0
while IFS= read -r -d '' f; do
  rel=${f#./}
  allowed=""
  folder=""
  for r in "${rules[@]}"; do
    dir=${r%%:*}
    if [[ $rel == "$dir"/* ]]; then
      folder=$dir
      allowed=${r#*:}
      break
    fi
  done
  [[ -z $folder ]] && continue
  checked=$((checked + 1))
  while IFS=: read -r line inc; do
    ok=0
    for a in $allowed; do
      if [[ $inc == "$a"* ]]; then ok=1; break; fi
    done
    if [[ $ok -eq 0 ]]; then
      echo "$rel:$line: includes \"$inc\", but $folder/ may include only: $allowed"
      bad=$((bad + 1))
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[^"]+"' "$f" |
           sed -E 's/^([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1:\2/')
done < <(find . \( -path ./build -o -path './build*' -o -path ./.git \) -prune -o \
              -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cc' -o -name '*.c' \) -print0)
if [[ $checked -eq 0 ]]; then
  echo "check-layering: no source files found under $root" >&2
  exit 2
fi
if [[ $bad -gt 0 ]]; then
  echo "check-layering: $bad include(s) against the layers (docs/architecture.md)"
  exit 1
fi
echo "check-layering: $checked files, every include goes with the layers"
