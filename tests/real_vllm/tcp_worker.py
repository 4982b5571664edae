#!/usr/bin/env python3
"""A real vLLM headless engine attached over TCP: the gateway's worker is tcp://127.0.0.1:PORT,
the engine dials it with --data-parallel-address 127.0.0.1 --data-parallel-rpc-port PORT (as a
headless engine on another host does with the front end's address) and its data connections
go to the tcp:// addresses INIT gives. Requests must complete, the gateway's log must show the
engine's data connections accepted on TCP sockets, and the metrics listener must carry the
engine's load under vLLM's names (vllm:num_requests_running, vllm:kv_cache_usage_perc, and
vllm:cache_config_info with the engine's block size).

    python3 tests/real_vllm/tcp_worker.py [--gateway PATH]   (needs tools/real-vllm/setup.sh)

Ports: the handshake takes a free one in SHARDGATE_TEST_PORTS (default 20000-20999).
Exit status 0 = the engine served over TCP and the checks passed."""
import argparse, os, re, signal, socket, subprocess, sys, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from differential import MODEL, NAME, ROOT, TOOLS, free_port, http, wait_http  # noqa: E402


def free_port_in(first, last):
    for port in range(first + os.getpid() % (last - first), last + 1):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise SystemExit(f"no free port in {first}-{last}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gateway", default=os.path.join(ROOT, "target", "release", "shardgate"))
    args = ap.parse_args()
    first, last = (int(p) for p in os.environ.get("SHARDGATE_TEST_PORTS", "20000-20999").split("-"))
    work = f"/tmp/sg-tcp-{os.getpid()}"
    os.makedirs(work, exist_ok=True)
    hs_port = free_port_in(first, last)
    port, metrics_port = free_port(), free_port()
    url = f"tcp://127.0.0.1:{hs_port}"
    gw = subprocess.Popen([args.gateway, "launch", "--worker-urls", url, "--model-path", MODEL,
                           "--served-model-name", NAME, "--host", "127.0.0.1", "--port", str(port),
                           "--metrics-port", str(metrics_port), "--shards", "2", "--log-level", "debug"],
                          stderr=open(f"{work}/gateway.log", "w"))
    eng = subprocess.Popen([os.path.join(TOOLS, "run-engine.sh"), str(hs_port), "1"],
                           stdout=open(f"{work}/engine.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)
    failures = []
    try:
        wait_http(f"http://127.0.0.1:{port}/readiness", limit=600)
        ok = 0
        for i in range(4):
            body = {"model": NAME, "messages": [{"role": "user", "content": f"say hi {i}"}],
                    "max_tokens": 12, "temperature": 0}
            status, raw = http("POST", f"http://127.0.0.1:{port}/v1/chat/completions", body, timeout=300)
            if status == 200:
                ok += 1
            else:
                failures.append(f"request {i}: {status} {raw[:200]!r}")
        log = open(f"{work}/gateway.log").read()
        tcp_peers = re.findall(r"tcp://127\.0\.0\.1:\d+: engine connected", log)
        # Two shards: an input and an output connection each.
        if len(tcp_peers) < 4:
            failures.append(f"expected the engine's 4 data connections on tcp sockets, saw {tcp_peers}")
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
            metrics = r.read().decode()
        vllm_lines = [l for l in metrics.splitlines() if l.startswith("vllm:")]
        print("\n".join(vllm_lines))
        for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
            if not any(l.startswith(name + "{") for l in vllm_lines):
                failures.append(f"no {name}")
        if not any(l.startswith("vllm:cache_config_info{") and 'block_size="' in l for l in vllm_lines):
            failures.append("no vllm:cache_config_info with the engine's block size")
        print(f"{ok}/4 requests completed over {url}; {len(tcp_peers)} tcp data connections (logs in {work})")
    finally:
        os.killpg(eng.pid, signal.SIGTERM); eng.wait(); gw.terminate(); gw.wait()
    for f in failures:
        print("FAIL", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
