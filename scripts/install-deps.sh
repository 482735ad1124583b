#!/usr/bin/env bash
# Installs everything tiermem needs to build, test and benchmark on Debian 12 (apt-get).
#
# QEMU must be 8.0 or newer (qemu/qemu-version.sh says why): Debian 12's own qemu-system-x86 is
# 7.2, so on bookworm it comes from bookworm-backports (same archive; the suite is added to apt's
# sources when absent). Where the distribution's own QEMU is new enough, that one is installed.
set -euo pipefail
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PKGS=(
  build-essential cmake pkg-config git clang libclang-rt-14-dev lld
  libnuma-dev numactl libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev
  libibverbs-dev librdmacm-dev rdma-core ibverbs-providers ibverbs-utils perftest
  libcxl-dev libdaxctl-dev ndctl daxctl
  busybox-static cpio kmod iproute2 xz-utils
  libjemalloc-dev libjemalloc2 libmimalloc-dev libmimalloc2.0
  libisal-dev libisal2
  gnuplot-nox python3 sqlite3 memcached redis-server liblinear-tools
  help2man debootstrap procps
)
apt_install() {
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@"
}
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
updated=0
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  updated=1
  apt_install "${missing[@]}"
fi

# --- QEMU >= 8 ---------------------------------------------------------------------------------
# shellcheck source=../qemu/qemu-version.sh
. "$here/../qemu/qemu-version.sh"
if tm_qemu_version_ok >/dev/null 2>&1; then
  exit 0
fi
# The distribution's candidate, epoch and Debian revision dropped ("1:7.2+dfsg-7" -> "7.2").
candidate_version() {
  apt-cache "$@" policy qemu-system-x86 2>/dev/null |
    awk '/Candidate:/ { v = $2; sub(/^[0-9]+:/, "", v); sub(/[+~-].*/, "", v); print v; exit }'
}
if [[ $updated == 0 ]]; then $SUDO apt-get update -qq; fi
own=$(candidate_version)
if [[ -n "$own" && "$own" != "(none)" ]] && [[ $(printf '%s\n' "$TM_QEMU_MIN_VERSION" "$own" | sort -V | head -1) == "$TM_QEMU_MIN_VERSION" ]]; then
  echo "install-deps: installing the distribution's qemu-system-x86 $own"
  apt_install qemu-system-x86
else
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [[ $codename == bookworm ]] || {
    echo "install-deps: QEMU >= $TM_QEMU_MIN_VERSION is needed and this distribution offers ${own:-none}: install it by hand" >&2
    exit 1
  }
  if ! grep -rqs '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "install-deps: adding bookworm-backports to apt's sources (QEMU $own is older than $TM_QEMU_MIN_VERSION)"
    echo 'deb http://deb.debian.org/debian bookworm-backports main' |
      $SUDO tee /etc/apt/sources.list.d/backports.list >/dev/null
  fi
  $SUDO apt-get update -qq
  echo "install-deps: installing qemu-system-x86 $(candidate_version -t bookworm-backports) from bookworm-backports"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    -t bookworm-backports qemu-system-x86
fi
tm_qemu_version_ok
