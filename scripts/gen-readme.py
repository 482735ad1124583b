#!/usr/bin/env python3
"""Rewrites README.md's generated sections, so that they cannot drift from their sources.

  <!-- options:begin --> ... <!-- options:end -->   from `tiermemctl options --markdown`
  <!-- results:begin --> ... <!-- results:end -->   from docs/results/*.json (and compare.txt)
  <!-- example:begin --> ... <!-- example:end -->   examples/pmr_on_tier.cc, between its
                                                    `// README:begin` and `// README:end` lines

Usage:
  scripts/gen-readme.py [--tiermemctl PATH] [--readme README.md] [--results docs/results]
  scripts/gen-readme.py --check ...   exit 1, with a one-line hint, when README.md is out of date

The results table shows the latest headline figure of each benchmark. A result file names its
command and date itself ("command", "date"), or docs/results/index.json does (file -> command,
date, commit: the commit that recorded the measurement, from `git log`). The notes on every
measurement are in docs/results/NOTES.md. Python 3 standard library only.
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_tiermemctl(given):
    if given:
        return given
    if os.environ.get("TIERMEMCTL"):
        return os.environ["TIERMEMCTL"]
    for build in sorted(d for d in os.listdir(ROOT) if d.startswith("build")):
        path = os.path.join(ROOT, build, "tools", "tiermemctl")
        if os.access(path, os.X_OK):
            return path
    sys.exit("gen-readme: no tiermemctl found under build*/tools/; build it or pass --tiermemctl")


def options_section(tiermemctl):
    out = subprocess.run([tiermemctl, "options", "--markdown"], check=True,
                         capture_output=True, text=True).stdout
    return out.rstrip("\n")


def example_section(path):
    with open(path) as f:
        text = f.read()
    m = re.search(r"^// README:begin\n(.*?)^\s*// README:end\n", text, re.S | re.M)
    if not m:
        sys.exit(f"gen-readme: {path} has no // README:begin ... // README:end lines")
    body = m.group(1).rstrip("\n")
    return "```cpp\n" + body + "\n  // ...\n}\n```"


# ---- results ---------------------------------------------------------------------------------

class Result:
    """One raw result file with its command and the date it was measured."""

    def __init__(self, name, data, meta):
        self.name = name
        self.data = data
        self.command = data.get("command") if isinstance(data, dict) else None
        self.command = self.command or meta.get("command", "?")
        self.date = (data.get("date") if isinstance(data, dict) else None) or meta.get("date", "?")
        self.commit = meta.get("commit", "")

    def when(self):
        day = self.date.split(" ")[0]
        return f"{day} ({self.commit})" if self.commit else day


def parse_compare_txt(text):
    """compare.txt is `tiermem-bench compare`'s text output; same fields as its --json."""
    results, absent = [], []
    row = re.compile(r"^(\S+)\s+(\S+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$")
    for line in text.splitlines():
        m = row.match(line)
        if m and m.group(1) != "tier":
            node = None if m.group(2) == "-" else int(m.group(2))
            results.append({"tier": m.group(1), "node": node, "pattern": m.group(3),
                            "p50_ns": float(m.group(4)), "p99_ns": float(m.group(5)),
                            "gb_s": float(m.group(6))})
        m = re.match(r"^(\S+): absent: (.*)$", line)
        if m:
            absent.append({"tier": m.group(1), "reason": m.group(2)})
    return {"results": results, "absent": absent}


def load_results(results_dir):
    index_path = os.path.join(results_dir, "index.json")
    index = {}
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
    out = []
    for name in sorted(os.listdir(results_dir)):
        path = os.path.join(results_dir, name)
        if name == "index.json":
            continue
        if name.endswith(".json"):
            with open(path) as f:
                data = json.load(f)
        elif name == "compare.txt":
            with open(path) as f:
                data = parse_compare_txt(f.read())
        else:
            continue
        out.append(Result(name, data, index.get(name, {})))
    return out


