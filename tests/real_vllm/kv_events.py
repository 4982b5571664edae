#!/usr/bin/env python3
"""KV-cache events drive routing, against vLLM's own publisher and a real engine.

1. Gap recovery: the simulator advertises a KV-event publisher in its registration, and vLLM's
   own `ZmqEventPublisher` (imported from the real-vLLM venv) publishes there. One batch is
   "dropped" (kept in the replay buffer, never sent on PUB, as a PUB socket drops under load):
   the gateway must notice the sequence gap and fill it from the replay socket.
2. Routing: a real 2-rank engine group (`vllm serve --headless --data-parallel-size 2` with
   prefix caching and `--kv-events-config`) serves documents asked about several times, one
   request at a time, so load never decides. With the events, every repeat goes to the rank
   that holds its document; the engine's own `cached_tokens` (usage) must be higher than in a
   control run of the same requests on an engine without events (rank chosen by load alone).

    python3 tests/real_vllm/kv_events.py        (needs tools/real-vllm/setup.sh)
"""
import json, os, signal, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from differential import HOME, MODEL, NAME, ROOT, TOOLS, free_port, handshake_port, http, wait_http  # noqa: E402

GATEWAY = os.path.join(ROOT, "target", "release", "shardgate")
VENV_PYTHON = os.path.join(HOME, "venv", "bin", "python")

# vLLM's own publisher and event structs: one process, commands on stdin, one JSON line back.
PUBLISHER = r"""
import json, sys, time, msgspec
from vllm.distributed.kv_events import BlockStored, KVEventBatch, ZmqEventPublisher
pub = ZmqEventPublisher(0, endpoint=sys.argv[1], replay_endpoint=sys.argv[2])
enc = msgspec.msgpack.Encoder()
def stored(hashes, parent, first_token):
    return BlockStored(block_hashes=hashes, parent_block_hash=parent,
                       token_ids=list(range(first_token, first_token + 16 * len(hashes))),
                       block_size=16, lora_id=None, medium="GPU", lora_name=None)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    batch = KVEventBatch(ts=time.time(), events=[stored(cmd["hashes"], cmd["parent"], cmd["first_token"])])
    if cmd.get("drop"):
        # Numbered and buffered for replay, never sent: a PUB drop.
        pub._buffer.append((next(pub._seq_gen), enc.encode(batch)))
    else:
        pub.publish(batch)
    time.sleep(0.3)
    print(json.dumps({"done": True}), flush=True)
"""


def kv_ranks(port):
    _, raw = http("GET", f"http://127.0.0.1:{port}/workers")
    return [r.get("kv_events") for r in json.loads(raw)["workers"][0]["load"]["ranks"]]


def engine_up(eng, port):
    if eng.poll() is not None:
        raise RuntimeError(f"the engine exited with {eng.returncode} (see its log)")
    try:
        return http("GET", f"http://127.0.0.1:{port}/readiness", timeout=5)[0] == 200
    except OSError:
        return False


def wait_for(what, check, limit=30):
    deadline = time.time() + limit
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise RuntimeError(f"timed out waiting for {what}")


