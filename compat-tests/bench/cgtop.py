#!/usr/bin/env python3
"""Top functions of a callgrind output file, by self and by inclusive instructions.

usage: cgtop.py callgrind.out.PID[.N] [TOP]

Written because callgrind_annotate 3.19 attributes every instruction of keel's
profiles to `clone` (its parser trips on some of Rust's and RocksDB's long names).
Reads the callgrind format (name compression "fn=(id) name", cost lines
"POSITION COST", "calls=COUNT TARGET" followed by the call's inclusive cost line).
Inclusive cost = self cost + the cost of every call the function makes; recursion is
counted once per level, so a recursive function's inclusive figure can exceed 100%.
"""
import re
import sys
from collections import defaultdict


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    names: dict[str, str] = {}
    self_cost: dict[str, int] = defaultdict(int)
    incl_calls: dict[str, int] = defaultdict(int)
    total = 0
    fn = None
    in_call = False
    name_re = re.compile(r"^\((\d+)\)(?:\s+(.*))?$")

    def resolve(spec: str) -> str:
        m = name_re.match(spec.strip())
        if not m:
            return spec.strip()
        ident, name = m.group(1), m.group(2)
        if name:
            names[ident] = name
        return names.get(ident, "(" + ident + ")")

    with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            if line.startswith("fn="):
                fn = resolve(line[3:])
                continue
            if line.startswith("cfn="):
                resolve(line[4:])  # defines the name for later references
                continue
            if line.startswith("calls="):
                in_call = True
                continue
            if line.startswith("summary:"):
                total = int(line.split()[1])
                continue
            first = line[0]
            if first.isdigit() or first in "+-*":
                parts = line.split()
                if len(parts) < 2 or fn is None:
                    in_call = False
                    continue
                cost = int(parts[1])
                if in_call:
                    incl_calls[fn] += cost
                    in_call = False
                else:
                    self_cost[fn] += cost
    if not total:
        total = sum(self_cost.values()) or 1
    print(f"total instructions: {total:,}")
    print(f"-- self (exclusive), top {top}")
    for name, c in sorted(self_cost.items(), key=lambda x: -x[1])[:top]:
        print(f"{c:>14,} {100 * c / total:6.2f}%  {name[:150]}")
    incl = {n: self_cost.get(n, 0) + incl_calls.get(n, 0) for n in set(self_cost) | set(incl_calls)}
    print(f"-- inclusive, top {top * 2}")
    for name, c in sorted(incl.items(), key=lambda x: -x[1])[: top * 2]:
        print(f"{c:>14,} {100 * c / total:6.2f}%  {name[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
