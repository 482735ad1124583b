#!/usr/bin/env python3
"""Sums the policy thread's round lines (TIERMEM_LOG=debug) by step.

Each round logs one line ending in
  ms=T (settle S collect C scan N relief R plan P moves M arm A)
where T is the round from its scan on, S the wait for the last round's background evictions
before it (TIERMEM_EVICT_BACKGROUND), and the others its steps (relief runs inside the scan
too, so scan includes what relief did there). Prints, per log file, the rounds, the pages
demoted, the time in each step in total, the moves' time per page demoted, the plan's time per
round, the pages the policy kept heat for (known=; median and most), and the rounds' p50/p99
(settle included), as one JSON line each.

  TIERMEM_LOG=debug build/bench/tiermem-bench kv --size 16G --setups tiered --json 2> kv.log
  scripts/round-breakdown.py kv.log
"""
import json
import re
import sys

STEPS = ["settle", "collect", "scan", "relief", "plan", "moves", "arm"]
LINE = re.compile(r"demoted=(\d+) .*known=(\d+) ms=([\d.]+) \(" + " ".join(s + r" ([\d.]+)" for s in STEPS) + r"\)")


def summarize(path):
    rounds = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m:
                rounds.append([float(x) for x in m.groups()])
    if not rounds:
        return {"file": path, "rounds": 0}
    demoted = sum(r[0] for r in rounds)
    known = sorted(r[1] for r in rounds)
    steps = {s: round(sum(r[3 + i] for r in rounds), 1) for i, s in enumerate(STEPS)}
    whole = sorted(r[2] + r[3] for r in rounds)
    return {
        "file": path,
        "rounds": len(rounds),
        "demoted": int(demoted),
        "round_ms_total": round(sum(whole), 1),
        "step_ms_total": steps,
        "moves_us_per_demoted": round(1000 * steps["moves"] / demoted, 2) if demoted else None,
        "plan_ms_per_round": round(steps["plan"] / len(rounds), 3),
        "known_pages_p50": int(known[len(known) // 2]),
        "known_pages_max": int(known[-1]),
        "round_p50_ms": whole[len(whole) // 2],
        "round_p99_ms": whole[min(len(whole) - 1, int(len(whole) * 0.99))],
    }


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    for path in sys.argv[1:]:
        print(json.dumps(summarize(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
