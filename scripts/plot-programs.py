#!/usr/bin/env python3
"""Draws `tiermem-bench programs --json` with gnuplot: one panel per program, its slowdown
(plain's speed over the run's: 1 = as fast as plain) against the DRAM limit as a share of its
plain peak RSS, for tiermem and for the kernel's swap. A run that did not finish (the cgroup's OOM
killer, a timeout) is drawn as a cross on the panel's top edge, and one whose peak RSS went over
its limit (limit_kept false) as an open circle; the dashed line is 1/0.9, the slowdown that
dram_share_at_0_9 keeps under.

  scripts/plot-programs.py RESULT.json -o OUT.png|OUT.svg
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

SETUPS = [("tiermem", "tiermem", 2), ("kernel_swap", "kernel swap", 7)]


def panel(program, data_dir, index):
    """The gnuplot lines of one program's panel; writes its data files into data_dir."""
    runs = [r for r in program.get("runs", []) if r["setup"] != "plain"]
    finished = [1 / r["relative_speed"] for r in runs if r.get("relative_speed")]
    top = max([4.0] + [2 ** math.ceil(math.log2(s * 1.2)) for s in finished])
    plots = []
    for setup, title, colour in SETUPS:
        pts = sorted((r["dram_share"], 1 / r["relative_speed"]) for r in runs
                     if r["setup"] == setup and r.get("relative_speed"))
        failed = sorted(r["dram_share"] for r in runs if r["setup"] == setup and not r.get("relative_speed"))
        ok_file = os.path.join(data_dir, f"p{index}-{setup}.dat")
        with open(ok_file, "w") as f:
            f.writelines(f"{x} {y}\n" for x, y in pts)
        if pts:
            plots.append(f"'{ok_file}' using 1:2 with linespoints lc {colour} pt 7 title '{title}'")
        over = sorted((r["dram_share"], 1 / r["relative_speed"]) for r in runs
                      if r["setup"] == setup and r.get("relative_speed") and r.get("limit_kept") is False)
        if over:
            over_file = os.path.join(data_dir, f"p{index}-{setup}-over.dat")
            with open(over_file, "w") as f:
                f.writelines(f"{x} {y}\n" for x, y in over)
            plots.append(f"'{over_file}' using 1:2 with points lc {colour} pt 6 ps 2.5 "
                         f"title '{title}: over its limit'")
        if failed:
            fail_file = os.path.join(data_dir, f"p{index}-{setup}-failed.dat")
            with open(fail_file, "w") as f:
                f.writelines(f"{x} {top}\n" for x in failed)
            plots.append(f"'{fail_file}' using 1:2 with points lc {colour} pt 2 ps 2 "
                         f"title '{title}: did not finish'")
    peak = (program.get("peak_rss_bytes") or 0) / 2 ** 20
    lines = [f"set title '{program['name']} (plain peak RSS {peak:.0f} MiB)'",
             f"set yrange [0.9:{top * 1.05}]"]
    plots.append(f"{1 / 0.9} with lines dt 2 lc rgb 'gray' title '0.9x plain'")
    lines.append("plot " + ", ".join(plots))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result", help="tiermem-bench programs --json output")
    ap.add_argument("-o", "--output", required=True, help="the plot (.png or .svg)")
    args = ap.parse_args()
    with open(args.result) as f:
        result = json.load(f)
    programs = [p for p in result.get("programs", []) if p.get("runs")]
    if not programs:
        sys.exit(f"plot-programs: {args.result} has no program with runs")
    cols = 3 if len(programs) > 4 else min(2, len(programs))
    rows = math.ceil(len(programs) / cols)
    svg = args.output.endswith(".svg")
    size = f"{cols * 460},{rows * 360}"
    term = f"svg size {size} dynamic" if svg else f"pngcairo size {size}"
    with tempfile.TemporaryDirectory() as tmp:
        script = [f"set terminal {term}", f"set output '{args.output}'",
                  f"set multiplot layout {rows},{cols} title 'tiermem-bench programs: slowdown against "
                  "the DRAM limit (share of the plain peak RSS)'",
                  "set logscale x 2", "set logscale y 2", "set xrange [0.04:1.1]", "set grid",
                  "set xlabel 'DRAM share of peak RSS'", "set ylabel 'slowdown (plain = 1)'",
                  "set key top right font ',9'"]
        for i, p in enumerate(programs):
            script += panel(p, tmp, i)
        script.append("unset multiplot")
        out = subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True, capture_output=True)
        if out.returncode != 0:
            sys.exit(f"plot-programs: gnuplot failed: {out.stderr.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
