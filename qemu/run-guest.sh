#!/bin/bash
# Boots a QEMU guest with a named memory topology and runs a command in it.
#
#   qemu/run-guest.sh --topology numa|cxl|rdma|full [--kernel k61|k612] [--cxl-mode pmem|ram]
#                     [--timeout SECONDS] [--boot-timeout SECONDS] [--cache DIR] [--smp N] [--file PATH]... -- GUEST COMMAND...
#
# --file   puts PATH (a test binary or script) into the guest as /tiermem/bin/NAME, on PATH, with
#          the libraries `ldd` lists; repeat for several.
# --kernel the guest kernel (qemu/fetch-kernel.sh): k61, Debian 12's own 6.1 (default), or k612,
#          the 6.12 kernel of bookworm-backports.
# --cxl-mode  how the CXL device of cxl/full presents its memory: pmem (a persistent-memory
#          cxl-type3 -> pmem region -> devdax namespace -> system-ram; the default with k61, whose
#          kernel has no CXL RAM regions) or ram (a volatile cxl-type3 -> RAM region -> dax ->
#          system-ram, as real CXL memory expanders present it; the default with k612).
# --cache  where the guest kernel and initramfs parts are cached (default $TM_QEMU_CACHE,
#          else ./qemu-cache).
# --timeout  whole run limit, boot included (default 300 s).
# --boot-timeout  how long the kernel may take to reach /init (default 90 s, or
#          $TM_QEMU_BOOT_TIMEOUT); a boot that stalls before it is started once more, within what is
#          left of --timeout (not watched again).
# --stall-first-boot  the watcher's self-test: the first boot starts with its CPUs stopped (-S).
# --smp    virtual CPUs of the cxl, rdma and full topologies (default 2; numa has 2, one per
#          socket). Under TCG on a busy 2-core host, a guest system call that changes the page
#          tables of a process running on the other vCPU (move_pages, mprotect, madvise) waits for
#          a TLB-shootdown IPI that the other vCPU's host thread serves only when it gets a host
#          CPU: 15-30 ms per call with 2 vCPUs, ~3 ms with 1 (measured with qemu.full.tiering).
#
# Prints the guest command's output on stdout (boot and setup messages on stderr) and exits with the
# command's exit status (77, "skipped", included). A timeout, a kernel panic, a failed topology
# setup or a missing end marker is a failure: one line saying which, exit status 125 (124 for a
# timeout).
#
# Topologies (see docs/qemu.md):
#   numa  node 0 (2 CPUs, 1 GiB) and node 1 (memory-only, 1 GiB), HMAT latency/bandwidth for both
#   cxl   a cxl-type3 device (512 MiB, pmem or ram) -> region -> dax -> system-ram: NUMA node 1
#   rdma  rxe0/rxe1 (soft-RoCE) on a veth pair, 10.9.0.1 / 10.9.0.2, inside the guest only
#   full  cxl + rdma
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "run-guest: $*" >&2; exit 125; }

topology=""
timeout_s=300
boot_timeout_s=${TM_QEMU_BOOT_TIMEOUT:-90}
stall_first_boot=0
smp=2
kname=k61
cxl_mode=""
cache=${TM_QEMU_CACHE:-$PWD/qemu-cache}
files=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --topology) topology=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --boot-timeout) boot_timeout_s=$2; shift 2 ;;
    --stall-first-boot) stall_first_boot=1; shift ;;
    --cache) cache=$2; shift 2 ;;
    --smp) smp=$2; shift 2 ;;
    --kernel) kname=$2; shift 2 ;;
    --cxl-mode) cxl_mode=$2; shift 2 ;;
    --file) files+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) die "unknown argument '$1' (the guest command goes after --)" ;;
  esac
