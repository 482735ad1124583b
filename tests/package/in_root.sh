#!/bin/bash
# Runs inside the package test's Debian 12 root (package_test.sh): installs the packages and
# checks what a user of them does first.
set -euo pipefail
fail() { echo "FAIL (in the root): $*"; exit 1; }
cd /tmp/tiermem-test
dpkg -i tiermem_*.deb tiermem-dev_*.deb > dpkg.log 2>&1 || { cat dpkg.log; fail "dpkg -i"; }
[ -s /etc/tiermem/token ] || fail "no token was made at install"
[ "$(stat -c %a /etc/tiermem/token)" = 600 ] || fail "the token is readable by others"

# tiermem run with a memd of its own: python3's heap beyond 16M goes to it and comes back right.
tiermem run --local-memd 256M --dram-limit 16M -- python3 -c '
blocks = [bytes([i % 251]) * 4096 for i in range(30000)]
assert all(b[0] == i % 251 and b[-1] == i % 251 for i, b in enumerate(blocks))
print("python3 ok")' > run.out 2> run.err || { cat run.err; fail "tiermem run"; }
grep -q "python3 ok" run.out || fail "python3 did not finish"
grep -Eq "tiermem run: pid [0-9]+ \(python3\).* [1-9][0-9]* pages evicted" run.err ||
  { cat run.err; fail "the summary shows no page sent to the run's memd"; }
if pgrep -x tiermem-memd > /dev/null; then fail "the run's memd outlived it"; fi

# The API example against the installed package, both ways.
cmake -S consumer -B consumer-build > cmake.log 2>&1 || { cat cmake.log; fail "find_package(tiermem)"; }
cmake --build consumer-build > build.log 2>&1 || { cat build.log; fail "building the example"; }
consumer-build/consumer || fail "the example (CMake) failed"
# shellcheck disable=SC2046
g++ -std=c++20 consumer/main.cc -o pc-consumer $(pkg-config --cflags --libs tiermem) || fail "pkg-config build"
./pc-consumer || fail "the example (pkg-config) failed"

# tiermem-memd as its unit starts it: ExecStart with /etc/tiermem/memd.conf's settings.
exec_start=$(sed -n 's/^ExecStart=//p' /usr/lib/systemd/system/tiermem-memd.service)
set -a; . /etc/tiermem/memd.conf; set +a
eval "$exec_start" 2> memd.log &
memd=$!
for _ in $(seq 200); do
  TIERMEM_TOKEN=$(cat /etc/tiermem/token) tiermemctl memd "$MEMD_LISTEN" > memd.out 2>&1 && break
  sleep 0.05
done
grep -q "capacity" memd.out || { cat memd.out memd.log; fail "the unit's memd did not serve tiermemctl memd"; }
if tiermemctl memd "$MEMD_LISTEN" --token wrong > /dev/null 2>&1; then fail "memd took a wrong token"; fi
kill "$memd"; wait "$memd" || true
echo "in the root: all checks passed"
