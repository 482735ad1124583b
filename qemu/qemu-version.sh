# Sourced by the QEMU harness (run-guest.sh) and scripts/install-deps.sh: the oldest QEMU the
# harness accepts, and the check.
#
# Why 8.0: QEMU 7.2's cxl-type3 window reads back zeros under TCG, so nothing written to the CXL
# node survives (data checks on CXL cannot pass), and its cxl-type3 is persistent memory only
# (volatile-memdev= came in 8.0). Debian 12's own package is 7.2; bookworm-backports has 10.0.
TM_QEMU_MIN_VERSION=8.0

# tm_qemu_version [BINARY]: prints BINARY's version ("10.0.2"), or nothing when it does not run.
tm_qemu_version() {
  "${1:-qemu-system-x86_64}" --version 2>/dev/null |
    sed -n '1s/.*version \([0-9][0-9]*\.[0-9][0-9]*\(\.[0-9][0-9]*\)\{0,1\}\).*/\1/p'
}

# tm_qemu_version_ok [BINARY]: status 0 and the version on stdout when BINARY is at least
# TM_QEMU_MIN_VERSION; otherwise status 1 and one line on stderr saying why.
tm_qemu_version_ok() {
  local bin=${1:-qemu-system-x86_64} v
  if ! command -v "$bin" >/dev/null 2>&1; then
    echo "qemu: $bin not found: QEMU >= $TM_QEMU_MIN_VERSION is needed (scripts/install-deps.sh installs it)" >&2
    return 1
  fi
  v=$(tm_qemu_version "$bin")
  if [[ -z "$v" || $(printf '%s\n' "$TM_QEMU_MIN_VERSION" "$v" | sort -V | head -1) != "$TM_QEMU_MIN_VERSION" ]]; then
    echo "qemu: $bin is QEMU ${v:-of unknown version}, older than $TM_QEMU_MIN_VERSION: its CXL memory reads back zeros under TCG and has no volatile-memdev (scripts/install-deps.sh installs a newer one)" >&2
    return 1
  fi
  echo "$v"
}
