#!/usr/bin/env bash
# scripts/check-sizes.py refuses a long function with no reason, and one of its known list that
# grew; it lets a long function pass with a "Why long:" comment, and a known one that did not grow.
#   sizes_test.sh CHECK_SIZES
set -euo pipefail
check=$1
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/runtime"
long_function() {  # NAME LINES [COMMENT]
  [ -n "${3:-}" ] && echo "// $3"
  echo "int $1(int x) {"
  for _ in $(seq "$2"); do echo "  x += 1;"; done
  echo "  return x;"
  echo "}"
}
expect() {  # STATUS WHAT ARGS...
  local want=$1 what=$2 rc=0
  shift 2
  python3 "$check" --root "$root" "$@" > "$root/out" 2>&1 || rc=$?
  [ "$rc" -eq "$want" ] || { echo "FAIL: $what: exit $rc, wanted $want"; cat "$root/out"; exit 1; }
}
{ long_function Short 10; long_function Long 90; } > "$root/runtime/a.cc"
expect 1 "an unexplained 93-line function"
grep -q "runtime/a.cc:.*Long: 93 lines" "$root/out" || { echo "FAIL: not named: $(cat "$root/out")"; exit 1; }
echo "runtime/a.cc Long 93" > "$root/known"
expect 0 "a known function of its known length" --known "$root/known"
echo "runtime/a.cc Long 92" > "$root/known"
expect 1 "a known function that grew" --known "$root/known"
long_function Long 90 "Why long: one table of ninety cases, read top to bottom." > "$root/runtime/a.cc"
expect 0 "a long function that says why"
long_function Long 90 "Why long:" > "$root/runtime/a.cc"
expect 1 "a 'Why long:' with no reason"
# Braces in strings and comments, lambdas and control blocks inside count toward their function.
cat > "$root/runtime/b.cc" <<'CC'
namespace n {
struct S { int f() const { return 1; } };
int g(int x) {
  const char* s = "}}}{";  // }
  auto l = [&](int y) { return y + 1; };
  if (x) { x = l(x); }
CC
for _ in $(seq 80); do echo "  x += 1;" >> "$root/runtime/b.cc"; done
printf '  return x;\n}\n}  // namespace n\n' >> "$root/runtime/b.cc"
rm "$root/runtime/a.cc"
expect 1 "a function with a lambda, a string and a block inside"
grep -q "b.cc:3: g: 86 lines" "$root/out" || { echo "FAIL: g misread: $(cat "$root/out")"; exit 1; }
echo "OK: check-sizes refuses what it should"
