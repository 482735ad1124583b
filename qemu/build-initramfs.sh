#!/bin/bash
# Builds the initramfs for the QEMU test runs.
#
#   qemu/build-initramfs.sh --cache DIR [--kernel k61|k612] --out FILE [FILE...]
#
# FILE is made of two concatenated cpio archives (the kernel unpacks them in order):
#  1. a base archive, cached as DIR/base-KVER.cpio.gz and rebuilt only when its inputs change:
#     busybox-static, the kernel modules of the CXL/DAX/NVDIMM/RDMA/veth stacks (with depmod run),
#     the tools (numactl, cxl, ndctl, daxctl, rdma, ip, ibv_*, perftest) with the libraries `ldd`
#     lists, and the soft-RoCE verbs provider. Modules shipped compressed (.ko.xz, as 6.12's
#     are) are decompressed, so busybox's modprobe loads them;
#  2. a project archive with each FILE given (the project's test binaries and scripts) under
#     /tiermem/bin/, ELF files with their `ldd` libraries at the paths ldd resolved them to (so a
#     build-tree libtiermem.so is found through the binary's RUNPATH). Rebuilt when a FILE changes.
# The guest's /init is not in here: run-guest.sh appends it with the command to run.
# --kernel picks the guest kernel (qemu/fetch-kernel.sh; default k61).
# Needs: busybox-static, cpio, kmod (depmod), xz-utils, and the tool packages named in docs/qemu.md.
set -euo pipefail

die() { echo "build-initramfs: $*" >&2; exit 1; }
log() { echo "build-initramfs: $*" >&2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=""
out=""
kname=k61
files=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --cache) cache=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --kernel) kname=$2; shift 2 ;;
    --) shift; files+=("$@"); break ;;
    -*) die "unknown option $1" ;;
    *) files+=("$1"); shift ;;
  esac
done
[[ -n "$cache" && -n "$out" ]] || die "usage: $0 --cache DIR --out FILE [FILE...]"
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

kver=$("$here/fetch-kernel.sh" "$cache" "$kname")
kroot="$cache/kernel-$kname"

# Tools copied into the guest, by absolute path. iproute2's ip must keep the name `ip` (it picks
# its mode from argv[0]) and be called by full path in the guest (busybox's own ip comes first).
tools=(/usr/bin/numactl /usr/bin/cxl /usr/bin/ndctl /usr/bin/daxctl /usr/bin/rdma
       /usr/sbin/ip /usr/bin/ibv_devices /usr/bin/ibv_devinfo /usr/bin/ib_read_lat
       /usr/bin/ib_read_bw /usr/bin/ib_write_lat /usr/bin/ib_write_bw /usr/bin/ib_send_lat /usr/sbin/tc)
providers=(/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so)
module_dirs=(drivers/cxl drivers/dax drivers/nvdimm drivers/infiniband drivers/net/veth.ko net/sched/sch_netem.ko fs/configfs
             net/ipv4 net/ipv6 net/core lib crypto arch/x86/crypto)
[[ -x /bin/busybox ]] || die "busybox-static is not installed (/bin/busybox)"
for t in "${tools[@]}" "${providers[@]}"; do
  [[ -e "$t" ]] || die "$t is missing (install the packages listed in docs/qemu.md)"
done

