#!/usr/bin/env bash
# The Debian packages in a fresh Debian 12 root (ctest label package): `cpack -G DEB` makes
# tiermem and tiermem-dev; a minimal bookworm root made by debootstrap (kept in the build folder
# and made again only when it is missing) gets them with dpkg; inside it, with its own mount and
# network namespaces:
#   - `tiermem run --local-memd 256M` runs python3 with a DRAM limit, its heap beyond it on the
#     run's memd, and the run leaves no process behind;
#   - the API example (tests/integration/consumer) builds against the installed package with
#     find_package(tiermem) and with pkg-config, and runs;
#   - tiermem-memd starts as its systemd unit says, from /etc/tiermem/memd.conf and the token
#     made at install, and serves a client that presents the token;
#   - the man pages are there.
# Usage: package_test.sh BUILD_DIR SOURCE_DIR. Needs root, debootstrap and Debian's archive
# (TIERMEM_DEBIAN_MIRROR, default http://deb.debian.org/debian); exits 77 (skipped) without them.
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
mirror=${TIERMEM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (debootstrap, chroot)"; exit 77; }
command -v debootstrap > /dev/null || { echo "SKIP: debootstrap is not installed"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

pkgs=$build/packages
rm -rf "$pkgs" && mkdir -p "$pkgs"
(cd "$build" && cpack -G DEB -B "$pkgs" > "$pkgs/cpack.log" 2>&1) || { cat "$pkgs/cpack.log"; fail "cpack"; }
runtime_deb=$(ls "$pkgs"/tiermem_*.deb) dev_deb=$(ls "$pkgs"/tiermem-dev_*.deb)
dpkg-deb -c "$runtime_deb" > "$pkgs/runtime.list"
dpkg-deb -c "$dev_deb" > "$pkgs/dev.list"
for f in usr/bin/tiermem usr/bin/tiermemctl usr/bin/tiermem-memd usr/lib/libtiermem-preload.so \
         usr/lib/systemd/system/tiermem-memd.service etc/tiermem/memd.conf \
         usr/share/man/man1/tiermem.1.gz usr/share/man/man1/tiermemctl.1.gz usr/share/man/man1/tiermem-memd.1.gz; do
  grep -Eq " \./$f( -> .*)?$" "$pkgs/runtime.list" || fail "tiermem's package has no /$f"
done
for f in usr/include/tiermem/tiermem.hpp usr/lib/libtiermem.so usr/lib/pkgconfig/tiermem.pc \
         usr/lib/cmake/tiermem/tiermemConfig.cmake; do
  grep -Eq " \./$f( -> .*)?$" "$pkgs/dev.list" || fail "tiermem-dev's package has no /$f"
done

# The root: bookworm, minimal, with what the checks run (python3, a compiler, cmake) and the
# packages' dependencies, so that dpkg installs ours without the network.
root=$build/package-root
deps=$(dpkg-deb -f "$runtime_deb" Depends | tr ',' '\n' | sed -E 's/^ *//; s/[ (].*//' | grep -v '^$' | paste -sd,)
want="python3,g++,cmake,make,pkg-config,procps,$deps"
if [ ! -e "$root/.made" ] || [ "$(cat "$root/.made")" != "$want" ]; then
  rm -rf "$root"
  debootstrap --variant=minbase --include="$want" bookworm "$root" "$mirror" > "$build/package-root.log" 2>&1 ||
    { tail -20 "$build/package-root.log"; fail "debootstrap (is $mirror reachable?)"; }
  echo "$want" > "$root/.made"
fi
rm -rf "$root/tmp/tiermem-test" && mkdir -p "$root/tmp/tiermem-test"
cp "$runtime_deb" "$dev_deb" "$root/tmp/tiermem-test/"
cp -r "$src/tests/integration/consumer" "$root/tmp/tiermem-test/consumer"
cp "$src/tests/package/in_root.sh" "$root/tmp/tiermem-test/"

# Mounts, the network and process ids live in namespaces of their own (gone when the check ends;
# pgrep there sees only the check's processes); loopback up. The root sees none of this
# environment (a CMAKE_*_LAUNCHER or TIERMEM_* set here would change what a user there sees).
unshare --mount --net --pid --fork sh -c '
  set -e
  ip link set lo up
  mount -t proc proc "$1/proc"
  mount --rbind /sys "$1/sys"
  mount -t tmpfs tmpfs "$1/dev/shm"
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 chroot "$1" /bin/bash /tmp/tiermem-test/in_root.sh' sh "$root"
echo PASS
