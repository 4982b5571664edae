#!/usr/bin/env python3
"""Handshake shim between `shardgate-sim` and a gateway on the vLLM engine-core wire.

Why: vllm-rs 0.33.0 and SMG (1.11-1.13) decode the engine's registration
(`EngineCoreReadyResponse`) and every output batch's `scheduler_stats` with required fields
that shardgate-sim leaves out, so neither attaches to the sim as it is:
  "messagepack decode failed for ...EngineCoreReadyResponse: missing field `world_size`"
  "messagepack decode failed for ...EngineCoreOutputs: missing field `prefix_cache_stats`"
No Rust may change for the harness, so this relays the handshake and patches both.

How (one engine, vLLM order: HELLO -> INIT -> registration on every input -> READY):
  sim --handshake tcp://127.0.0.1:LISTEN  ->  shim ROUTER  ->  DEALER (same identity)  ->  gateway
  The INIT the gateway sends is rewritten so that the sim's input sockets (gateway -> engine:
  ADD / ABORT / UTILITY, a message per request) connect to the shim, which relays them in C
  (zmq.proxy, one thread per input). The registration, the first frame on each input, gets the
  missing keys added. With --outputs patch (the default) the output addresses are rewritten too,
  and each output batch is relayed with its scheduler_stats completed by a byte-level patch
  (no decode); --outputs relay relays them unchanged, --outputs direct leaves the sim connected
  straight to the gateway's output socket. READY is held until every input's registration has
  been relayed (the sim sends them before READY; the relay keeps that order).

Usage: hs_shim.py --listen tcp://127.0.0.1:P --gateway tcp://127.0.0.1:HS --dir DIR
"""
import argparse
import os
import sys
import threading

import msgpack
import zmq

# Values a one-GPU vLLM engine would report; only keys the sim does not send are added.
EXTRA = {
    "world_size": 1,
    "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "decode_context_parallel_size": 1,
    "effective_data_parallel_size": 1,
    "max_num_batched_tokens": 8192,
    "supports_lora": False,
    "max_loras": 0,
    "enable_sleep_mode": False,
    "supports_draft_weight_updates": False,
    "instance_id": "shardgate-sim-0",
    "kv_cache_size_tokens": 16384 * 16,
    "kv_cache_max_concurrency": 32.0,
    "effective_attention_block_size": 16,
}


# Keys vllm-rs 0.33.0 and SMG require in every `scheduler_stats` (vLLM's SchedulerStats
# defaults); the sim sends only the six load fields, as a map16 ending in kv_cache_usage.
STATS_EXTRA = {
    "prefix_cache_stats": {
        "reset": False, "requests": 0, "queries": 0, "hits": 0,
        "preempted_requests": 0, "preempted_queries": 0, "preempted_hits": 0,
    },
    "connector_prefix_cache_stats": None,
    "kv_cache_eviction_events": [],
    "spec_decoding_stats": None,
    "kv_connector_stats": None,
    "cudagraph_stats": None,
    "perf_stats": None,
}
STATS_HEAD = b"\xde\x00\x06\xb0num_running_reqs"
STATS_TAIL = b"\xaekv_cache_usage\xcb"


def stats_patcher(extra):
    """Byte-level patch of one output batch: map16 header 6 -> 6 + len(extra), and the extra
    pairs appended after kv_cache_usage's float64. No decode: a few µs even for 2,000 outputs."""
    head = b"\xde" + (6 + len(extra)).to_bytes(2, "big") + STATS_HEAD[3:]
    tail = b"".join(msgpack.packb(k) + msgpack.packb(v) for k, v in extra.items())

    def patch(b):
        i = b.rfind(STATS_HEAD)
        if i < 0:
            return b  # no scheduler_stats (nil) in this batch
        j = b.find(STATS_TAIL, i) + len(STATS_TAIL) + 8
        return b"".join((b[:i], head, b[i + len(STATS_HEAD):j], tail, b[j:]))

    return patch


