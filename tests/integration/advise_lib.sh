# Shared by the advise_* tests: `. advise_lib.sh` makes a scratch directory `work` (removed at
# exit) and `fail MESSAGE`, which prints the tail of each $work/*.log and exits 1.
work=$(mktemp -d /tmp/tiermem-advise-test-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.log; do
    [ -e "$f" ] || continue
    echo "== $f"
    tail -30 "$f"
  done
  exit 1
}