def latest(results, pattern, accept=lambda r: True):
    """The most recently measured file whose name matches; a JSON wins a tie with a text."""
    cands = [r for r in results if re.match(pattern, r.name) and accept(r)]
    if not cands:
        return None
    return max(cands, key=lambda r: (r.date, r.name.endswith(".json"), r.name))


def fmt_ns(ns):
    return f"{ns / 1000:.1f} us" if ns >= 10000 else f"{ns:.1f} ns"


def compare_rows(r):
    rows = []
    by_tier = {}
    for x in r.data.get("results", []):
        key = x["tier"] if x.get("node") is None else f"{x['tier']} node {x['node']}"
        by_tier.setdefault(key, {})[x["pattern"]] = x
    for tier, pats in by_tier.items():
        lat = " / ".join(fmt_ns(pats[p]["p50_ns"]) for p in ("chase", "rand64", "page4k") if p in pats)
        seq = f"; seq {pats['seq']['gb_s']:.2f} GB/s" if "seq" in pats else ""
        rows.append((f"compare, {tier}: p50 of chase / rand64 / page4k; seq bandwidth", lat + seq))
    absent = [a["tier"] for a in r.data.get("absent", [])]
    if absent:
        rows.append(("compare: tiers absent on the measuring machine",
                     ", ".join(absent) + f" (reasons in docs/results/{r.name})"))
    return rows


def remote_fault_rows(r):
    d = r.data
    ratio = d["fault_p50_us"] / d["raw_roundtrip_p50_us"]
    evict = 100.0 * d["evict_pages_per_s"] / d["raw_write_pages_per_s"]
    transport = "RDMA" if "rdma" in r.command else "TCP"
    return [(f"remote fault over {transport}: p50 against the bare 4 KiB round trip",
             f"{d['fault_p50_us']:.1f} us vs {d['raw_roundtrip_p50_us']:.1f} us ({ratio:.2f}x); "
             f"eviction at {evict:.1f}% of the bare write stream")]


def remote_replicas_rows(r):
    d = r.data
    return [(f"remote tier with {d['replicas']} replicas over {d['servers']} memds, one killed (SIGKILL) "
             f"after the eviction; {d.get('threads', 1)} threads faulting",
             f"{d['verified_pages']} of {d['pages']} pages verified; replicas restored in "
             f"{d['rereplication_s']:.1f} s; fault p50 {d['fault_p50_vs_one_replica']:.2f}x and eviction "
             f"rate {d['evict_rate_vs_one_replica']:.2f}x one replica's (same servers, same run)")]


def remote_code_rows(r):
    d = r.data
    rebuilt = (f"pieces rebuilt in {d['rereplication_s']:.1f} s" if d.get("rebuilt")
               else "no spare server, pages read from the pieces left")
    return [(f"remote tier erasure-coded {d['code']} over {d['servers']} memds, one killed (SIGKILL) after "
             "the eviction; against 2 replicas on the same servers",
             f"{d['verified_pages']} of {d['pages']} pages verified, {rebuilt}; server memory "
             f"{d['server_pages_per_page']:.2f} vs {d['two_replicas_server_pages_per_page']:.2f} pages per page; "
             f"fault p50 {d['fault_p50_vs_two_replicas']:.2f}x, eviction rate "
             f"{d['evict_rate_vs_two_replicas']:.2f}x 2 replicas' (same run)")]


def remote_prefetch_rows(r):
    runs = {(x["pattern"], x["prefetch"]): x for x in r.data["runs"]}
    rows = []
    for pattern in ("seq", "stride"):
        on, off = runs.get((pattern, "auto")), runs.get((pattern, "off"))
        if not on or not off:
            continue
        rows.append((f"remote faults over TCP, {pattern} reads: access GB/s with prefetching (auto) "
                     "and without; against the bare read stream",
                     f"{on['access_gbps']:.3f} vs {off['access_gbps']:.3f} GB/s "
                     f"({on['access_gbps'] / off['access_gbps']:.1f}x); "
                     f"{on['access_gbps'] / on['raw_stream_gbps']:.2f}x the raw stream"))
    return rows