done
[[ $# -gt 0 ]] || die "usage: $0 --topology numa|cxl|rdma|full [--timeout S] [--file F]... -- CMD..."
case $topology in numa|cxl|rdma|full) ;; *) die "--topology must be numa, cxl, rdma or full" ;; esac
[[ $timeout_s =~ ^[0-9]+$ ]] || die "--timeout takes whole seconds"
[[ $boot_timeout_s =~ ^[1-9][0-9]*$ ]] || die "--boot-timeout (or TM_QEMU_BOOT_TIMEOUT) takes whole seconds, at least 1"
[[ $smp =~ ^[1-8]$ ]] || die "--smp takes 1 to 8 virtual CPUs"
case $kname in k61|k612) ;; *) die "--kernel must be k61 or k612" ;; esac
[[ -n "$cxl_mode" ]] || { [[ $kname == k61 ]] && cxl_mode=pmem || cxl_mode=ram; }
case $cxl_mode in pmem|ram) ;; *) die "--cxl-mode must be pmem or ram" ;; esac
[[ $kname != k61 || $cxl_mode != ram ]] || die "--cxl-mode ram needs CXL RAM regions (DEV_DAX_CXL): --kernel k612"
# shellcheck source=qemu-version.sh
. "$here/qemu-version.sh"
qemu_version=$(tm_qemu_version_ok 2>&1) || die "FAILED: $qemu_version"
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

start_s=$(date +%s)
kver=$("$here/fetch-kernel.sh" "$cache" "$kname") || die "could not fetch the guest kernel $kname"
kernel="$cache/kernel-$kname/boot/vmlinuz-$kver"

# One initramfs per set of files, so tests with different binaries do not rebuild each other's.
abs_files=()
for f in "${files[@]}"; do
  [[ -f "$f" ]] || die "--file $f: no such file"
  abs_files+=("$(realpath "$f")")
done
key=$(printf '%s\n' "${abs_files[@]}" | sha256sum | cut -c1-16)
initrd="$cache/initrd-$kname-$key.img"
"$here/build-initramfs.sh" --cache "$cache" --kernel "$kname" --out "$initrd" -- "${abs_files[@]}" ||
  die "could not build the initramfs"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tiermem-qemu.XXXXXX")
# shellcheck disable=SC2317  # called through the trap
cleanup() {
  if [[ -s $tmp/qemu.pid ]]; then kill "$(cat "$tmp/qemu.pid")" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# HMAT figures of the numa topology: one source for QEMU's command line and the guest's checks.
hmat_lat0=90 hmat_bw0=20480 hmat_lat1=250 hmat_bw1=10240  # ns, MiB/s

# The per-run archive: /init, the topology's environment and the command (quoted for sh).
mkdir -p "$tmp/run/tiermem"
cp "$here/guest-init.sh" "$tmp/run/init"
chmod +x "$tmp/run/init"
{
  echo "export QEMU_TOPOLOGY=$topology QEMU_KERNEL=$kname QEMU_KERNEL_RELEASE=$kver"
  if [[ $topology == numa ]]; then
    echo "export QEMU_HMAT_NODE0_LATENCY_NS=$hmat_lat0 QEMU_HMAT_NODE0_BANDWIDTH_MIBS=$hmat_bw0"
    echo "export QEMU_HMAT_NODE1_LATENCY_NS=$hmat_lat1 QEMU_HMAT_NODE1_BANDWIDTH_MIBS=$hmat_bw1"
  fi
  if [[ $topology == rdma || $topology == full ]]; then
    echo "export QEMU_RDMA_DEVICES='rxe0 rxe1' QEMU_RDMA_ADDRS='10.9.0.1 10.9.0.2'"
  fi
  if [[ $topology == cxl || $topology == full ]]; then
    echo "export QEMU_CXL_NODE=1 QEMU_CXL_MODE=$cxl_mode"
  fi
} > "$tmp/run/tiermem/env"
{
  printf 'exec'
  printf ' %q' "$@"
  printf '\n'
} > "$tmp/run/tiermem/cmd"
(cd "$tmp/run" && find . -mindepth 1 | cpio -o -H newc --quiet) > "$tmp/run.cpio"
cat "$initrd" "$tmp/run.cpio" > "$tmp/initrd.img"

qemu=(qemu-system-x86_64 -display none -monitor none -serial stdio -no-reboot
      -kernel "$kernel" -initrd "$tmp/initrd.img"
      -append "console=ttyS0 quiet panic=-1 mitigations=off")
case $topology in
  numa)
    # shellcheck disable=SC2054  # the commas belong to QEMU's option syntax
    qemu+=(-machine q35,hmat=on -m 2G -smp 2,sockets=2,maxcpus=2
           -object memory-backend-ram,size=1G,id=m0 -object memory-backend-ram,size=1G,id=m1
           -numa node,nodeid=0,memdev=m0 -numa node,nodeid=1,memdev=m1,initiator=0
           -numa cpu,node-id=0,socket-id=0 -numa cpu,node-id=0,socket-id=1
           -numa "hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-latency,latency=$hmat_lat0"
           -numa "hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=access-bandwidth,bandwidth=${hmat_bw0}M"
           -numa "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-latency,latency=$hmat_lat1"
           -numa "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=access-bandwidth,bandwidth=${hmat_bw1}M")
    ;;
  cxl|full)
    truncate -s 512M "$tmp/cxl.raw"
    if [[ $cxl_mode == pmem ]]; then
      # Persistent memory: a memdev plus a label storage area.
      truncate -s 256M "$tmp/lsa.raw"
      cxl_objects=(-object "memory-backend-file,id=cxl-lsa1,share=on,mem-path=$tmp/lsa.raw,size=256M")
      cxl_type3=cxl-type3,bus=root_port13,persistent-memdev=cxl-mem1,lsa=cxl-lsa1,id=cxl-pmem0
    else
      cxl_objects=()
      cxl_type3=cxl-type3,bus=root_port13,volatile-memdev=cxl-mem1,id=cxl-vmem0
    fi
    # The CPU without the hypervisor flag: committing a CXL region makes the kernel write back and
    # invalidate the CPU caches for it, and x86 kernels refuse that in a guest (6.12: "Failed to
    # synchronize CPU cache state", commit fails with ENXIO). TCG has no caches to keep coherent.
    # shellcheck disable=SC2054
    qemu+=(-machine q35,cxl=on -cpu qemu64,hypervisor=off -m 2G,maxmem=8G,slots=4 -smp "$smp"
           -object "memory-backend-file,id=cxl-mem1,share=on,mem-path=$tmp/cxl.raw,size=512M"
           "${cxl_objects[@]}"
           -device pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1
           -device cxl-rp,port=0,bus=cxl.1,id=root_port13,chassis=0,slot=2
           -device "$cxl_type3"
           -M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G)
    ;;
  rdma)
    qemu+=(-machine q35 -m 2G -smp "$smp")
    ;;
