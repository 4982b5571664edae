#!/usr/bin/env python3
"""Summarizes a compare_vllm_rs.sh results directory: per configuration and round, TTFT p50
and throughput of both clients, then the medians over rounds and the issue's two criteria."""
import json
import re
import statistics
import sys
from pathlib import Path

out = Path(sys.argv[1])
runs = {}
for f in sorted(out.glob("*-r*-*.json")):
    m = re.fullmatch(r"([cr]\d+)-r(\d+)-(vllm_rs|shardgate)\.json", f.name)
    if m:
        runs.setdefault(m[1], {}).setdefault(int(m[2]), {})[m[3]] = json.loads(f.read_text())

print(f"# shardgate bench vs vllm-rs bench serve ({out.name})\n")
print((out / "setup.txt").read_text() if (out / "setup.txt").exists() else "")
LOADS = {"c": "closed loop, max-concurrency {}", "r": "open loop, Poisson {} req/s"}
for load in sorted(runs, key=lambda k: (k[0], -int(k[1:]))):
    rounds = runs[load]
    print(f"## {LOADS[load[0]].format(load[1:])}\n")
    print("| round | TTFT p50 ms vllm-rs | TTFT p50 ms shardgate | req/s vllm-rs | req/s shardgate | throughput ratio |")
    print("|---|---|---|---|---|---|")
    ttft = {"vllm_rs": [], "shardgate": []}
    rps = {"vllm_rs": [], "shardgate": []}
    wins = 0
    for r in sorted(rounds):
        pair = rounds[r]
        if len(pair) < 2:
            continue
        for tool in ttft:
            ttft[tool].append(pair[tool]["median_ttft_ms"])
            rps[tool].append(pair[tool]["request_throughput"])
        wins += pair["shardgate"]["median_ttft_ms"] < pair["vllm_rs"]["median_ttft_ms"]
        ratio = pair["shardgate"]["request_throughput"] / pair["vllm_rs"]["request_throughput"]
        print(f"| {r} | {pair['vllm_rs']['median_ttft_ms']:.3f} | {pair['shardgate']['median_ttft_ms']:.3f} "
              f"| {pair['vllm_rs']['request_throughput']:.1f} | {pair['shardgate']['request_throughput']:.1f} | {ratio:.3f} |")
    if not ttft["shardgate"]:
        continue
    med = {k: statistics.median(v) for k, v in ttft.items()}
    thr = {k: statistics.median(v) for k, v in rps.items()}
    n = len(ttft["shardgate"])
    ratio = thr["shardgate"] / thr["vllm_rs"]
    # Little's law: the requests each client actually kept in flight (a slow client turnaround
    # lowers it, and with it the server's queueing and TTFT).
    little = {t: statistics.median(p[t]["request_throughput"] * p[t]["mean_e2el_ms"] / 1000
                                   for p in rounds.values() if len(p) == 2) for t in ttft}
    print(f"\nmedian over {n} rounds: TTFT p50 vllm-rs {med['vllm_rs']:.3f} ms, shardgate {med['shardgate']:.3f} ms "
          f"(ratio {med['shardgate'] / med['vllm_rs']:.3f}); shardgate lower in {wins} of {n} rounds")
    print(f"median throughput: vllm-rs {thr['vllm_rs']:.1f} req/s, shardgate {thr['shardgate']:.1f} req/s "
          f"(ratio {ratio:.3f}, {'within' if abs(ratio - 1) <= 0.10 else 'NOT within'} 10 %)")
    print(f"requests in flight by Little's law (throughput x mean E2EL): vllm-rs {little['vllm_rs']:.2f}, "
          f"shardgate {little['shardgate']:.2f}\n")
quiet = out / "quiet.txt"
if quiet.exists():
    print("Machine busy (other jobs, % of all CPUs over 1 s) before each pair: "
          + ", ".join(line.split(": machine busy ")[0] + " " + line.split("busy ")[1].split(" %")[0] + "%"
                      for line in quiet.read_text().splitlines() if "busy" in line))
