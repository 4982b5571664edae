#!/usr/bin/env python3
"""Differential and fault test of gRPC workers: differential.py's requests through shardgate in
front of a gRPC worker (SMG's servicer, or vllm-rs) against `vllm serve` on the same model,
greedy, identical answers; then a fault check through the gateway: the worker is killed
mid-request (the request fails cleanly, the worker goes dead), started again (ready again, and
it serves).

Opt-in (needs tools/real-vllm/setup.sh and tools/grpc-workers/setup.sh); stdlib only:

    python3 tests/real_vllm/grpc.py [--worker servicer|vllm-rs] [--cases basic|full]

Ports: SHARDGATE_TEST_PORT_BASE (default 18100) and the next 19. Exit status 0 = identical
answers and the fault check passed."""
import argparse, json, os, signal, subprocess, sys, threading, time
import http.client as http_client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from differential import HOME, MODEL, NAME, ROOT, cases, http, run_all, same, wait_http  # noqa: E402

GRPC_TOOLS = os.path.join(ROOT, "tools", "grpc-workers")
BASE = int(os.environ.get("SHARDGATE_TEST_PORT_BASE", "18100"))
GATEWAY, METRICS, WORKER, WORKER_HTTP, HANDSHAKE, REFERENCE = (BASE + i for i in range(6))


def start_worker(kind, work, n):
    log = open(f"{work}/worker-{n}.log", "w")
    if kind == "servicer":
        cmd = [os.path.join(GRPC_TOOLS, "run-servicer.sh"), str(WORKER)]
    else:
        cmd = [os.path.join(GRPC_TOOLS, "run-vllm-rs.sh"), str(WORKER), str(WORKER_HTTP), str(HANDSHAKE)]
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def worker_status(base):
    status, raw = http("GET", base + "/workers")
    workers = json.loads(raw)["workers"] if status == 200 else []
    return [(w["connection_mode"], w["status"]) for w in workers]


def wait_status(base, want, limit):
    deadline = time.time() + limit
    while time.time() < deadline:
        if worker_status(base) == [("grpc", want)]:
            return True
        time.sleep(0.5)
    return False