def gups_rows(r):
    d = r.data
    ws = d.get("working_set_bytes", 0) >> 20
    budget = d.get("dram_budget_bytes", 0) >> 20
    return [(f"gups ({ws} MiB, DRAM budget {budget} MiB, rest remote): tiered against the oracle",
             f"{d['tiered_vs_oracle']:.2f}x; tracking_speed_ratio {d['tracking_speed_ratio']:.3f}")]


def fmt_size(n):
    return f"{n >> 30} GiB" if n >= 1 << 30 else f"{n >> 20} MiB"


def kv_rows(r):
    d = r.data
    size = fmt_size(d.get("table_bytes", 0))
    rows = []
    for s in d.get("results", []):
        requests = s["ops_s"] * s.get("measured_s", d.get("seconds", 0))
        per_req = s["faults"] / requests if requests else 0.0
        rows.append((f"kv {size}, {s['setup']}: ops/s, remote faults per request",
                     f"{s['ops_s']:,.0f} ops/s, {per_req:.3f}"))
    return rows


def malloc_rows(r):
    s = r.data["summary"]
    rows = [("malloc: tiermem/glibc geomean (lowest); worst against the best of jemalloc and "
             "mimalloc; worst peak RSS against glibc",
             f"{s['geomean_vs_glibc']:.2f}x ({s['worst_vs_glibc']:.2f}x); "
             f"{s['worst_vs_best_of_jemalloc_mimalloc']:.2f}x; {s['worst_rss_vs_glibc']:.3f}x")]
    if "cpu_geomean_vs_best_of_jemalloc_mimalloc" in s:
        above = s["worst_rss_above_smaller_of_jemalloc_mimalloc_bytes"]
        above = "-" if above is None else f"{above / 1e6:+.2f} MB"
        rows.append(("malloc by CPU time: tiermem against the best of jemalloc and mimalloc, "
                     "geomean (worst); peak RSS against glibc where glibc's is above 8 MB; "
                     "on the smaller programs, against the smaller of jemalloc's and mimalloc's",
                     f"{s['cpu_geomean_vs_best_of_jemalloc_mimalloc']:.2f}x "
                     f"({s['cpu_worst_vs_best_of_jemalloc_mimalloc']:.2f}x); "
                     f"{s['worst_rss_vs_glibc_above_8mb']:.3f}x; {above}"))
    return rows


def unmodified_setups(d, figures):
    """preload-hotset's or memcached's setups, joined: figures(s) for each that ran, or why not."""
    parts = []
    for s in d.get("setups", []):
        if s.get("skipped"):
            parts.append(f"{s['name']} skipped ({s['skipped']})")
        elif s.get("error"):
            parts.append(f"{s['name']} failed ({s['error']})")
        else:
            parts.append(f"{s['name']} {figures(s)}")
    return "; ".join(parts)


def preload_hotset_rows(r):
    d = r.data
    size = fmt_size(d.get("array_bytes", 0))

    def figures(s):
        fpu = " / ".join(f"{x:.3f}" for x in s.get("faults_per_update", []))
        half = s.get("faults_per_update_second_half")
        if half:
            fpu += " (second halves " + " / ".join(f"{x:.3f}" for x in half) + ")"
        return (f"{s['updates_per_s']:,.0f} updates/s, peak RSS {s['peak_rss_bytes'] / 2**20:.0f} MiB, "
                f"faults/update {fpu}")
    return [(f"preload-hotset: a plain C program, {size} array, 90% of updates on 10% (moved halfway), "
             f"DRAM limit {d['dram_limit_bytes'] / 2**20:.0f} MiB; ideal faults/update "
             f"{d['ideal_faults_per_update']:.3f}", unmodified_setups(d, figures))]


