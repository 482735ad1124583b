#!/bin/bash
# Runs a command and passes (exit 0) only when it exits with the given status and, with
# --stdout-has / --stderr-has, its stdout / stderr holds the string; for the harness's self-tests
# ("a guest command that fails makes the host test fail"). The command's output is passed through.
#
#   qemu/expect-status.sh STATUS [--stdout-has STRING] [--stderr-has STRING] COMMAND...
set -euo pipefail
usage="usage: $0 STATUS [--stdout-has STRING] [--stderr-has STRING] COMMAND..."
[[ $# -ge 2 ]] || { echo "$usage" >&2; exit 2; }
want=$1
shift
needle=""
err_needle=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --stdout-has) [[ $# -ge 2 ]] || { echo "$usage" >&2; exit 2; }; needle=$2; shift 2 ;;
    --stderr-has) [[ $# -ge 2 ]] || { echo "$usage" >&2; exit 2; }; err_needle=$2; shift 2 ;;
    *) break ;;
  esac
done
[[ $# -ge 1 ]] || { echo "$usage" >&2; exit 2; }
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
rc=0
"$@" > "$out" 2> "$err" || rc=$?
cat "$err" >&2
cat "$out"
if [[ $rc != "$want" ]]; then
  echo "expect-status: FAILED: expected exit status $want, got $rc" >&2
  exit 1
fi
if [[ -n "$needle" ]] && ! grep -qF -- "$needle" "$out"; then
  echo "expect-status: FAILED: exit status $rc as expected, but stdout lacks '$needle'" >&2
  exit 1
fi
if [[ -n "$err_needle" ]] && ! grep -qF -- "$err_needle" "$err"; then
  echo "expect-status: FAILED: exit status $rc as expected, but stderr lacks '$err_needle'" >&2
  exit 1
fi
if [[ -n "$needle" ]]; then
  echo "expect-status: got the expected exit status $rc and '$needle' on stdout"
else
  echo "expect-status: got the expected exit status $rc"
fi
