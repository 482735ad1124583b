#!/usr/bin/env python3
"""programs_check.py TIERMEM_BENCH PROGRAM
Runs `tiermem-bench programs --quick` for one program, plain and under the preload library at
50% of its plain peak RSS, and checks that both ran and that each result is right (the program's
own check passed and tiermem's output equals plain's): the result, not the speed, so the run may
take up to 240 s. Exit 77 (ctest: skipped) where the program
is not installed."""
import json
import subprocess
import sys

bench, name = sys.argv[1], sys.argv[2]
cmd = [bench, "programs", "--quick", "--programs", name, "--setups", "tiermem", "--shares", "0.5",
       "--bisect", "0", "--min-timeout", "240", "--json"]
out = subprocess.run(cmd, capture_output=True, text=True)
print(" ".join(cmd[1:]) + f": exit {out.returncode}")
sys.stderr.write(out.stderr[-4000:])
if out.returncode == 77:
    print("SKIP: " + out.stdout.strip()[:400])
    sys.exit(77)
try:
    report = json.loads(out.stdout)
except json.JSONDecodeError:
    sys.exit("FAIL: no JSON: " + out.stdout[-2000:])
(program,) = [p for p in report["programs"] if p["name"] == name]
if program.get("skipped"):
    print("SKIP: " + program["skipped"])
    sys.exit(77)
runs = {(r["setup"], r["dram_share"]): r for r in program["runs"]}
for key in (("plain", 1.0), ("tiermem", 0.5)):
    run = runs.get(key)
    if run is None:
        sys.exit(f"FAIL: no {key[0]} run at share {key[1]}: {json.dumps(program)[:2000]}")
    print(json.dumps(run))
    if not run["result_ok"] or run["error"] is not None:
        sys.exit(f"FAIL: {key[0]}: result not right: {run.get('error')} {run.get('check_failed', '')}")
tm = runs[("tiermem", 0.5)]
if tm["dram_limit_bytes"] != int(program["peak_rss_bytes"] * 0.5) // 4096 * 4096:
    sys.exit(f"FAIL: the limit {tm['dram_limit_bytes']} is not half of the plain peak {program['peak_rss_bytes']}")
if out.returncode != 0:
    sys.exit(f"FAIL: tiermem-bench exited {out.returncode}")
print(f"ok: {name} under tiermem at 50% of {program['peak_rss_bytes']} bytes: speed {tm['relative_speed']:.3f}x "
      f"plain, peak RSS {tm['peak_rss_bytes']}, faults/op {tm['faults_per_op']:.4f}")