# Copies an ELF file's shared libraries (as ldd resolves them) into the staging root $1. System
# libraries keep their path; the project's own (found through RUNPATH in the build tree, which may
# lie under /tmp, a tmpfs in the guest) go to /tiermem/lib, which the guest puts on LD_LIBRARY_PATH.
copy_libs() {
  local root=$1 file=$2 lib
  while read -r lib; do
    [[ -n "$lib" && -e "$lib" ]] || continue
    if [[ "$lib" != /usr/* && "$lib" != /lib/* && "$lib" != /lib64/* ]]; then
      mkdir -p "$root/tiermem/lib"
      cp -L "$lib" "$root/tiermem/lib/$(basename "$lib")"
    elif [[ ! -e "$root$lib" ]]; then
      mkdir -p "$root$(dirname "$lib")"
      cp -L "$lib" "$root$lib"
    fi
  done < <(ldd "$file" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
}

is_elf() { [[ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" == '177ELF' ]]; }

# --- 1. the base archive -------------------------------------------------------------------------
base="$cache/base-$kver.cpio.gz"
base_stamp=$( {
  echo "$kver"
  sha256sum "${BASH_SOURCE[0]}"
  stat -L -c '%n %s %Y' /bin/busybox "${tools[@]}" "${providers[@]}" /etc/libibverbs.d/rxe.driver
} | sha256sum | cut -d' ' -f1)
if [[ ! -f "$base" || "$(cat "$base.stamp" 2>/dev/null)" != "$base_stamp" ]]; then
  log "building the base initramfs for kernel $kver"
  stage="$cache/base-stage"
  rm -rf "$stage"
  mkdir -p "$stage"/{usr/bin,usr/sbin,usr/lib/x86_64-linux-gnu,usr/lib64,etc/libibverbs.d,dev,proc,sys,tmp,run,root,mnt}
  # Merged /usr as on Debian 12, so every path ldd prints exists in the guest.
  ln -s usr/bin "$stage/bin"
  ln -s usr/sbin "$stage/sbin"
  ln -s usr/lib "$stage/lib"
  ln -s usr/lib64 "$stage/lib64"
  cp /bin/busybox "$stage/usr/bin/busybox"
  ln -s busybox "$stage/usr/bin/sh"
  ln -s ../bin/busybox "$stage/usr/sbin/modprobe"  # the kernel's module requests use /sbin/modprobe
  for t in "${tools[@]}"; do
    cp -L "$t" "$stage$t"
    copy_libs "$stage" "$t"
  done
  for p in "${providers[@]}"; do
    mkdir -p "$stage$(dirname "$p")"
    cp -L "$p" "$stage$p"
    copy_libs "$stage" "$p"
  done
  cp /etc/libibverbs.d/rxe.driver "$stage/etc/libibverbs.d/"
  for f in /etc/nsswitch.conf /etc/protocols /etc/services; do
    [[ -f "$f" ]] && cp "$f" "$stage$f"
  done
  echo "root:x:0:0:root:/root:/bin/sh" > "$stage/etc/passwd"
  echo "root:x:0:" > "$stage/etc/group"
  # Kernel modules: the subsets the topologies need, then depmod (the .deb ships no modules.dep).
  mdir="lib/modules/$kver"
  mkdir -p "$stage/usr/$mdir/kernel"
  cp "$kroot/$mdir"/modules.{order,builtin,builtin.modinfo} "$stage/usr/$mdir/"
  for d in "${module_dirs[@]}"; do
    [[ -e "$kroot/$mdir/kernel/$d" || ! -e "$kroot/$mdir/kernel/$d.xz" ]] || d=$d.xz
    mkdir -p "$stage/usr/$mdir/kernel/$(dirname "$d")"
    cp -a "$kroot/$mdir/kernel/$d" "$stage/usr/$mdir/kernel/$d"
  done
  find "$stage/usr/$mdir/kernel" -name '*.ko.xz' -exec xz -d {} +
  depmod -b "$stage/usr" "$kver"
  (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) | gzip -1 > "$base.tmp"
  # The kernel looks for the next archive only at a 4-byte-aligned offset: pad with zeros (skipped).
  pad=$(( (512 - $(stat -c %s "$base.tmp") % 512) % 512 ))
  head -c "$pad" /dev/zero >> "$base.tmp"
  (cd "$stage" && find . -mindepth 1 -not -type d | sed 's|^\.||') > "$base.files"
  mv "$base.tmp" "$base"
  echo "$base_stamp" > "$base.stamp"
  rm -rf "$stage"
fi

# --- 2. the project archive ----------------------------------------------------------------------
proj_stamp=$( {
  echo "$base_stamp"
  for f in "${files[@]}"; do
    [[ -f "$f" ]] || die "$f: no such file"
    stat -L -c '%n %s %Y' "$f"
    if is_elf "$f"; then
      ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | xargs -r stat -L -c '%n %s %Y'
    fi
  done
} | sha256sum | cut -d' ' -f1)
if [[ -f "$out" && "$(cat "$out.stamp" 2>/dev/null)" == "$proj_stamp" ]]; then
  exit 0
fi
stage=$(mktemp -d "$cache/proj-stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tiermem/bin" "$stage"/usr/{bin,sbin,lib,lib64}
# The same merged-/usr links as the base, so libraries land under usr/; the links themselves stay
# out of this archive (the kernel would replace the base's /lib link by a directory otherwise).
for d in bin sbin lib lib64; do ln -s "usr/$d" "$stage/$d"; done
for f in "${files[@]}"; do
  dest="$stage/tiermem/bin/$(basename "$f")"
  if is_elf "$f"; then
    # Debug info only makes the guest's RAM disk bigger and slower to load.
    objcopy --strip-debug "$f" "$dest" 2>/dev/null || cp -L "$f" "$dest"
    copy_libs "$stage" "$f"
  else
    cp -L "$f" "$dest"
  fi
  chmod +x "$dest"
done
# Drop libraries the base archive already holds; strip the project's own.
while read -r lib; do
  rel=${lib#"$stage"}
  if grep -qxF "$rel" "$base.files"; then
    rm -f "$lib"
  else
    objcopy --strip-debug "$lib" 2>/dev/null || true
  fi
done < <(find "$stage/" -type f -not -path "$stage/tiermem/bin/*")
(cd "$stage" && find . -mindepth 1 -not -path ./bin -not -path ./sbin -not -path ./lib -not -path ./lib64 |
  LC_ALL=C sort | cpio -o -H newc --quiet) > "$stage.cpio"
cat "$base" "$stage.cpio" > "$out.tmp"
rm -f "$stage.cpio"
mv "$out.tmp" "$out"
echo "$proj_stamp" > "$out.stamp"