def fault_check(base, kind, work, worker):
    """Kill the worker with a long request in flight, then start it again."""
    failures = []
    answer = {}

    started = threading.Event()

    def long_request():
        # Streamed, so the kill comes after the first token however fast the engine is.
        body = {"model": NAME, "prompt": "1, 2, 3,", "max_tokens": 1000, "temperature": 0, "ignore_eos": True,
                "stream": True}
        events = answer.setdefault("events", [])
        try:
            host, port = base.split("//")[1].split(":")
            conn = http_client.HTTPConnection(host, int(port), timeout=120)
            conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
            for line in conn.getresponse():
                line = line.decode().strip()
                if line.startswith("data: "):
                    events.append(line[6:])
                    started.set()
        except Exception as e:  # the connection itself failing is not a clean answer
            answer["error"] = repr(e)
        started.set()

    t = threading.Thread(target=long_request)
    t.start()
    started.wait(120)
    stop(worker)
    t.join(60)
    events = answer.get("events", [])
    if t.is_alive() or "error" in answer or events[-1:] != ["[DONE]"] or '"error"' not in "".join(events[-2:-1]):
        failures.append(f"request in flight on the killed worker did not end with an error event: {events[-2:]} {answer.get('error')}")
    if not wait_status(base, "dead", 30):
        failures.append(f"worker not dead after the kill: {worker_status(base)}")
    status, _ = http("POST", base + "/v1/completions", {"model": NAME, "prompt": "hi", "max_tokens": 2})
    if status < 500:
        failures.append(f"a request with the only worker dead answered {status}")
    worker = start_worker(kind, work, 2)
    if not wait_status(base, "ready", 600):
        failures.append(f"worker not ready after its restart: {worker_status(base)}")
    status, raw = http("POST", base + "/v1/completions", {"model": NAME, "prompt": "hi", "max_tokens": 2, "temperature": 0})
    if status != 200:
        failures.append(f"after the restart: {status} {raw[:200]!r}")
    return worker, failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", default="servicer", choices=["servicer", "vllm-rs"])
    ap.add_argument("--cases", default="basic", choices=["basic", "full"])
    ap.add_argument("--gateway", default=os.path.join(ROOT, "target", "release", "shardgate"))
    ap.add_argument("--no-reference", action="store_true", help="only the gateway side and the fault check")
    args = ap.parse_args()
    reqs = cases(args.cases)
    work = f"/tmp/sg-grpc-{os.getpid()}"
    os.makedirs(work, exist_ok=True)
    base = f"http://127.0.0.1:{GATEWAY}"
    failures = []

    worker = start_worker(args.worker, work, 1)
    gw = subprocess.Popen([args.gateway, "launch", "--worker-urls", f"grpc://127.0.0.1:{WORKER}", "--model-path", MODEL,
                           "--served-model-name", NAME, "--host", "127.0.0.1", "--port", str(GATEWAY),
                           "--tool-call-parser", "qwen", "--metrics-port", str(METRICS)],
                          stderr=open(f"{work}/gateway.log", "w"))
    try:
        wait_http(f"{base}/readiness", 600)
        if worker_status(base) != [("grpc", "ready")]:
            failures.append(f"GET /workers: {worker_status(base)}")
        ours = run_all(base, reqs)
        _, metrics = http("GET", f"http://127.0.0.1:{METRICS}/metrics")
        if b'connection_mode="grpc"' not in metrics:
            failures.append("no connection_mode=\"grpc\" series in /metrics")
        # The gateway's own pipeline over a gRPC worker is SMG's router_type="grpc".
        served = [l for l in metrics.decode().splitlines()
                  if l.startswith('smg_router_requests_total{router_type="grpc",connection_mode="grpc"')]
        # Every request the gateway answered 200 ran a generation (refusals are counted as errors).
        generated = sum(1 for r in ours if r.get("status") == 200)
        if sum(float(l.rsplit(" ", 1)[1]) for l in served) != generated:
            failures.append(f"smg_router_requests_total under router_type=grpc is not {generated}: {served}")
        worker, faults = fault_check(base, args.worker, work, worker)
        failures += faults
    finally:
        stop(worker)
        gw.terminate()
        gw.wait()

    diffs = []
    if not args.no_reference:
        env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", VLLM_CPU_KVCACHE_SPACE="1")
        ref = subprocess.Popen([os.path.join(HOME, "venv", "bin", "vllm"), "serve", MODEL, "--served-model-name", NAME,
                                "--port", str(REFERENCE), "--dtype", "float32", "--max-model-len", "1024",
                                "--max-num-seqs", "8", "--enforce-eager",
                                "--tool-call-parser", "hermes", "--enable-auto-tool-choice"], env=env,
                               stdout=open(f"{work}/reference.log", "w"), stderr=subprocess.STDOUT,
                               start_new_session=True)
        try:
            wait_http(f"http://127.0.0.1:{REFERENCE}/v1/models", 600)
            theirs = run_all(f"http://127.0.0.1:{REFERENCE}", reqs)
        finally:
            stop(ref)
        diffs = [(r, a, b) for r, a, b in zip(reqs, ours, theirs) if not same(a, b)]
        for (kind, body), a, b in diffs:
            print(f"DIFF {kind} {json.dumps(body)[:200]}\n  shardgate: {json.dumps(a)[:600]}\n  vllm:      {json.dumps(b)[:600]}")
        print(f"{len(reqs) - len(diffs)}/{len(reqs)} requests identical over gRPC ({args.worker}) (logs in {work})")
        json.dump({"requests": reqs, "shardgate": ours, "vllm": theirs}, open(f"{work}/results.json", "w"), indent=1)
    for f in failures:
        print(f"FAULT CHECK: {f}")
    print(f"fault check: {'passed' if not failures else 'FAILED'}")
    sys.exit(1 if diffs or failures else 0)


if __name__ == "__main__":
    main()