esac

# Boot. Guest lines between the markers are the command's output (stdout); the rest (boot, setup)
# goes to stderr. Everything is also kept in $tmp/console.log to diagnose failures.
#
# A boot that stalls before /init runs is booted once more. Under TCG on a busy host a guest kernel
# occasionally stops early in its boot and prints nothing more (seen in a CI run: qemu.numa.tier.k612
# printed no console line in 300 s, where that test takes 14-31 s in all). guest-init.sh prints
# $init_marker first thing; a watcher stops QEMU when the marker has not come within
# $boot_timeout_s, and the run starts over with what is left of --timeout (the second boot is
# not watched: a slow boot then only costs time).
begin='===TIERMEM-GUEST-BEGIN==='
init_marker='===TIERMEM-GUEST-INIT==='
end_re='===TIERMEM-GUEST-END rc=([0-9]+)==='
cxl_desc=""
[[ $topology != cxl && $topology != full ]] || cxl_desc=", cxl $cxl_mode"

# Stops the QEMU of this attempt (pid in $tmp/qemu.pid) unless the console has shown the init
# marker $1 seconds from now; leaves $tmp/boot-stalled behind when it does.
watch_boot() {
  sleep "$1"
  grep -qF "$init_marker" "$tmp/console.log" 2>/dev/null && return 0
  : > "$tmp/boot-stalled"
  [[ -s $tmp/qemu.pid ]] && kill "$(cat "$tmp/qemu.pid")" 2>/dev/null
  return 0
}

