#!/bin/bash
# Fetches the Debian guest kernel for the QEMU test runs, without installing it on the host.
#
#   qemu/fetch-kernel.sh CACHE_DIR
#
# Finds the package linux-image-amd64 depends on (apt-cache depends), downloads it with
# `apt-get download` into CACHE_DIR and unpacks it there with `dpkg -x`. Prints the unpacked
# kernel's version on stdout ("6.1.0-57-amd64"); the kernel image is then
# CACHE_DIR/kernel/boot/vmlinuz-VERSION and its modules CACHE_DIR/kernel/lib/modules/VERSION.
# Idempotent: a cached, unpacked package is reused without touching apt.
# TM_QEMU_KERNEL_PKG overrides the package name (e.g. linux-image-6.1.0-57-amd64).
set -euo pipefail

die() { echo "fetch-kernel: $*" >&2; exit 1; }

[[ $# -eq 1 ]] || die "usage: $0 CACHE_DIR"
cache=$1
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
stamp="$cache/kernel.stamp"

# Reuse whatever was unpacked before, so that repeated runs (and runs without apt access) work.
if [[ -f "$stamp" ]]; then
  version=$(cat "$stamp")
  if [[ -f "$cache/kernel/boot/vmlinuz-$version" && -d "$cache/kernel/lib/modules/$version" ]]; then
    echo "$version"
    exit 0
  fi
fi

kernel_dep() {
  apt-cache depends linux-image-amd64 2>/dev/null |
    awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}
# A fresh machine may have no package lists yet: update them once (as root) and ask again.
update_lists() {
  [[ $(id -u) -eq 0 ]] || return 1
  echo "fetch-kernel: running apt-get update" >&2
  apt-get update -qq >&2
}
pkg=${TM_QEMU_KERNEL_PKG:-}
if [[ -z "$pkg" ]]; then
  pkg=$(kernel_dep)
  if [[ -z "$pkg" ]] && update_lists; then pkg=$(kernel_dep); fi
  [[ -n "$pkg" ]] || die "apt-cache depends linux-image-amd64 names no linux-image-<version> package"
fi
version=${pkg#linux-image-}

deb=$(find "$cache" -maxdepth 1 -name "${pkg}_*.deb" -print -quit)
if [[ -z "$deb" ]]; then
  echo "fetch-kernel: downloading $pkg into $cache" >&2
  if ! (cd "$cache" && apt-get download "$pkg" >&2); then
    update_lists || die "apt-get download $pkg failed (run 'apt-get update' first?)"
    (cd "$cache" && apt-get download "$pkg" >&2) || die "apt-get download $pkg failed"
  fi
  deb=$(find "$cache" -maxdepth 1 -name "${pkg}_*.deb" -print -quit)
  [[ -n "$deb" ]] || die "apt-get download $pkg left no ${pkg}_*.deb in $cache"
fi

rm -rf "$cache/kernel.tmp"
dpkg -x "$deb" "$cache/kernel.tmp"
[[ -f "$cache/kernel.tmp/boot/vmlinuz-$version" ]] || die "$deb holds no boot/vmlinuz-$version"
rm -rf "$cache/kernel"
mv "$cache/kernel.tmp" "$cache/kernel"
echo "$version" > "$stamp"
echo "$version"
