#!/usr/bin/env bash
# Makes a program's man page from its --help (help2man), with a section per subcommand made from
# `PROG SUB --help`, so that the page cannot disagree with the program.
# Usage: scripts/man-page.sh HELP2MAN PROG NAME "WHAT IT IS" VERSION OUT [SUBCOMMAND...]
# OUT ending in .gz is compressed (gzip -n: the same bytes from the same input).
set -euo pipefail
help2man=$1 prog=$2 name=$3 what=$4 version=$5 out=$6
shift 6
inc=$(mktemp)
trap 'rm -f "$inc"' EXIT
for sub in "$@"; do
  {
    printf '[%s %s]\n.nf\n' "$(echo "$name" | tr a-z A-Z)" "$(echo "$sub" | tr a-z A-Z)"
    "$prog" "$sub" --help 2>&1 | sed -e "s#$prog#$name#g" -e 's/\\/\\e/g' -e 's/^\./\\&./'
    printf '.fi\n'
  } >> "$inc"
done
printf '[SEE ALSO]\n/usr/share/doc/tiermem, and docs/ in the source tree: run.md, observability.md, protocol.md.\n' >> "$inc"
page=${out%.gz}
"$help2man" --no-info --no-discard-stderr --name="$what" --version-string="$version" --include="$inc" \
  --output="$page" "$prog"
if [[ $out == *.gz ]]; then gzip -9nf "$page"; fi
