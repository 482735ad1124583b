#!/bin/sh
# The guest's /init (busybox sh), put into the initramfs by run-guest.sh together with
# /tiermem/env (QEMU_TOPOLOGY and the figures QEMU was given) and /tiermem/cmd (the guest
# command). Sets the topology up, runs the command, prints its exit status in the end marker and
# powers off. Setup failures end with status 125 and a TIERMEM-GUEST-SETUP-FAILED line.
#
# Busybox runs its own applets before anything on PATH, so iproute2 is called as /usr/sbin/ip.

# First thing: tell run-guest.sh that the kernel reached /init (its boot-stall watcher waits for it).
echo "===TIERMEM-GUEST-INIT==="
export PATH=/tiermem/bin:/usr/sbin:/usr/bin:/usr/local/busybox
export LD_LIBRARY_PATH=/tiermem/lib
export HOME=/root
# Busybox finds its applets through /proc/self/exe: mount /proc first, by the applet's full name.
/usr/bin/busybox mount -t proc proc /proc
/usr/bin/busybox mkdir -p /usr/local/busybox
/usr/bin/busybox --install -s /usr/local/busybox
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /dev/shm
mount -t devpts devpts /dev/pts
# shellcheck source=/dev/null
. /tiermem/env

log() { echo "[guest-init] $*"; }

finish() {
  rc=$1
  echo
  echo "===TIERMEM-GUEST-END rc=$rc==="
  # Let the UART drain before the power goes.
  sleep 1
  poweroff -f
}

fail_setup() {
  # The console is quiet: the kernel's last words often say why.
  dmesg 2>/dev/null | tail -n 60
  echo "TIERMEM-GUEST-SETUP-FAILED: $*"
  finish 125
}

# Waits up to $2 seconds (default 20) for the path $1 to appear.
wait_for() {
  n=0
  while [ ! -e "$1" ]; do
    n=$((n + 1))
    [ "$n" -le "$((${2:-20} * 10))" ] || return 1
    sleep 0.1
  done
}

# The first device under $1 (a sysfs bus directory) whose name matches the glob $2, or nothing.
first_device() {
  for d in "$1"/$2; do
    [ -e "$d" ] && { basename "$d"; return 0; }
  done
  return 1
}

# Creates the CXL pmem region (cxl create-region -t pmem), retrying for a few seconds: the
# memdev's port may still be probing.
create_cxl_pmem_region() {
  # It may exit 0 having created nothing ("created 0 regions"): look for the region it prints.
  n=0
  until cxl create-region -m -t pmem -d decoder0.0 -w 1 mem0 >/tmp/cxl-region.log 2>&1 &&
      grep -q '"region":' /tmp/cxl-region.log; do
    n=$((n + 1))
    if [ "$n" -ge 10 ]; then
      cat /tmp/cxl-region.log
      cxl list -v -M -D -P 2>&1
      fail_setup "cxl create-region -t pmem failed"
    fi
    sleep 0.5
  done
}

# Creates a RAM region over the whole volatile capacity of mem0 through the kernel's sysfs ABI
# (Documentation/ABI/testing/sysfs-bus-cxl), the steps `cxl create-region -t ram` takes: Debian
# 12's cxl-cli (76.1) refuses that ("region type 'ram' not supported yet").
create_cxl_ram_region() {
  c=/sys/bus/cxl/devices
  w() { echo "$2" > "$1" 2>/tmp/cxl-sysfs.log || { cat /tmp/cxl-sysfs.log; fail_setup "cxl ram region: writing '$2' to $1 failed"; }; }
  ep=$(first_device $c 'endpoint*') || fail_setup "no CXL endpoint port for mem0"
  epd=""
  n=0
  until epd=$(cd "$c/$ep" && first_device . 'decoder*.0'); do
    n=$((n + 1))
    [ "$n" -lt 50 ] || fail_setup "no endpoint decoder under $ep"
    sleep 0.1
  done
  size=$(cat $c/mem0/ram/size)
  [ "$((size))" -gt 0 ] || fail_setup "mem0 has no volatile capacity (ram/size $size)"
  region=$(cat $c/decoder0.0/create_ram_region)
  w $c/decoder0.0/create_ram_region "$region"
  wait_for "$c/$region" 5 || fail_setup "no $region after create_ram_region"
  w "$c/$region/interleave_granularity" "$(cat $c/decoder0.0/interleave_granularity)"
  w "$c/$region/interleave_ways" 1
  w "$c/$region/size" "$size"
  w "$c/$epd/mode" ram
  w "$c/$epd/dpa_size" "$size"
  w "$c/$region/target0" "$epd"
  w "$c/$region/commit" 1
  w /sys/bus/cxl/drivers/cxl_region/bind "$region"
  log "cxl: $region (ram, $((size >> 20)) MiB) committed over $epd"
}