def preload_fill_rows(r):
    d = r.data
    fills = {s["name"]: s.get("fill_s") for s in d.get("setups", [])}
    return [(f"filling {fmt_size(d['array_bytes'])} under the preload library at a "
             f"{d['dram_limit_bytes'] / 2**20:.0f} MiB DRAM limit, against 1.5 x (the plain fill + the "
             "excess at the raw write rate, same run)",
             f"{fills.get('tiermem', 0):.2f} s against a bound of {d['fill_bound_s']:.2f} s "
             f"({d['tiermem_fill_vs_bound']:.2f}x); plain {fills.get('plain', 0):.2f} s, raw writes "
             f"{d['raw_write_pages_per_s']:,.0f} pages/s")]


def memcached_rows(r):
    d = r.data

    def figures(s):
        return (f"{s['gets_per_s']:,.0f} gets/s, p99 {s['p99_us'] / 1000:.2f} ms, peak RSS "
                f"{s['peak_rss_bytes'] / 2**20:.0f} MiB, {s['faults_per_get']:.2f} faults/get")
    return [(f"memcached: {d['keys']:,} keys ({d['data_bytes'] / 2**20:.0f} MiB of values), hot-key gets, "
             f"DRAM limit {d['dram_limit_bytes'] / 2**20:.0f} MiB", unmodified_setups(d, figures))]


def programs_rows(r):
    """One row for `tiermem-bench programs`: per program, speed at each grid share under tiermem
    and the kernel's swap, the smallest share at 0.9x plain, and how many tiermem runs checked."""
    def speed(run):
        if run.get("relative_speed"):
            return f"{run['relative_speed']:.2f}" + ("^" if run.get("limit_kept") is False else "")
        return "OOM" if run.get("oom_kills") else "timeout" if "timed out" in (run.get("error") or "") else "failed"

    def share(v):
        return "none" if v is None else f"{v:.2f}"
    parts, shares = [], []
    for p in r.data.get("programs", []):
        if p.get("skipped") or not p.get("peak_rss_bytes"):
            continue
        grid = [run for run in p["runs"] if not run.get("bisection") and run["setup"] != "plain"]
        shares = sorted({run["dram_share"] for run in grid}, reverse=True)
        cells = []
        for setup in ("tiermem", "kernel_swap"):
            by = {run["dram_share"]: run for run in grid if run["setup"] == setup}
            cells.append("/".join(speed(by[x]) for x in shares if x in by))
        tm = [run for run in p["runs"] if run["setup"] == "tiermem"]
        right = sum(1 for run in tm if run["result_ok"])
        at = p["dram_share_at_0_9"]
        parts.append(f"{p['name']} ({p['peak_rss_bytes'] / 2**20:.0f} MiB) {cells[0]} vs {cells[1]}, "
                     f"0.9x at {share(at['tiermem'])} vs {share(at['kernel_swap'])}, {right}/{len(tm)} right")
    if not parts:
        return []
    return [("programs: speed vs plain at " + "/".join(f"{x:g}" for x in shares)
             + " of the plain peak RSS, tiermem vs the kernel's swap (^: peak RSS over the limit by more than"
             " a quarter of the plain peak); smallest share at 0.9x with its limit kept; tiermem runs checked right",
             "; ".join(parts))]


def is_dict_with(*keys):
    return lambda r: isinstance(r.data, dict) and all(k in r.data for k in keys)