def gap_recovery(work, failures):
    pub_port, replay_port, port = free_port(), free_port(), free_port()
    path = f"{work}/sim-engine"
    sim = subprocess.Popen([os.path.join(ROOT, "target", "release", "shardgate-sim"), "--worker-url", f"ipc://{path}",
                            "--model-path", MODEL, "--kv-events-endpoint", f"tcp://*:{pub_port}",
                            "--kv-events-replay-endpoint", f"tcp://*:{replay_port}"],
                           stderr=open(f"{work}/sim.log", "w"))
    gw = subprocess.Popen([GATEWAY, "launch", "--worker-urls", f"ipc://{path}", "--model-path", MODEL,
                           "--served-model-name", NAME, "--host", "127.0.0.1", "--port", str(port)],
                          stderr=open(f"{work}/gateway-sim.log", "w"))
    # A wildcard host makes vLLM's publisher bind (any other tcp host, it connects out).
    publisher = subprocess.Popen([VENV_PYTHON, "-c", PUBLISHER, f"tcp://*:{pub_port}", f"tcp://*:{replay_port}"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(f"{work}/pub.log", "w"),
                                 text=True)
    try:
        json.loads(publisher.stdout.readline())
        wait_http(f"http://127.0.0.1:{port}/readiness", limit=60)
        wait_for("the subscription", lambda: kv_ranks(port)[0])
        time.sleep(1.0)  # a SUB socket sees only what is published after it joined

        def send(**cmd):
            publisher.stdin.write(json.dumps(cmd) + "\n")
            publisher.stdin.flush()
            json.loads(publisher.stdout.readline())

        send(hashes=[1, 2, 3, 4], parent=None, first_token=0)
        send(hashes=[5, 6], parent=4, first_token=64, drop=True)
        send(hashes=[7], parent=6, first_token=96)
        view = wait_for("three batches", lambda: (lambda v: v if v and v["batches"] >= 3 else None)(kv_ranks(port)[0]))
        print("after a dropped batch:", json.dumps(view))
        want = {"cached_blocks": 7, "exact": True, "gaps_filled": 1, "gaps_lost": 0}
        got = {k: view[k] for k in want}
        if got != want:
            failures.append(f"gap recovery: want {want}, got {got}")
    finally:
        publisher.kill(); gw.terminate(); sim.terminate()
        for p in (publisher, gw, sim):
            p.wait()


DOCS = [" ".join(f"document {d} line {i}: the {w} of item {d * 31 + i} is {(d * 7 + i * 13) % 97}."
                 for i, w in enumerate(["colour", "weight", "owner", "origin", "price", "size"] * 5))
        for d in range(6)]
QUESTIONS = ["What is the colour of the first item?", "Who owns the third item?", "Sum the last two values."]


def routing_run(work, with_events):
    tag = "events" if with_events else "control"
    path = f"{work}/engine-{tag}"
    port = free_port()
    # The CPU attention backend takes multiples of 32.
    extra = ["--enable-prefix-caching", "--block-size", "32"]
    if with_events:
        pub = free_port()
        extra += ["--kv-events-config", json.dumps({
            "enable_kv_cache_events": True, "publisher": "zmq", "endpoint": f"tcp://*:{pub}",
            "replay_endpoint": f"tcp://*:{free_port()}", "topic": ""})]
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", VLLM_CPU_KVCACHE_SPACE="1")
    gw = subprocess.Popen([GATEWAY, "launch", "--worker-urls", f"ipc://{path}", "--model-path", MODEL,
                           "--served-model-name", NAME, "--host", "127.0.0.1", "--port", str(port),
                           "--zmq-engine-count", "2"], stderr=open(f"{work}/gateway-{tag}.log", "w"))
    eng = subprocess.Popen([os.path.join(TOOLS, "run-engine.sh"), str(handshake_port(path)), "2", *extra], env=env,
                           stdout=open(f"{work}/engine-{tag}.log", "w"), stderr=subprocess.STDOUT,
                           start_new_session=True)
    try:
        wait_for("the engine group", lambda: engine_up(eng, port), limit=900)
        if with_events:
            wait_for("both ranks' subscriptions", lambda: all(kv_ranks(port)), limit=60)
            time.sleep(1.0)
        cached = []
        for round_, question in enumerate(QUESTIONS):
            for doc in DOCS:
                body = {"model": NAME, "messages": [{"role": "user", "content": doc + "\n" + question}],
                        "max_tokens": 4, "temperature": 0}
                status, raw = http("POST", f"http://127.0.0.1:{port}/v1/chat/completions", body, timeout=300)
                if status != 200:
                    raise RuntimeError(f"{tag}: {status} {raw[:200]}")
                usage = json.loads(raw)["usage"]
                if round_ > 0:
                    cached.append(usage["prompt_tokens_details"]["cached_tokens"])
                time.sleep(0.3 if with_events else 0)  # the step's events reach the subscribers
        ranks = kv_ranks(port)
        return sum(cached), usage["prompt_tokens"], ranks
    finally:
        os.killpg(eng.pid, signal.SIGTERM); eng.wait(); gw.terminate(); gw.wait()


def main():
    work = f"/tmp/sg-kv-events-{os.getpid()}"
    os.makedirs(work, exist_ok=True)
    failures = []
    gap_recovery(work, failures)
    control, prompt_tokens, _ = routing_run(work, with_events=False)
    exact, _, ranks = routing_run(work, with_events=True)
    repeats = len(DOCS) * (len(QUESTIONS) - 1)
    print(f"cached prompt tokens over {repeats} repeated documents (~{prompt_tokens} prompt tokens each): "
          f"load only {control}, KV events {exact} ({exact / max(control, 1):.2f}x)")
    print("ranks with events:", json.dumps(ranks))
    if exact <= control:
        failures.append(f"KV events did not raise the engine's cached tokens: {exact} <= {control}")
    for f in failures:
        print("FAIL", f)
    print(f"logs in {work}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
