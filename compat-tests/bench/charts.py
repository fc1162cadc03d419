"""SVG charts of a benchmark run (issue 20 item 2): for each load workload in a results
file (run.sh's or ensemble.sh's raw/values: lines "KEY KIND VALUE", KEY like
c4.get.ops, c4f.set.p99, KIND zk or keel), one chart of two panels, ops/s and p99 latency
per phase, ZooKeeper's and keel's medians side by side, each bar labelled with its
value. Plain SVG 1.1, no script, no external asset.

Usage: charts.py VALUES OUTDIR SCOPE   (SCOPE: "standalone" or "ensemble", in titles
and file names: OUTDIR/SCOPE-WORKLOAD.svg). Prints the files written."""

import os
import re
import statistics
import sys
from collections import defaultdict
from xml.sax.saxutils import escape

PHASES = ["create", "get", "set", "mixed", "delete"]
WORKLOADS = {"c4": "zkload, 4 sessions x 64 in flight", "c1": "zkload, 1 session x 1 in flight",
             "zb": "zkbench (stock C client), 4 sessions x 64 in flight"}
VIA = {"": "", "f": ", through a follower", "l": ", through the leader"}
KINDS = [("zk", "ZooKeeper 3.8", "#8a8f98"), ("keel", "keel", "#2b6cb0")]
KEY = re.compile(r"^(c4|c1|zb)(f|l|)\.(" + "|".join(PHASES) + r")\.(ops|p99)$")


def medians(path):
    vals = defaultdict(list)
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 3 or not KEY.match(parts[0]):
                continue
            try:
                v = float(parts[2])
            except ValueError:
                v = None  # a failed run (FAIL): no bar, as the table's median says FAIL
            vals[(parts[0], parts[1])].append(v)
    return {k: statistics.median(v) for k, v in vals.items() if None not in v}


def nice_max(v):
    """The axis end: 1, 2 or 5 times a power of ten at or above v."""
    if v <= 0:
        return 1.0
    p = 10 ** len(str(int(v)))
    p /= 10
    for m in (1, 2, 5, 10):
        if m * p >= v:
            return m * p
    return 10 * p


def fmt(v):
    return f"{v / 1000:.1f}k" if v >= 10000 else f"{v:.0f}"


def panel(med, prefix, metric, title, x0, out):
    w, h, top, left, bottom = 460, 300, 40, 60, 40
    vals = {(ph, k): med.get((f"{prefix}.{ph}.{metric}", k)) for ph in PHASES for k, _, _ in KINDS}
    top_v = nice_max(max([v for v in vals.values() if v is not None] or [0]))
    plot_h = h - top - bottom
    out.append(f'<text x="{x0 + w / 2}" y="22" text-anchor="middle" font-weight="bold">{escape(title)}</text>')
    for i in range(5):
        v = top_v * i / 4
        y = top + plot_h - plot_h * i / 4
        out.append(f'<line x1="{x0 + left}" x2="{x0 + w - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{x0 + left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{fmt(v)}</text>')
    group = (w - left - 10) / len(PHASES)
    bar = group * 0.36
    for gi, ph in enumerate(PHASES):
        gx = x0 + left + gi * group + group * 0.14
        for ki, (k, _, colour) in enumerate(KINDS):
            v = vals[(ph, k)]
            bx = gx + ki * bar
            if v is None:
                out.append(f'<text x="{bx + bar / 2:.1f}" y="{top + plot_h - 4}" text-anchor="middle" font-size="10">n/a</text>')
                continue
            bh = plot_h * v / top_v
            out.append(f'<rect x="{bx:.1f}" y="{top + plot_h - bh:.1f}" width="{bar - 2:.1f}" height="{bh:.1f}" fill="{colour}"/>')
            out.append(f'<text x="{bx + bar / 2 - 1:.1f}" y="{top + plot_h - bh - 3:.1f}" text-anchor="middle" font-size="10">{fmt(v)}</text>')
        out.append(f'<text x="{gx + bar:.1f}" y="{top + plot_h + 16}" text-anchor="middle" font-size="12">{ph}</text>')


def chart(med, prefix, scope):
    wl, via = prefix[:2], prefix[2:]
    if not any(k[0].startswith(prefix + ".") for k in med):
        return None
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="940" height="340" '
           'font-family="sans-serif" font-size="12">',
           '<rect width="940" height="340" fill="#fff"/>',
           f'<title>{escape(f"{scope}: {WORKLOADS[wl]}{VIA[via]}")}</title>']
    panel(med, prefix, "ops", f"{scope}: ops/s (higher is better)", 0, out)
    panel(med, prefix, "p99", "p99 latency, us (lower is better)", 470, out)
    out.append(f'<text x="10" y="330" font-size="11">{escape(WORKLOADS[wl] + VIA[via])}; medians of the measured rounds</text>')
    for i, (_, label, colour) in enumerate(KINDS):
        x = 640 + i * 140
        out.append(f'<rect x="{x}" y="320" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{x + 16}" y="330" font-size="11">{escape(label)}</text>')
    out.append("</svg>\n")
    return "\n".join(out)


def main():
    values, outdir, scope = sys.argv[1], sys.argv[2], sys.argv[3]
    med = medians(values)
    os.makedirs(outdir, exist_ok=True)
    for prefix in sorted({k[0].split(".")[0] for k in med}):
        svg = chart(med, prefix, scope)
        if svg is None:
            continue
        path = os.path.join(outdir, f"{scope}-{prefix}.svg")
        with open(path, "w") as f:
            f.write(svg)
        print(path)


if __name__ == "__main__":
    main()
