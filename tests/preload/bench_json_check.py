#!/usr/bin/env python3
"""Checks the JSON of `tiermem-bench preload-hotset` and `tiermem-bench memcached` (tests/preload).

  bench_json_check.py hotset FILE
  bench_json_check.py memcached FILE [RSS_SLACK_BYTES]

hotset: the documented shape (dram_limit_bytes, baseline_rss_bytes, ideal_faults_per_update,
setups [{name, updates_per_s, peak_rss_bytes, faults_per_update [2],
faults_per_update_second_half [2]}]), plain and tiermem run,
kernel_swap either ran, or says why it was skipped, or reports that the kernel's OOM killer ended
it, and every program that ran to its end verified its array.

memcached: the tiermem setup ran, every get was answered with its key's value (none missing, none
wrong); with RSS_SLACK_BYTES also that memcached's peak RSS stayed within the DRAM limit plus its
own overhead: its RSS when it listened with nothing stored (the preload library and tiermem's
runtime included) plus RSS_SLACK_BYTES. Prints one line per failed check and exits 1, else prints PASS.
"""
import json
import sys

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_hotset(j):
    for key in ("dram_limit_bytes", "baseline_rss_bytes", "ideal_faults_per_update"):
        check(number(j.get(key)) and j[key] > 0, f"{key} is not a positive number: {j.get(key)!r}")
    check(0 < j.get("ideal_faults_per_update", 0) < 1, "ideal_faults_per_update outside (0, 1)")
    setups = j.get("setups", [])
    names = [s.get("name") for s in setups]
    check(names == ["plain", "tiermem", "kernel_swap"], f"setups are {names}")
    for s in setups:
        name = s.get("name")
        if name == "kernel_swap" and "skipped" in s:
            check(isinstance(s["skipped"], str) and s["skipped"], "kernel_swap skipped without a reason")
            print(f"kernel_swap skipped here: {s['skipped']}")
            continue
        if name == "kernel_swap" and s.get("oom_kills", 0) > 0 and "error" in s:
            # The kernel's memcg OOM killer may end the program under a budget of a few MiB on a
            # loaded machine: the kernel's result, reported, not a failure of the benchmark.
            print(f"kernel_swap ended by the OOM killer here: {s['error']}")
            continue
        if not check("error" not in s and "skipped" not in s, f"{name}: {s.get('error') or s.get('skipped')}"):
            continue
        check(number(s.get("updates_per_s")) and s["updates_per_s"] > 0, f"{name}: updates_per_s")
        check(number(s.get("peak_rss_bytes")) and s["peak_rss_bytes"] > 0, f"{name}: peak_rss_bytes")
        fpu = s.get("faults_per_update")
        check(isinstance(fpu, list) and len(fpu) == 2 and all(number(v) and v >= 0 for v in fpu),
              f"{name}: faults_per_update is {fpu!r}, not [phase1, phase2]")
        half = s.get("faults_per_update_second_half")
        check(isinstance(half, list) and len(half) == 2 and all(number(v) and v >= 0 for v in half),
              f"{name}: faults_per_update_second_half is {half!r}, not [phase1, phase2]")
        check(s.get("verified") is True, f"{name}: the program did not verify its array")
        check(all(u > 0 for u in s.get("updates", [0, 0])), f"{name}: a phase made no updates")
    check(j.get("data_ok") is True, "data_ok is not true")


def check_memcached(j, slack):
    setups = {s.get("name"): s for s in j.get("setups", [])}
    s = setups.get("tiermem")
    if not check(s is not None and "error" not in s and "skipped" not in s,
                 f"tiermem setup did not run: {s}"):
        return
    check(s["gets"] > 0 and s["values_checked"] == s["gets"], f"values checked {s['values_checked']} of {s['gets']} gets")
    check(s["misses"] == 0 and s["wrong_values"] == 0, f"misses {s['misses']}, wrong values {s['wrong_values']}")
    check(s["sets"] == j["keys"], f"{s['sets']} of {j['keys']} keys stored")
    mib = 1 << 20
    print(f"memcached peak RSS {s['peak_rss_bytes'] / mib:.1f} MiB, RSS at start {s['start_rss_bytes'] / mib:.1f} MiB, "
          f"DRAM limit {j['dram_limit_bytes'] / mib:.1f} MiB, data {j['data_bytes'] / mib:.1f} MiB")
    if slack is not None:
        bound = j["dram_limit_bytes"] + s["start_rss_bytes"] + slack
        print(f"bound: DRAM limit + RSS at start + {slack / mib:.1f} MiB = {bound / mib:.1f} MiB")
        check(s["peak_rss_bytes"] <= bound, "memcached's peak RSS is over the DRAM limit plus its own overhead")
    check(j.get("data_ok") is True, "data_ok is not true")


def main():
    mode, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        j = json.load(f)
    if mode == "hotset":
        check_hotset(j)
    else:
        check_memcached(j, int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else None)
    for what in failures:
        print("FAIL:", what)
    if not failures:
        print("PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
