#!/bin/bash
# Fetches a Debian guest kernel for the QEMU test runs, without installing it on the host.
#
#   qemu/fetch-kernel.sh CACHE_DIR [KERNEL]
#
# KERNEL names the guest kernel (default k61):
#   k61   Debian 12's own kernel: the package bookworm's linux-image-amd64 depends on (6.1.0-xx-amd64)
#   k612  the kernel of bookworm-backports: the package that suite's linux-image-amd64 depends on
#         (6.12.x+deb12-amd64; scripts/install-deps.sh adds the suite to apt's sources)
# Finds the package with apt-cache depends, downloads it with `apt-get download` into CACHE_DIR and
# unpacks it into CACHE_DIR/kernel-KERNEL with `dpkg -x`. Prints the unpacked kernel's version on
# stdout ("6.1.0-57-amd64"); the image is then CACHE_DIR/kernel-KERNEL/boot/vmlinuz-VERSION and its
# modules CACHE_DIR/kernel-KERNEL/lib/modules/VERSION.
# Idempotent: a cached, unpacked package is reused without touching apt.
# TM_QEMU_KERNEL_PKG_<KERNEL> (e.g. TM_QEMU_KERNEL_PKG_k61=linux-image-6.1.0-57-amd64) overrides
# the package.
set -euo pipefail

die() { echo "fetch-kernel: $*" >&2; exit 1; }

[[ $# -eq 1 || $# -eq 2 ]] || die "usage: $0 CACHE_DIR [k61|k612]"
cache=$1
kname=${2:-k61}
case $kname in
  k61) suite=() ;;
  k612) suite=(-t bookworm-backports) ;;
  *) die "unknown guest kernel '$kname' (k61 or k612)" ;;
esac
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
kdir="$cache/kernel-$kname"
stamp="$kdir.stamp"

# Reuse whatever was unpacked before, so that repeated runs (and runs without apt access) work.
if [[ -f "$stamp" ]]; then
  version=$(cat "$stamp")
  if [[ -f "$kdir/boot/vmlinuz-$version" && -d "$kdir/lib/modules/$version" ]]; then
    echo "$version"
    exit 0
  fi
fi

kernel_dep() {
  apt-cache "${suite[@]}" depends linux-image-amd64 2>/dev/null |
    awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}
# A fresh machine may have no package lists yet: update them once (as root) and ask again.
update_lists() {
  [[ $(id -u) -eq 0 ]] || return 1
  echo "fetch-kernel: running apt-get update" >&2
  apt-get update -qq >&2
}
pkg_var=TM_QEMU_KERNEL_PKG_$kname
pkg=${!pkg_var:-}
if [[ -z "$pkg" ]]; then
  pkg=$(kernel_dep)
  if [[ -z "$pkg" ]] && update_lists; then pkg=$(kernel_dep); fi
  [[ -n "$pkg" ]] || die "apt-cache ${suite[*]} depends linux-image-amd64 names no linux-image-<version> package (for k612: scripts/install-deps.sh adds bookworm-backports to apt's sources)"
fi
version=${pkg#linux-image-}
# Without bookworm-backports in apt's sources, `apt-cache -t bookworm-backports` answers with
# bookworm's own kernel: refuse that rather than test 6.1 twice.
if [[ $kname == k612 && $version != 6.1[2-9].* ]]; then
  die "k612: apt offers $pkg, not a 6.12 kernel (scripts/install-deps.sh adds bookworm-backports to apt's sources)"
fi

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

rm -rf "$kdir.tmp"
dpkg -x "$deb" "$kdir.tmp"
[[ -f "$kdir.tmp/boot/vmlinuz-$version" ]] || die "$deb holds no boot/vmlinuz-$version"
rm -rf "$kdir"
mv "$kdir.tmp" "$kdir"
echo "$version" > "$stamp"
echo "$version"
