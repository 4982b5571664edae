#!/usr/bin/env python3
"""Self-time by function from a `perf record` of a gateway, resolved with `nm`.

The Debian perf 6.1 here cannot read the symbols of the release binaries ("cannot get elf
header") and prints raw addresses; this maps them through `nm -C` (the enclosing non-inlined
function) and sums the percentages per function and per crate.

Usage: perf_top.py PERF_DATA BINARY [--top 40] [--expand SUBSTR] [--time START,STOP]
"""
import argparse
import bisect
import collections
import re
import subprocess


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("binary")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--expand", metavar="SUBSTR", help="for functions matching SUBSTR, attribute samples to the "
                    "inlined functions (addr2line -i) inside them: big async state machines inline everything")
    ap.add_argument("--time", metavar="START,STOP", help="only samples in this window (perf report --time: "
                    "seconds as `perf script` prints them, or percent slices like 0%%-10%%)")
    args = ap.parse_args()
    name = args.binary.rsplit("/", 1)[-1]
    syms = []
    for line in subprocess.run(["nm", "-C", "--defined-only", args.binary], capture_output=True, text=True).stdout.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            syms.append((int(parts[0], 16), parts[2]))
    syms.sort()
    addrs = [a for a, _ in syms]
    # perf prints a file offset for a DSO it cannot read; symbols are virtual addresses
    segs = []
    for line in subprocess.run(["readelf", "-lW", args.binary], capture_output=True, text=True).stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            segs.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))

    def vaddr(off):
        for o, v, n in segs:
            if o <= off < o + n:
                return off - o + v
        return off
    rep = subprocess.run(["perf", "report", "-i", args.data, "--no-children", "--sort", "dso,sym", "--stdio",
                          "--percent-limit", "0"] + (["--time", args.time] if args.time else []),
                         capture_output=True, text=True).stdout
    by_fn = collections.Counter()
    expand = collections.Counter()  # vaddr -> pct, for --expand
    by_crate = collections.Counter()
    pat = re.compile(r"^\s+([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(\S+)")
    for line in rep.splitlines():
        m = pat.match(line)
        if not m:
            continue
        pct, dso, kind, sym = float(m.group(1)), m.group(2), m.group(3), m.group(4)
        if dso == name and sym.startswith("0x"):
            i = bisect.bisect_right(addrs, vaddr(int(sym, 16))) - 1
            fn = syms[i][1] if i >= 0 else sym
            if args.expand and args.expand in fn:
                expand[vaddr(int(sym, 16))] += pct
            crate = re.sub(r"^<", "", fn).split("::")[0]
        elif dso == name:
            # a perf that reads the binary's symbols names them itself: group them by crate too
            fn = sym
            crate = re.sub(r"^<", "", sym).split("::")[0]
        else:
            fn = f"[{dso}] {sym}"
            crate = "[kernel]" if kind == "k" else f"[{dso}]"
        by_fn[fn] += pct
        by_crate[crate] += pct
    if expand:
        addrs_e = sorted(expand)
        out = subprocess.run(["addr2line", "-i", "-f", "-C", "-e", args.binary] + [hex(a) for a in addrs_e],
                             capture_output=True, text=True).stdout.splitlines()
        # addr2line -i prints (function, file:line) pairs, innermost first, for each address; an
        # address's group ends where the next address's begins: resolve them one by one instead
        inner = collections.Counter()
        lines_c = collections.Counter()
        for a in addrs_e:
            o = subprocess.run(["addr2line", "-i", "-f", "-C", "-e", args.binary, hex(a)], capture_output=True,
                               text=True).stdout.splitlines()
            fns = o[0::2]
            locs = o[1::2]
            # the innermost frame that is the project's own code, else the innermost
            pick = next((k for k, l in enumerate(locs) if "/src/" in l and "/.cargo/" not in l and "/rustc/" not in l), 0)
            inner[fns[pick] if fns else "?"] += expand[a]
            lines_c[(locs[pick] if locs else "?").split(" ")[0]] += expand[a]
        del out
        print(f"inside {args.expand} (innermost own-code frame of each sample):")
        for f, p in inner.most_common(args.top):
            print(f"  {p:6.2f}%  {f[:160]}")
        print("by source line:")
        for f, p in lines_c.most_common(args.top):
            print(f"  {p:6.2f}%  {f}")
    print("self time by crate / library:")
    for c, p in by_crate.most_common(15):
        print(f"  {p:6.2f}%  {c}")
    print("self time by function:")
    for f, p in by_fn.most_common(args.top):
        print(f"  {p:6.2f}%  {f[:160]}")


if __name__ == "__main__":
    main()
