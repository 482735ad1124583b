#!/usr/bin/env bash
# Installs everything tiermem needs to build, test and benchmark on Debian 12 (apt-get).
set -euo pipefail
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
PKGS=(
  build-essential cmake pkg-config git clang libclang-rt-14-dev lld
  libnuma-dev numactl libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev
  libibverbs-dev librdmacm-dev rdma-core ibverbs-providers ibverbs-utils perftest
  libcxl-dev libdaxctl-dev ndctl daxctl
  qemu-system-x86 busybox-static cpio kmod iproute2
  libjemalloc-dev libjemalloc2 libmimalloc-dev libmimalloc2.0
  gnuplot-nox python3 sqlite3
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