def log(*a):
    print("hs_shim:", *a, file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True, help="tcp://127.0.0.1:P the sim dials")
    ap.add_argument("--gateway", required=True, help="the gateway's handshake address")
    ap.add_argument("--dir", required=True, help="directory for the shim's ipc sockets")
    ap.add_argument("--outputs", choices=["direct", "patch", "relay"], default="patch",
                    help="engine -> gateway outputs: direct (sim connects to the gateway), "
                    "patch (relayed here, scheduler_stats completed: the peers need it), "
                    "relay (relayed unchanged: the same hop for a gateway that needs no patch)")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    ctx = zmq.Context.instance()
    front = ctx.socket(zmq.ROUTER)  # the sim's handshake DEALER dials this
    front.bind(args.listen)
    log("listening", args.listen, "->", args.gateway)

    ident, hello = front.recv_multipart()
    back = ctx.socket(zmq.DEALER)
    back.setsockopt(zmq.IDENTITY, ident)
    back.setsockopt(zmq.LINGER, 1000)
    back.connect(args.gateway)
    back.send(hello)

    init = back.recv()
    meta = msgpack.unpackb(init, raw=False, strict_map_key=False)
    addrs = meta["addresses"]
    pairs = []  # (sim-side DEALER bound here, gateway-side DEALER dialing the gateway)
    for k, a in enumerate(addrs["inputs"]):
        gw = ctx.socket(zmq.DEALER)
        gw.setsockopt(zmq.IDENTITY, ident)
        for o in (zmq.SNDHWM, zmq.RCVHWM, zmq.LINGER):
            gw.setsockopt(o, 0)
        gw.connect(a)
        sim = ctx.socket(zmq.DEALER)
        for o in (zmq.SNDHWM, zmq.RCVHWM, zmq.LINGER):
            sim.setsockopt(o, 0)
        mine = f"ipc://{os.path.abspath(args.dir)}/shim-in-{k}.sock"
        sim.bind(mine)
        addrs["inputs"][k] = mine
        pairs.append((sim, gw))
    out_pairs = []  # (PULL bound here for the sim, PUSH dialing the gateway's output)
    if args.outputs != "direct":
        for k, a in enumerate(addrs["outputs"]):
            pull = ctx.socket(zmq.PULL)
            pull.setsockopt(zmq.RCVHWM, 0)
            mine = f"ipc://{os.path.abspath(args.dir)}/shim-out-{k}.sock"
            pull.bind(mine)
            push = ctx.socket(zmq.PUSH)
            push.setsockopt(zmq.SNDHWM, 0)
            push.setsockopt(zmq.LINGER, 1000)
            push.connect(a)
            addrs["outputs"][k] = mine
            out_pairs.append((pull, push))
    front.send_multipart([ident, msgpack.packb(meta, use_bin_type=True)])
    log("INIT relayed; inputs:", addrs["inputs"], "outputs:", addrs["outputs"], args.outputs)

    for sim, gw in pairs:
        frames = sim.recv_multipart()
        reg = msgpack.unpackb(frames[-1], raw=False, strict_map_key=False)
        added = {k: v for k, v in EXTRA.items() if k not in reg}
        reg.update(added)
        frames[-1] = msgpack.packb(reg, use_bin_type=True)
        gw.send_multipart(frames)
        log("registration relayed, added", sorted(added))

    # READY (and anything later on the handshake socket) in both directions.
    def hs_relay():
        poller = zmq.Poller()
        poller.register(front, zmq.POLLIN)
        poller.register(back, zmq.POLLIN)
        while True:
            for s, _ in poller.poll():
                if s is front:
                    back.send_multipart(front.recv_multipart()[1:])
                else:
                    front.send_multipart([ident] + back.recv_multipart())

    patch = stats_patcher(STATS_EXTRA) if args.outputs == "patch" else (lambda b: b)

    def out_relay(pull, push):
        recv, send = pull.recv_multipart, push.send_multipart
        while True:
            frames = recv()
            frames[0] = patch(frames[0])
            send(frames)

    threads = [threading.Thread(target=hs_relay, daemon=True)]
    threads += [threading.Thread(target=zmq.proxy, args=p, daemon=True) for p in pairs]
    threads += [threading.Thread(target=out_relay, args=p, daemon=True) for p in out_pairs]
    for t in threads:
        t.start()
    log("relaying")
    threads[0].join()


if __name__ == "__main__":
    main()