# (file name pattern, which files qualify, rows of the table)
HEADLINES = [
    (r"^compare\.(json|txt)$", is_dict_with("results"), compare_rows),
    (r"^remote-fault.*\.json$",
     lambda r: is_dict_with("fault_p50_us", "raw_roundtrip_p50_us")(r) and r.data.get("replicas", 1) == 1
     and "code" not in r.data,
     remote_fault_rows),
    (r"^remote-fault-replicas.*\.json$", is_dict_with("rereplication_s", "fault_p50_vs_one_replica"),
     remote_replicas_rows),
    (r"^remote-fault-code.*\.json$", is_dict_with("code", "fault_p50_vs_two_replicas", "rebuilt"),
     remote_code_rows),
    (r"^remote-fault-prefetch.*\.json$", is_dict_with("runs"), remote_prefetch_rows),
    (r"^gups-full.*\.json$", is_dict_with("tiered_vs_oracle", "tracking_speed_ratio"), gups_rows),
    (r"^kv-.*\.json$", is_dict_with("results", "table_bytes"), kv_rows),
    (r"^malloc.*\.json$", is_dict_with("summary"), malloc_rows),
    (r"^preload-hotset.*\.json$", is_dict_with("setups", "ideal_faults_per_update"), preload_hotset_rows),
    (r"^memcached.*\.json$", is_dict_with("setups", "hot_keys"), memcached_rows),
    (r"^preload-fill.*\.json$", is_dict_with("fill_bound_s", "tiermem_fill_vs_bound"), preload_fill_rows),
    (r"^programs.*\.json$", lambda r: is_dict_with("programs")(r) and not r.data.get("quick")
     and "kernel_swap" in r.data.get("setups", ""), programs_rows),
]


def results_section(results_dir):
    results = load_results(results_dir)
    lines = ["| figure | measured | command | date (commit) | raw output |", "|---|---|---|---|---|"]
    for pattern, accept, rows in HEADLINES:
        r = latest(results, pattern, accept)
        if r is None:
            continue
        if pattern.startswith("^kv"):
            # The largest table measured, then the latest run of that size.
            biggest = max(x.data["table_bytes"] for x in results
                          if re.match(pattern, x.name) and accept(x))
            r = latest(results, pattern, lambda x: accept(x) and x.data["table_bytes"] == biggest)
        for figure, value in rows(r):
            lines.append(f"| {figure} | {value} | `{r.command}` | {r.when()} | "
                         f"[{r.name}](docs/results/{r.name}) |")
    return "\n".join(lines)


# ---- README ----------------------------------------------------------------------------------

def replace_section(text, name, body):
    pat = re.compile(r"(<!-- %s:begin[^>]*-->\n)(.*?)(<!-- %s:end -->)" % (name, name), re.S)
    if not pat.search(text):
        sys.exit(f"gen-readme: README has no <!-- {name}:begin --> ... <!-- {name}:end --> markers")
    return pat.sub(lambda m: m.group(1) + body + "\n" + m.group(3), text, count=1)


def first_difference(old, new):
    a, b = old.splitlines(), new.splitlines()
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else "<end of file>"
        y = b[i] if i < len(b) else "<end of file>"
        if x != y:
            return i + 1, x, y
    return 0, "", ""


MAX_README_LINES = 200


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiermemctl", help="path of the built tiermemctl (default: build*/tools/)")
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    ap.add_argument("--results", default=os.path.join(ROOT, "docs", "results"))
    ap.add_argument("--check", action="store_true", help="only check; exit 1 when out of date")
    args = ap.parse_args()

    with open(args.readme) as f:
        old = f.read()
    new = replace_section(old, "options", options_section(find_tiermemctl(args.tiermemctl)))
    new = replace_section(new, "results", results_section(args.results))
    new = replace_section(new, "example",
                          example_section(os.path.join(ROOT, "examples", "pmr_on_tier.cc")))
    if args.check:
        if new.count("\n") >= MAX_README_LINES:
            print(f"{args.readme} has {new.count(chr(10))} lines: README is for users and stays under "
                  f"{MAX_README_LINES} (history goes to docs/results/NOTES.md, design to docs/)")
            return 1
        if new != old:
            line, was, wants = first_difference(old, new)
            print(f"{args.readme} is out of date at line {line}: has {was[:60]!r}, "
                  f"generated {wants[:60]!r}; run scripts/gen-readme.py")
            return 1
        return 0
    if new != old:
        with open(args.readme, "w") as f:
            f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
