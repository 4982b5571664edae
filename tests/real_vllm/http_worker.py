#!/usr/bin/env python3
"""`vllm serve` as shardgate's HTTP worker: the differential requests of differential.py, sent
through shardgate to `vllm serve` and to `vllm serve` directly, must give identical greedy
answers (one server, so the two runs differ only by the gateway in between).

Opt-in (needs tools/real-vllm/setup.sh), stdlib only:

    python3 tests/real_vllm/http_worker.py [--cases basic|full] [--gateway PATH]

Ports: SHARDGATE_TEST_PORT_BASE (default: any free ones)."""
import argparse, json, os, signal, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from differential import HOME, MODEL, NAME, ROOT, cases, free_port, run_all, same, wait_http  # noqa: E402


def ports(n):
    base = os.environ.get("SHARDGATE_TEST_PORT_BASE")
    return [int(base) + i for i in range(n)] if base else [free_port() for _ in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="basic", choices=["basic", "full"])
    ap.add_argument("--gateway", default=os.path.join(ROOT, "target", "release", "shardgate"))
    args = ap.parse_args()
    reqs = cases(args.cases)
    work = f"/tmp/sg-http-worker-{os.getpid()}"
    os.makedirs(work, exist_ok=True)
    ref_port, gw_port, metrics_port = ports(3)
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", VLLM_CPU_KVCACHE_SPACE="1")
    ref = subprocess.Popen([os.path.join(HOME, "venv", "bin", "vllm"), "serve", MODEL, "--served-model-name", NAME,
                            "--host", "127.0.0.1", "--port", str(ref_port), "--dtype", "float32",
                            "--max-model-len", "1024", "--max-num-seqs", "8", "--enforce-eager",
                            "--tool-call-parser", "hermes", "--enable-auto-tool-choice"], env=env,
                           stdout=open(f"{work}/vllm.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)
    gw = None
    try:
        wait_http(f"http://127.0.0.1:{ref_port}/v1/models")
        gw = subprocess.Popen([args.gateway, "launch", "--worker-urls", f"http://127.0.0.1:{ref_port}",
                               "--model-path", MODEL, "--served-model-name", NAME, "--host", "127.0.0.1",
                               "--port", str(gw_port), "--metrics-port", str(metrics_port),
                               "--health-check-interval-secs", "1"],
                              stderr=open(f"{work}/gateway.log", "w"))
        wait_http(f"http://127.0.0.1:{gw_port}/readiness")
        ours = run_all(f"http://127.0.0.1:{gw_port}", reqs)
        theirs = run_all(f"http://127.0.0.1:{ref_port}", reqs)
    finally:
        if gw:
            gw.terminate(); gw.wait()
        os.killpg(ref.pid, signal.SIGTERM); ref.wait()
    diffs = [(r, a, b) for r, a, b in zip(reqs, ours, theirs) if not same(a, b)]
    for (kind, body), a, b in diffs:
        print(f"DIFF {kind} {json.dumps(body)[:200]}\n  via shardgate: {json.dumps(a)[:600]}\n  direct:        {json.dumps(b)[:600]}")
    print(f"{len(reqs) - len(diffs)}/{len(reqs)} requests identical through the HTTP worker (logs in {work})")
    sys.exit(1 if diffs else 0)


if __name__ == "__main__":
    main()