# QEMU_CXL_MODE=pmem: persistent cxl-type3 -> pmem region -> nvdimm region -> devdax namespace ->
# system-ram. QEMU_CXL_MODE=ram: volatile cxl-type3 -> RAM region -> dax device (dax_cxl, the
# kernel binds it to kmem itself) -> its memory blocks onlined as movable. Either way the blocks
# are added offline (auto_online_blocks) so that they come online as ZONE_MOVABLE.
setup_cxl() {
  mods="cxl_acpi cxl_pci cxl_port cxl_mem device_dax kmem"
  if [ "$QEMU_CXL_MODE" = ram ]; then mods="$mods dax_cxl"; else mods="$mods cxl_pmem libnvdimm nd_pmem dax_pmem"; fi
  for m in $mods; do
    modprobe "$m" || log "modprobe $m failed"
  done
  wait_for /sys/bus/cxl/devices/mem0 || fail_setup "no CXL memdev mem0 appeared"
  wait_for /sys/bus/cxl/devices/decoder0.0 || fail_setup "no CXL root decoder0.0 appeared"
  echo offline > /sys/devices/system/memory/auto_online_blocks
  if [ "$QEMU_CXL_MODE" = ram ]; then
    create_cxl_ram_region
    n=0
    until dax=$(first_device /sys/bus/dax/devices 'dax*.*'); do
      n=$((n + 1))
      [ "$n" -lt 100 ] || fail_setup "no dax device for the CXL RAM region"
      sleep 0.1
    done
    if daxctl list -d "$dax" | grep -q '"mode":"system-ram"'; then
      daxctl online-memory --movable "$dax" >/tmp/daxctl.log 2>&1 ||
        { cat /tmp/daxctl.log; fail_setup "daxctl online-memory $dax failed"; }
    else
      daxctl reconfigure-device --mode=system-ram "$dax" >/tmp/daxctl.log 2>&1 ||
        { cat /tmp/daxctl.log; fail_setup "daxctl reconfigure-device $dax failed"; }
    fi
  else
    create_cxl_pmem_region
    wait_for /sys/bus/nd/devices/region0 || fail_setup "no nvdimm region0 for the CXL region"
    ndctl create-namespace -m devdax -r region0 >/tmp/ndctl.log 2>&1 ||
      { cat /tmp/ndctl.log; fail_setup "ndctl create-namespace failed"; }
    wait_for /sys/bus/dax/devices/dax0.0 || fail_setup "no dax0.0 after create-namespace"
    dax=dax0.0
    daxctl reconfigure-device --mode=system-ram dax0.0 >/tmp/daxctl.log 2>&1 ||
      { cat /tmp/daxctl.log; fail_setup "daxctl reconfigure-device failed"; }
  fi
  [ -e /sys/devices/system/node/node1 ] || fail_setup "the CXL memory did not become NUMA node 1"
  log "cxl ($QEMU_CXL_MODE): $dax online as system-ram on node 1 ($(grep MemTotal /sys/devices/system/node/node1/meminfo | awk '{print $4 " " $5}'))"
}

setup_rdma() {
  for m in crc32_generic rdma_rxe ib_uverbs rdma_ucm veth; do
    modprobe "$m" || fail_setup "modprobe $m failed"
  done
  /usr/sbin/ip link set lo up
  /usr/sbin/ip link add veth0 type veth peer name veth1 || fail_setup "ip link add veth failed"
  /usr/sbin/ip addr add 10.9.0.1/24 dev veth0
  /usr/sbin/ip addr add 10.9.0.2/24 dev veth1
  /usr/sbin/ip link set veth0 up
  /usr/sbin/ip link set veth1 up
  sysctl -qw net.ipv4.conf.all.accept_local=1
  rdma link add rxe0 type rxe netdev veth0 || fail_setup "rdma link add rxe0 failed"
  rdma link add rxe1 type rxe netdev veth1 || fail_setup "rdma link add rxe1 failed"
  for d in rxe0 rxe1; do
    n=0
    until grep -q ACTIVE "/sys/class/infiniband/$d/ports/1/state" 2>/dev/null; do
      n=$((n + 1))
      [ "$n" -lt 100 ] || fail_setup "$d port 1 did not become ACTIVE"
      sleep 0.1
    done
  done
  log "rdma: rxe0 on veth0 (10.9.0.1), rxe1 on veth1 (10.9.0.2), ports active"
}

setup_numa() {
  [ -e /sys/devices/system/node/node1 ] || fail_setup "no NUMA node 1"
  log "numa: node 1 memory-only, cpus '$(cat /sys/devices/system/node/node1/cpulist)'"
}

case "$QEMU_TOPOLOGY" in
  numa) setup_numa ;;
  cxl) setup_cxl ;;
  rdma) setup_rdma ;;
  full) setup_cxl; setup_rdma ;;
  *) fail_setup "unknown topology '$QEMU_TOPOLOGY'" ;;
esac

cd /tmp || fail_setup "no /tmp"
echo "===TIERMEM-GUEST-BEGIN==="
sh /tiermem/cmd
finish $?
