#!/usr/bin/env bash
# allocator/preload/startup-symbols.txt (the start-up code layout of libtiermem-preload.so, see
# docs/allocator.md) still names the library's functions: after a refactor that renames many of
# them, regenerate it with scripts/preload-startup-symbols.sh. A stale list only costs start-up
# RSS, so this checks that at least 90% of the names exist.
# usage: startup_symbols.sh LIBRARY LIST
set -euo pipefail
lib=$1 list=$2
syms=$(nm "$lib" 2>/dev/null | awk 'NF == 3 {print $3}' | sort -u)
if [[ -z "$syms" ]]; then
  echo "skip: $lib has no symbol table (stripped)"
  exit 77
fi
names=$(grep -v '^#' "$list" | sort -u)
total=$(echo "$names" | wc -l)
found=$(comm -12 <(echo "$names") <(echo "$syms") | wc -l)
echo "$found of $total start-up functions found in $lib"
if (( found * 10 < total * 9 )); then
  echo "FAIL: the list is stale; run scripts/preload-startup-symbols.sh BUILD_DIR"
  comm -23 <(echo "$names") <(echo "$syms") | head -20
  exit 1
fi
