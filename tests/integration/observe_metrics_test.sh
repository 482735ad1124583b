#!/usr/bin/env bash
# serve-metrics on loopback: /metrics is Prometheus text exposition of every live tiermem process
# (checked by prom_check.py: HELP and TYPE for every metric, tiermem_..._bytes, ..._total,
# histograms), other paths get 404, other methods 405.
#   observe_metrics_test.sh TIERMEMCTL PRELOAD_LIB MEMD TARGET
set -euo pipefail
. "$(dirname "$0")/observe_lib.sh"
observe_setup "$@"
check=$(dirname "$0")/prom_check.py

start_memd
start_target 48 16M metrics
"$ctl" stat "$target_pid" --prometheus > "$work/stat.prom" || fail "stat --prometheus failed"
"$check" --expect-pid "$target_pid" < "$work/stat.prom" || fail "stat --prometheus is not valid exposition"

"$ctl" serve-metrics --listen 127.0.0.1:0 --port-file "$work/serve.port" --timeout-ms 300 > "$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 1200); do [ -s "$work/serve.port" ] && break; sleep 0.05; done
[ -s "$work/serve.port" ] || fail "serve-metrics did not start"
port=$(cat "$work/serve.port")
grep -q "serving /metrics on http://127.0.0.1:$port/metrics" "$work/serve.log" || fail "serve-metrics: $(cat "$work/serve.log")"

python3 - "$port" "$work" <<'PY' || fail "HTTP"
import sys, urllib.request, urllib.error
port, work = sys.argv[1], sys.argv[2]
base = "http://127.0.0.1:%s" % port
with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
    assert r.status == 200, r.status
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers["Content-Type"]
    open(work + "/scrape.prom", "wb").write(r.read())
# One request at a time, each bounded: a client that sends nothing is dropped after
# --timeout-ms and the next one is served; a request head beyond 8 KiB gets 431.
import socket
idle = socket.create_connection(("127.0.0.1", int(port)))
with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
    assert r.status == 200
idle.close()
big = socket.create_connection(("127.0.0.1", int(port)))
big.sendall(b"GET /metrics HTTP/1.1\r\nX-Filler: " + b"a" * 9000 + b"\r\n\r\n")
assert big.recv(64).startswith(b"HTTP/1.1 431"), "no 431 for a long head"
big.close()
for path, method, want in (("/", "GET", 404), ("/metrics/x", "GET", 404), ("/metrics", "POST", 405)):
    try:
        urllib.request.urlopen(urllib.request.Request(base + path, method=method, data=b"" if method == "POST" else None), timeout=30)
        raise SystemExit("%s %s succeeded" % (method, path))
    except urllib.error.HTTPError as e:
        assert e.code == want, (method, path, e.code)
PY
"$check" --expect-pid "$target_pid" --require tiermem_tier_allocated_bytes tiermem_remote_faults_total \
  tiermem_pages_moved_total tiermem_remote_fault_duration_seconds tiermem_server_up tiermem_exporter_processes \
  < "$work/scrape.prom" || fail "/metrics is not valid exposition"
grep -q "^tiermem_server_up{pid=\"$target_pid\",server=\"tcp://127.0.0.1:$memd_port\"} 1" "$work/scrape.prom" ||
  fail "no tiermem_server_up for the memd"
finish_target metrics
echo "OK: /metrics parses as Prometheus text exposition"
