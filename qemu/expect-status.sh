#!/bin/bash
# Runs a command and passes (exit 0) only when it exits with the given status and, with
# --stdout-has, its stdout holds the string; for the harness's self-tests ("a guest command that
# fails makes the host test fail"). The command's stdout is passed through.
#
#   qemu/expect-status.sh STATUS [--stdout-has STRING] COMMAND...
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 STATUS [--stdout-has STRING] COMMAND..." >&2; exit 2; }
want=$1
shift
needle=""
if [[ $1 == --stdout-has ]]; then
  needle=$2
  shift 2
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
"$@" > "$out" || rc=$?
cat "$out"
if [[ $rc != "$want" ]]; then
  echo "expect-status: FAILED: expected exit status $want, got $rc" >&2
  exit 1
fi
if [[ -n "$needle" ]] && ! grep -qF -- "$needle" "$out"; then
  echo "expect-status: FAILED: exit status $rc as expected, but stdout lacks '$needle'" >&2
  exit 1
fi
if [[ -n "$needle" ]]; then
  echo "expect-status: got the expected exit status $rc and '$needle' on stdout"
else
  echo "expect-status: got the expected exit status $rc"
fi
