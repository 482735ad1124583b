#!/usr/bin/env python3
"""Joins the host's `tiermem-bench compare --json` and, where there is one, the same run inside
the QEMU `full` guest (emulated DRAM, CXL, remote over RDMA on soft-RoCE, remote over TCP) into one
report: a table per run, each with its ratios to the DRAM of the same run (TCG timings are only
comparable within one guest), one JSON whose every row carries an `emulated` flag, and one plot
of both (p50 as a multiple of the run's own DRAM, per pattern).

  scripts/compare-report.py --host HOST.json [--emulated GUEST.json --emulated-info TEXT]
                            --json OUT.json [--plot OUT.png|OUT.svg]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

PATTERNS = ["chase", "rand64", "seq", "page4k"]


def load(path):
    with open(path) as f:
        return json.load(f)


def dram_p50(run):
    return {r["pattern"]: r["p50_ns"] for r in run["results"] if r["tier"] == "dram" and r["p50_ns"] > 0}


def rows_of(run, emulated):
    """The run's rows with the emulated flag and the p50 ratio to the same run's DRAM."""
    base = dram_p50(run)
    out = []
    for r in run["results"]:
        row = dict(r)
        row["emulated"] = emulated
        if r["pattern"] in base:
            row["p50_vs_dram"] = round(r["p50_ns"] / base[r["pattern"]], 2)
        out.append(row)
    return out


def label(row):
    name = row["tier"] + (f"/node{row['node']}" if row.get("node") is not None else "")
    return name + (" (emulated)" if row["emulated"] else "")


def print_table(title, rows, absent, notes):
    print(title)
    print(f"{'tier':<24} {'node':>5} {'pattern':<8} {'p50_ns':>12} {'p99_ns':>12} {'GB/s':>10} {'p50/dram':>9}")
    for r in rows:
        tier = r["tier"] + (" (emulated)" if r["emulated"] else "")
        node = "-" if r.get("node") is None else str(r["node"])
        ratio = f"x{r['p50_vs_dram']:.1f}" if "p50_vs_dram" in r else "-"
        print(f"{tier:<24} {node:>5} {r['pattern']:<8} {r['p50_ns']:12.1f} {r['p99_ns']:12.1f} {r['gb_s']:10.3f} {ratio:>9}")
    for a in absent:
        print(f"{a['tier']}: absent: {a['reason']}")
    for n in notes:
        print(f"{n['tier']}: note: {n['note']}")
    print()


def plot(rows, out):
    cols = []
    for r in rows:
        if r["tier"] != "dram" and label(r) not in cols:
            cols.append(label(r))
    with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as dat:
        dat.write("pattern " + " ".join(f'"{c}"' for c in cols) + "\n")
        for p in PATTERNS:
            vals = []
            for c in cols:
                v = [r.get("p50_vs_dram") for r in rows if label(r) == c and r["pattern"] == p]
                vals.append(str(v[0]) if v and v[0] is not None else "?")
            dat.write(p + " " + " ".join(vals) + "\n")
    term = "svg size 1100,560 dynamic" if out.endswith(".svg") else "pngcairo size 1100,560"
    script = (f"set terminal {term}; set output '{out}'; "
              "set title 'tiermem compare: p50 as a multiple of the same run''s DRAM (log scale); "
              "emulated: inside the QEMU full guest'; "
              "set style data histograms; set style histogram clustered gap 1; "
              "set style fill solid 0.8 border -1; set logscale y; set ylabel 'p50 / DRAM p50'; "
              "set key top left; set datafile missing '?'; set grid ytics; plot ")
    script += ", ".join(f"'{dat.name}' using {i + 2}{':xtic(1)' if i == 0 else ''} title columnheader"
                        for i in range(len(cols)))
    try:
        res = subprocess.run(["gnuplot", "-e", script], capture_output=True, text=True)
    except FileNotFoundError:
        return "gnuplot is not installed"
    finally:
        os.unlink(dat.name)
    return None if res.returncode == 0 else "gnuplot failed: " + res.stderr.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", required=True)
    ap.add_argument("--emulated")
    ap.add_argument("--emulated-info", default="")
    ap.add_argument("--emulated-absent", default="", help="why there are no emulated rows")
    ap.add_argument("--json", required=True)
    ap.add_argument("--plot")
    a = ap.parse_args()

    host = load(a.host)
    runs = [("host", host, False)]
    if a.emulated:
        runs.append(("emulated", load(a.emulated), True))
    merged = {"results": [], "absent": [], "notes": [], "method": {}}
    for name, run, emulated in runs:
        rows = rows_of(run, emulated)
        merged["results"] += rows
        merged["absent"] += [dict(x, emulated=emulated) for x in run.get("absent", [])]
        merged["notes"] += [dict(x, emulated=emulated) for x in run.get("notes", [])]
        merged["method"][name] = run.get("method", {})
        title = ("This machine" if not emulated else
                 f"Emulated, inside the QEMU full guest ({a.emulated_info}); ratios within this table only")
        print_table(title + ":", rows, run.get("absent", []), run.get("notes", []))
    if a.emulated and a.emulated_info:
        merged["method"]["emulated"]["guest"] = a.emulated_info
    if a.emulated_absent:
        merged["emulated_absent"] = a.emulated_absent
        print(f"emulated rows: none ({a.emulated_absent})")
    with open(a.json, "w") as f:
        json.dump(merged, f, indent=1, sort_keys=True)
        f.write("\n")
    if a.plot:
        err = plot(merged["results"], a.plot)
        if err:
            print(f"compare-report: no plot: {err}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
