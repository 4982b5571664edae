#!/usr/bin/env python3
"""`shardgate serve --backend vllm` on a real vLLM engine: it starts the engine itself, answers a
chat, and when the engine's whole process tree is killed with SIGKILL (a stream in flight) it
fails that stream cleanly, restarts the engine and answers again; SIGTERM then stops everything.

Opt-in (needs tools/real-vllm/setup.sh): run with any python3 (stdlib only):

    python3 tests/real_vllm/serve.py [--gateway target/release/shardgate] [--connection-mode zmq|grpc|http]

`--connection-mode grpc` runs `vllm serve --grpc` (SMG's servicer, from tools/grpc-workers/
setup.sh's overlay venv), `http` plain `vllm serve`; the checks are the same, but a relayed
(HTTP) stream on a killed engine is cut off rather than ended with an error event.

Prints the time from the kill to the worker being ready again and to the first answer after
it. Exit status 0 = every check held; logs in /tmp/sg-serve-<pid>."""
import argparse, json, os, signal, socket, subprocess, threading, time, urllib.request

from http.client import HTTPConnection, HTTPException

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOME = os.environ.get("REAL_VLLM_HOME", os.path.expanduser("~/.cache/real-vllm"))
MODEL = os.environ.get("REAL_VLLM_MODEL", os.path.join(HOME, "tiny-chat"))
NAME = "tiny-chat"
# What the engine needs on this CPU (tools/real-vllm/run-engine.sh): passed through by serve.
ENGINE_FLAGS = ["--dtype", "float32", "--max-model-len", "1024", "--max-num-seqs", "8", "--enforce-eager"]
CHAT = {"model": NAME, "messages": [{"role": "user", "content": "Hello!"}], "temperature": 0, "max_tokens": 16}


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def http(method, url, body=None, timeout=120):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_for(what, check, limit):
    deadline = time.time() + limit
    while time.time() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"FAIL: {what} not within {limit} s")


def worker(base):
    return json.loads(http("GET", f"{base}/workers")[1])["workers"][0]


def group_members(pgid):
    """Live processes of a process group (zombies are gone already)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(pid))
    return out


def chat(base):
    status, raw = http("POST", f"{base}/v1/chat/completions", CHAT)
    if status != 200:
        raise SystemExit(f"FAIL: chat answered {status}: {raw[:300]!r}")
    return json.loads(raw)["choices"][0]["message"]["content"]


def stream_until_the_end(port, started, events):
    """A long stream; `started` is set at its first token, `events` gets its data payloads."""
    conn = HTTPConnection("127.0.0.1", port, timeout=300)
    body = dict(CHAT, stream=True, max_tokens=900, ignore_eos=True)
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    try:
        for line in conn.getresponse():
            line = line.decode().strip()
            if line.startswith("data: "):
                events.append(line[6:])
                started.set()
            if line == "data: [DONE]":
                return
    except (OSError, ValueError, HTTPException):
        return  # cut off: the caller looks at what arrived


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gateway", default=os.path.join(ROOT, "target", "release", "shardgate"))
    ap.add_argument("--connection-mode", default="zmq", choices=["zmq", "grpc", "http"])
    args = ap.parse_args()
    venv = "grpc-venv" if args.connection_mode == "grpc" else "venv"
    work = f"/tmp/sg-serve-{os.getpid()}"
    sockets = f"{work}/zmq"
    os.makedirs(work, exist_ok=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", VLLM_CPU_KVCACHE_SPACE="1", SHARDGATE_ZMQ_SOCKET_DIR=sockets)
    env.pop("VIRTUAL_ENV", None)
    cmd = [args.gateway, "serve", "--backend", "vllm", "--connection-mode", args.connection_mode, "--model", MODEL,
           "--engine-python", os.path.join(HOME, venv, "bin", "python"), "--served-model-name", NAME,
           "--worker-base-port", str(free_port()), "--host", "127.0.0.1",
           "--port", str(port), "--metrics-port", str(free_port()), "--history-backend", "memory",
           "--engine-shutdown-timeout-secs", "20",
           *ENGINE_FLAGS]
    print("$", " ".join(cmd))
    started = time.time()
    gw = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=open(f"{work}/serve.log", "w"))
    engines = []
    try:
        wait_for("the first engine ready", lambda: http("GET", f"{base}/readiness", timeout=5)[0] == 200, 600)
        print(f"ready {time.time() - started:.1f} s after the start")
        print(f"chat: {chat(base)!r}")
        first = worker(base)["engine"]
        tree = group_members(first["pid"])
        engines.append(first["pid"])
        print(f"engine pid {first['pid']}, its process group: {tree}")

        stream_started, events = threading.Event(), []
        reader = threading.Thread(target=stream_until_the_end, args=(port, stream_started, events), daemon=True)
        reader.start()
        if not stream_started.wait(120):
            raise SystemExit("FAIL: the stream never started")
        os.killpg(first["pid"], signal.SIGKILL)
        killed = time.time()
        reader.join(60)
        if args.connection_mode == "http":
            # A relay does not read what it passes on: the client sees the stream cut off.
            if reader.is_alive() or events[-1:] == ["[DONE]"]:
                raise SystemExit(f"FAIL: the relayed stream on the killed engine was not cut off: {events[-2:]}")
            print(f"stream in flight: {len(events)} chunks, then cut off")
        else:
            if reader.is_alive() or events[-1:] != ["[DONE]"] or '"error"' not in events[-2]:
                raise SystemExit(f"FAIL: the stream on the killed engine did not end with an error: {events[-2:]}")
            print(f"stream in flight: {len(events) - 2} chunks, then {events[-2]}")

        def back():
            w = worker(base)
            return w["status"] == "ready" and w["engine"]["restarts"] == 1
        wait_for("the restarted engine ready", back, 600)
        ready_s = time.time() - killed
        text = chat(base)
        answer_s = time.time() - killed
        again = worker(base)["engine"]
        engines.append(again["pid"])
        if again["last_exit"] != "killed by signal 9 (SIGKILL)" or group_members(first["pid"]):
            raise SystemExit(f"FAIL: the killed engine is not reported or not gone: {again}")
        print(f"chat after the restart: {text!r}")
        print(f"restart: SIGKILL -> worker ready in {ready_s:.1f} s, -> first answer in {answer_s:.1f} s "
              f"(engine pid {first['pid']} -> {again['pid']})")
    finally:
        gw.send_signal(signal.SIGTERM)
        try:
            gw.wait(90)
        except subprocess.TimeoutExpired:
            gw.kill()
            raise SystemExit(f"FAIL: serve did not exit within 90 s of SIGTERM (logs in {work})")
    left = [p for pgid in engines for p in group_members(pgid)]
    socks = [f for f in os.listdir(sockets) if f.endswith(".sock")] if os.path.isdir(sockets) else []
    if gw.returncode != 0 or left or socks:
        raise SystemExit(f"FAIL: after SIGTERM: exit {gw.returncode}, processes {left}, socket files {socks}")
    print(f"SIGTERM: serve exited 0, no engine process and no socket file left (logs in {work})")


if __name__ == "__main__":
    main()
