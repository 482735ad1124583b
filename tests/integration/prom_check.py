#!/usr/bin/env python3
"""Checks a Prometheus text exposition (format 0.0.4) strictly, as a scraper would parse it, and
the naming conventions tiermem's metrics follow. Reads stdin; prints one line per problem and
exits 1, or prints a summary and exits 0.
  prom_check.py [--expect-pid PID] [--require NAME ...] < metrics.txt
With --expect-pid, tiermem_tier_allocated_bytes{pid=PID,tier="remote"} must be > 0."""
import argparse
import math
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"\s*(,|$)')
SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(\s+-?\d+)?$")


def parse_labels(text):
    labels, rest = {}, text[1:-1]
    while rest.strip():
        m = LABEL.match(rest)
        if not m:
            raise ValueError("bad labels " + text)
        if m.group(1) in labels:
            raise ValueError("label %s twice" % m.group(1))
        labels[m.group(1)] = m.group(2).replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        rest = rest[m.end():]
    return labels


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--expect-pid")
    ap.add_argument("--require", nargs="*", default=[])
    args = ap.parse_args()
    problems, helps, types, samples, seen_families = [], {}, {}, [], []
    for n, line in enumerate(sys.stdin.read().split("\n"), 1):
        if line == "":
            continue
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            if len(parts) < 4 or not NAME.match(parts[2]):
                problems.append("line %d: bad comment: %s" % (n, line))
                continue
            table = helps if parts[1] == "HELP" else types
            if parts[2] in table:
                problems.append("line %d: second %s for %s" % (n, parts[1], parts[2]))
            table[parts[2]] = parts[3]
            if parts[1] == "TYPE" and parts[3] not in ("counter", "gauge", "histogram", "summary", "untyped"):
                problems.append("line %d: unknown type %s" % (n, parts[3]))
            continue
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            problems.append("line %d: not a sample: %s" % (n, line))
            continue
        name, labels_text, value = m.group(1), m.group(2), m.group(3)
        try:
            labels = parse_labels(labels_text) if labels_text else {}
            v = float(value)  # accepts +Inf, NaN
        except ValueError as e:
            problems.append("line %d: %s" % (n, e))
            continue
        family = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and types.get(name[: -len(suffix)]) == "histogram":
                family = name[: -len(suffix)]
        if family not in helps or family not in types:
            problems.append("line %d: %s has no # HELP and # TYPE before it" % (n, name))
        if seen_families and seen_families[-1] != family and family in seen_families:
            problems.append("line %d: samples of %s are not together" % (n, family))
        if not seen_families or seen_families[-1] != family:
            seen_families.append(family)
        samples.append((family, name, labels, v))

    for family, t in types.items():
        if not family.startswith("tiermem_"):
            problems.append("%s: not in the tiermem_ namespace" % family)
        if t == "counter" and not family.endswith("_total"):
            problems.append("%s: a counter whose name does not end in _total" % family)
        if t != "counter" and family.endswith("_total"):
            problems.append("%s: a %s named like a counter" % (family, t))
        if "bytes" in family and not (family.endswith("_bytes") or family.endswith("_bytes_total")):
            problems.append("%s: bytes not as the unit suffix" % family)
        if t == "histogram" and not family.endswith("_seconds"):
            problems.append("%s: a latency histogram not in seconds" % family)
        if family not in helps:
            problems.append("%s: # TYPE without # HELP" % family)
    # Histograms: cumulative buckets with increasing le, +Inf last and equal to _count, a _sum.
    series = {}
    for family, name, labels, v in samples:
        if types.get(family) != "histogram":
            if family != "tiermem_exporter_processes" and "pid" not in labels:
                problems.append("%s: no pid label" % name)
            continue
        key = (family, tuple(sorted((k, x) for k, x in labels.items() if k != "le")))
        h = series.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if name.endswith("_bucket"):
            if "le" not in labels:
                problems.append("%s: a bucket without le" % name)
                continue
            h["buckets"].append((float(labels["le"]), v))
        elif name.endswith("_sum"):
            h["sum"] = v
        elif name.endswith("_count"):
            h["count"] = v
    for (family, key), h in series.items():
        les = [le for le, _ in h["buckets"]]
        counts = [c for _, c in h["buckets"]]
        if not les or les[-1] != math.inf:
            problems.append("%s%s: no +Inf bucket last" % (family, dict(key)))
        if les != sorted(les) or counts != sorted(counts):
            problems.append("%s%s: buckets not cumulative in le order" % (family, dict(key)))
        if h["sum"] is None or h["count"] is None:
            problems.append("%s%s: no _sum or _count" % (family, dict(key)))
        elif counts and counts[-1] != h["count"]:
            problems.append("%s%s: +Inf bucket %s != _count %s" % (family, dict(key), counts[-1], h["count"]))
    for r in args.require:
        if r not in types:
            problems.append("missing metric %s" % r)
    if args.expect_pid:
        remote = [v for f, n, l, v in samples
                  if n == "tiermem_tier_allocated_bytes" and l.get("pid") == args.expect_pid and l.get("tier") == "remote"]
        if not remote or remote[0] <= 0:
            problems.append("pid %s: no remote bytes in tiermem_tier_allocated_bytes (%s)" % (args.expect_pid, remote))
    for p in problems:
        print(p)
    if problems:
        return 1
    print("prom_check: %d families, %d samples, %d histograms" % (len(types), len(samples), len(series)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
