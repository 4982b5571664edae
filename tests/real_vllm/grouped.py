#!/usr/bin/env python3
"""A grouped worker on a real vLLM engine: `vllm serve --headless --data-parallel-size 2` behind
one ipc:// URL with `--zmq-engine-count 2`. Requests must complete on both ranks (each rank's
load report reaches the gateway's rank table), and the metrics listener must show the worker
series with connection_mode="zmq".

    python3 tests/real_vllm/grouped.py        (needs tools/real-vllm/setup.sh)

Exit status 0 = both ranks served and the checks passed."""
import json, os, signal, subprocess, sys, threading, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from differential import MODEL, NAME, ROOT, TOOLS, free_port, handshake_port, http, wait_http  # noqa: E402


def main():
    gateway = os.path.join(ROOT, "target", "release", "shardgate")
    work = f"/tmp/sg-grouped-{os.getpid()}"
    os.makedirs(work, exist_ok=True)
    path = f"{work}/engine-0"
    port, metrics_port = free_port(), free_port()
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", VLLM_CPU_KVCACHE_SPACE="1")
    gw = subprocess.Popen([gateway, "launch", "--worker-urls", f"ipc://{path}", "--model-path", MODEL,
                           "--served-model-name", NAME, "--host", "127.0.0.1", "--port", str(port),
                           "--metrics-port", str(metrics_port), "--zmq-engine-count", "2", "--log-level", "debug"],
                          stderr=open(f"{work}/gateway.log", "w"))
    eng = subprocess.Popen([os.path.join(TOOLS, "run-engine.sh"), str(handshake_port(path)), "2"], env=env,
                           stdout=open(f"{work}/engine.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)
    failures = []
    try:
        wait_http(f"http://127.0.0.1:{port}/readiness", limit=600)
        statuses = []

        def client(c):
            for i in range(4):
                body = {"model": NAME, "messages": [{"role": "user", "content": f"client {c} says hi {i}"}],
                        "max_tokens": 16, "temperature": 0}
                status, raw = http("POST", f"http://127.0.0.1:{port}/v1/chat/completions", body, timeout=300)
                statuses.append((status, raw[:200]))

        threads = [threading.Thread(target=client, args=(c,)) for c in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        bad = [s for s in statuses if s[0] != 200]
        if bad:
            failures.append(f"{len(bad)} of {len(statuses)} requests failed: {bad[:2]}")
        status, raw = http("GET", f"http://127.0.0.1:{port}/workers")
        worker = json.loads(raw)["workers"][0]
        ranks = worker["load"]["ranks"]
        print(json.dumps(worker, indent=1))
        if len(ranks) != 2 or any(r["report_age_ms"] is None for r in ranks):
            failures.append(f"not every rank reported load (served requests): {ranks}")
        if any(r["in_flight"] != 0 for r in ranks):
            failures.append(f"requests left in flight: {ranks}")
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
            metrics = r.read().decode()
        zmq_lines = [l for l in metrics.splitlines() if 'connection_mode="zmq"' in l]
        print("\n".join(l for l in zmq_lines if l.startswith(("smg_worker_health", "shardgate_worker_rank_in_flight"))))
        if not any(l.startswith("smg_worker_health") for l in zmq_lines):
            failures.append('no smg_worker_health series with connection_mode="zmq"')
        print(f"{len(statuses) - len(bad)}/{len(statuses)} requests completed on a 2-rank group (logs in {work})")
    finally:
        os.killpg(eng.pid, signal.SIGTERM); eng.wait(); gw.terminate(); gw.wait()
    for f in failures:
        print("FAIL", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
