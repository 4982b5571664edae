#!/usr/bin/env python3
"""Totals of one callgrind dump per output token of a bench run (see gateway.sh).

Usage: per_token.py CALLGRIND_DUMP BENCH_JSON LABEL BUILD [--top N]
Instructions are the dump's total; allocations are the calls into malloc, realloc and calloc;
wakes are the calls into monoio's task wake functions (any function whose name has
`wake_by_val` or `wake_by_ref` in a `monoio` path). --top lists the N functions with the most
inclusive-free (self) instructions.
"""
import json
import re
import sys
from collections import defaultdict

ALLOC = {"malloc", "realloc", "calloc"}


def parse(path):
    names = {}
    self_ir = defaultdict(int)
    calls_to = defaultdict(int)
    total = 0
    fn = None
    pending_call = None
    ref = re.compile(r"^(c?fn)=\((\d+)\)(?: (.*))?$")
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = ref.match(line)
            if m:
                kind, num, name = m.groups()
                if name is not None:
                    names[num] = name
                if kind == "fn":
                    fn = names[num]
                else:
                    pending_call = names[num]
                continue
            if line.startswith("calls="):
                count = int(line[6:].split()[0])
                calls_to[pending_call] += count
                pending_call = ("inclusive", pending_call)
                continue
            if line.startswith("summary:") or line.startswith("totals:"):
                total = int(line.split()[1])
                continue
            if line and (line[0].isdigit() or line[0] in "+-*"):
                parts = line.split()
                if len(parts) >= 2:
                    cost = int(parts[1])
                    if isinstance(pending_call, tuple):
                        pending_call = None  # the call line's cost is inclusive, not self
                    elif fn is not None:
                        self_ir[fn] += cost
    return total, self_ir, calls_to


def main():
    dump, bench, label, build = sys.argv[1:5]
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 0
    total, self_ir, calls_to = parse(dump)
    with open(bench) as f:
        b = json.load(f)
    tokens = b.get("total_output_tokens") or 0
    allocs = sum(n for name, n in calls_to.items() if name in ALLOC)
    wakes = sum(n for name, n in calls_to.items() if "monoio" in name and ("wake_by_val" in name or "wake_by_ref" in name))
    per = (lambda n: n / tokens) if tokens else (lambda n: float("nan"))
    print(f"{label:6} {build}: tokens {tokens}, completed {b.get('completed')}, instructions {total:,} "
          f"({per(total):,.0f}/token), allocations {allocs:,} ({per(allocs):.2f}/token), "
          f"task wakes {wakes:,} ({per(wakes):.2f}/token)")
    for name, ir in sorted(self_ir.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {per(ir):9,.0f}/token {100 * ir / max(total, 1):5.1f}%  {name[:150]}")


if __name__ == "__main__":
    main()
