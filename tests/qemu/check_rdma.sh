#!/bin/sh
# Guest test for the `rdma` topology (and the RDMA half of `full`), inside the QEMU guest.
# Both rxe devices must be listed with an ACTIVE port; ib_read_lat -s 4096 runs from rxe1 to rxe0
# and its typical figure is printed as IB_READ_LAT_4096_US=<us> (also _P99_US) for later ratios.
# Then the API/tiermemctl test binary, if given, runs.
#
#   check_rdma.sh [TEST_BINARY [ARGS...]]
set -eu

fail() { echo "check_rdma: FAIL: $*"; exit 1; }

[ -n "${QEMU_RDMA_DEVICES:-}" ] || { echo "check_rdma: SKIP: not in a topology with rxe devices"; exit 77; }
rdma link
ibv_devices
for d in $QEMU_RDMA_DEVICES; do
  rdma link show "$d/1" | grep -q 'state ACTIVE' || fail "$d port 1 is not ACTIVE"
  ibv_devinfo -d "$d" | grep -q 'PORT_ACTIVE' || fail "ibv_devinfo: $d port not active"
done

# Server on rxe0 (10.9.0.1), client on rxe1; the server may take a moment to listen under TCG.
timeout 120 ib_read_lat -d rxe0 -s 4096 -n 1000 > /tmp/lat-server.log 2>&1 &
server=$!
ok=0
for _ in 1 2 3 4 5 6 7 8 9 10; do
  sleep 1
  if timeout 120 ib_read_lat -d rxe1 -s 4096 -n 1000 10.9.0.1 > /tmp/lat-client.log 2>&1; then
    ok=1
    break
  fi
  kill -0 "$server" 2>/dev/null || break
done
wait "$server" || true
cat /tmp/lat-client.log
[ "$ok" = 1 ] || { cat /tmp/lat-server.log; fail "ib_read_lat -s 4096 did not complete"; }
# Columns: #bytes #iterations t_min t_max t_typical t_avg t_stdev p99 p99.9
line=$(awk '$1 == 4096 && NF >= 8 { print; exit }' /tmp/lat-client.log)
[ -n "$line" ] || fail "no result line in ib_read_lat's output"
echo "$line" | awk '{ printf "IB_READ_LAT_4096_US=%s\nIB_READ_LAT_4096_P99_US=%s\n", $5, $8 }'

if [ $# -gt 0 ]; then
  "$@"
fi
echo "check_rdma: PASS"
