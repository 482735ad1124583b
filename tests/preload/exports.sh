#!/usr/bin/env bash
# libtiermem-preload.so exports exactly the allocation API listed in exports.map (the malloc
# family, operator new/delete, jemalloc's own API) and the calls that set a signal's action:
# nothing of the runtime, the heap or the libstdc++ templates it instantiates leaks into the
# program's symbol namespace; and it is self-contained: it does not load libtiermem.so.
# usage: exports.sh LIBRARY EXPORTS_MAP
set -euo pipefail
lib=$1 map=$2
want=$(sed -n '/global:/,/local:/p' "$map" | tr -s ' ;\n' '\n' | grep -v -e '^global:' -e '^local:' -e '^$' -e '^\*$' | sort -u)
have=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u)
if [[ "$want" != "$have" ]]; then
  echo "FAIL: exported symbols differ from $map (< expected, > exported):"
  diff <(echo "$want") <(echo "$have") || true
  exit 1
fi
if readelf -d "$lib" | grep -q 'NEEDED.*libtiermem\.so'; then
  echo "FAIL: $lib needs libtiermem.so"
  exit 1
fi
echo "ok: $(echo "$want" | wc -l) symbols exported, no libtiermem.so dependency"