# boot_once LIMIT_S WATCH_S QEMU_COMMAND...: one boot, limited to LIMIT_S seconds and stopped after
# WATCH_S seconds without the init marker (0: not watched). Sets guest_rc (empty without an end
# marker) and qemu_rc.
boot_once() {
  local limit_s=$1 watch_s=$2 in_cmd=0 blank=0 line prefix watcher=""
  shift 2
  guest_rc=""
  rm -f "$tmp/boot-stalled" "$tmp/qemu.pid" "$tmp/qemu.rc"
  : > "$tmp/console.log"
  if ((watch_s > 0 && watch_s < limit_s)); then
    watch_boot "$watch_s" < /dev/null > /dev/null 2>&1 &
    watcher=$!
  fi
  while IFS= read -r line || [[ -n "$line" ]]; do
    line=${line%$'\r'}
    printf '%s\n' "$line" >> "$tmp/console.log"
    [[ $line != "$init_marker" ]] || continue
    if [[ $in_cmd == 0 && $line == *"$begin"* ]]; then
      in_cmd=1
      continue
    fi
    if [[ $line =~ $end_re ]]; then
      guest_rc=${BASH_REMATCH[1]}
      prefix=${line%%===TIERMEM-GUEST-END*}
      [[ -z "$prefix" ]] || { ((blank)) && echo; printf '%s\n' "$prefix"; }
      blank=0
      in_cmd=2
      continue
    fi
    if [[ $in_cmd == 1 ]]; then
      ((blank)) && echo
      blank=0
      if [[ -z "$line" ]]; then blank=1; else printf '%s\n' "$line"; fi
    else
      printf '%s\n' "$line" >&2
    fi
  done < <(rc=0; timeout -k 10 "$limit_s" "$@" -pidfile "$tmp/qemu.pid" < /dev/null 2>&1 || rc=$?
           echo "$rc" > "$tmp/qemu.rc")
  wait "$!" 2>/dev/null || true  # the process substitution writes qemu.rc after closing its output
  if [[ -n $watcher ]]; then
    pkill -P "$watcher" 2>/dev/null || true  # its sleep
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
  fi
  qemu_rc=$(cat "$tmp/qemu.rc" 2>/dev/null || echo "?")
}

boot_s=$(date +%s)
echo "run-guest: booting topology '$topology' on kernel $kver ($kname$cxl_desc, QEMU $qemu_version) (initramfs ready after $((boot_s - start_s)) s)" >&2
first=("${qemu[@]}")
# --stall-first-boot (the watcher's self-test): the first boot starts with its CPUs stopped.
((stall_first_boot)) && first+=(-S)
boot_once "$timeout_s" "$boot_timeout_s" "${first[@]}"
if [[ -e $tmp/boot-stalled ]]; then
  left_s=$((timeout_s - ($(date +%s) - boot_s)))
  if ((left_s < 10)); then
    echo "run-guest: FAILED: boot stalled: the guest kernel did not reach /init within $boot_timeout_s s, and $left_s s of --timeout are left" >&2
    exit 125
  fi
  echo "run-guest: the guest kernel did not reach /init within $boot_timeout_s s (console: $(wc -l < "$tmp/console.log") lines); booting again with the $left_s s left of --timeout" >&2
  boot_once "$left_s" 0 "${qemu[@]}"
fi
elapsed=$(( $(date +%s) - boot_s ))

if [[ $qemu_rc == 124 || $qemu_rc == 137 ]]; then
  echo "run-guest: FAILED: timeout: topology '$topology' did not finish within $timeout_s s" >&2
  exit 124
fi
if grep -q 'Kernel panic' "$tmp/console.log"; then
  echo "run-guest: FAILED: guest kernel panic: $(grep -m1 'Kernel panic' "$tmp/console.log")" >&2
  exit 125
fi
if setup_err=$(grep -m1 '^TIERMEM-GUEST-SETUP-FAILED' "$tmp/console.log"); then
  echo "run-guest: FAILED: topology '$topology' setup: ${setup_err#*: }" >&2
  exit 125
fi
if [[ -z "$guest_rc" ]]; then
  echo "run-guest: FAILED: no end marker from the guest (qemu exit status $qemu_rc); console log above" >&2
  exit 125
fi
if [[ $qemu_rc != 0 ]]; then
  echo "run-guest: warning: qemu exited with status $qemu_rc after the end marker" >&2
fi
echo "run-guest: topology '$topology': guest command exit status $guest_rc, boot+run $elapsed s" >&2
exit "$guest_rc"
