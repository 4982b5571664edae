"""Runs our TokenSpeed wire through TokenSpeed's own code and writes the fixture the Rust tests
(tests/wire_tokenspeed.rs) read without Python.

    tests/wire/tokenspeed/regen.sh        # writes requests.json with cargo, then runs this

Loads the wire modules of the PyPI package tokenspeed==0.1.1 (runtime/engine/io_struct.py,
zmq_wire.py, zmq_msgpack.py, logprobs.py, runtime/sampling/sampling_params.py) from the wheel,
which `pip download --no-deps` fetches into $SHARDGATE_CACHE/tokenspeed (default
~/.cache/shardgate/tokenspeed), never into the repository. Their imports that do not touch the
text wire are stubbed: torch (tensors ride only with multimodal inputs), the multimodal inputs
class (always nil here) and the env registry (only the pickle-IPC escape hatch is read). The
package __init__ files are skipped (they pull in the whole engine). Needs msgspec, numpy and
pyzmq; without them it makes a venv in the cache dir and re-runs itself there.

Input: requests.json (our encoded ADD/ABORT payloads and INIT). Output: tokenspeed-0.1.1.json:
- requests: each of ours decoded by zmq_wire.decode_request_frames (which also resolves the seed,
  normalizes, and checks n) and validated as MsgpackRecvSocket does (output logprobs enabled);
- init: our INIT decoded by zmq_wire.decode_init;
- status, registration, dead: handshake messages and the sentinel as the engine encodes them;
- batches: BatchTokenIDOutSlim encoded by the engine's MsgpackEncoder, with their values;
- python_adds: TokenizedGenerateReqInput encoded by the engine's own encoder (all 25 fields);
- malformed: payloads and whether the engine's decoder accepts them.
"""
import json
import os
import subprocess
import sys
import types
import zipfile
import zlib
from pathlib import Path

VERSION = "0.1.1"
HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("SHARDGATE_CACHE", Path.home() / ".cache" / "shardgate")) / "tokenspeed"
WIRE_FILES = [
    "tokenspeed/runtime/engine/io_struct.py",
    "tokenspeed/runtime/engine/zmq_wire.py",
    "tokenspeed/runtime/engine/zmq_msgpack.py",
    "tokenspeed/runtime/engine/logprobs.py",
    "tokenspeed/runtime/sampling/sampling_params.py",
]


def ensure_python_deps():
    try:
        import msgspec, numpy, zmq  # noqa: F401
    except ImportError:
        venv = CACHE / "venv"
        python = venv / "bin" / "python"
        if not python.exists():
            CACHE.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q", "msgspec", "numpy", "pyzmq"], check=True)
        if Path(sys.prefix).resolve() == venv.resolve():
            raise
        os.execv(str(python), [str(python), __file__, *sys.argv[1:]])


def ensure_wire_sources() -> Path:
    src = CACHE / f"src-{VERSION}"
    if all((src / f).exists() for f in WIRE_FILES):
        return src
    wheel = CACHE / f"tokenspeed-{VERSION}-py3-none-any.whl"
    if not wheel.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"tokenspeed=={VERSION}", "-d", str(CACHE)],
            check=True,
        )
    with zipfile.ZipFile(wheel) as z:
        for f in WIRE_FILES:
            z.extract(f, src)
    return src


def load_tokenspeed(src: Path):
    """Imports the real wire modules with stubs for what they import but the wire never uses."""
    import importlib

    import msgspec

    def package(name, path=None):
        m = types.ModuleType(name)
        m.__path__ = [str(path)] if path else []
        sys.modules[name] = m

    for name in ["tokenspeed", "tokenspeed.runtime", "tokenspeed.runtime.engine", "tokenspeed.runtime.sampling"]:
        package(name, src / name.replace(".", "/"))
    package("tokenspeed.runtime.utils")
    package("tokenspeed.runtime.multimodal")

    torch = types.ModuleType("torch")
    torch.Tensor = type("Tensor", (), {})
    torch.dtype = type("dtype", (), {})
    sys.modules["torch"] = torch

    env = types.ModuleType("tokenspeed.runtime.utils.env")
    env.envs = types.SimpleNamespace(TOKENSPEED_USE_PICKLE_IPC=types.SimpleNamespace(get=lambda: False))
    sys.modules[env.__name__] = env

    mm = types.ModuleType("tokenspeed.runtime.multimodal.inputs")
    mm.MultimodalInputs = type("MultimodalInputs", (msgspec.Struct,), {}, array_like=True)
    sys.modules[mm.__name__] = mm

    return types.SimpleNamespace(
        io=importlib.import_module("tokenspeed.runtime.engine.io_struct"),
        wire=importlib.import_module("tokenspeed.runtime.engine.zmq_wire"),
        msgpack=importlib.import_module("tokenspeed.runtime.engine.zmq_msgpack"),
        sampling=importlib.import_module("tokenspeed.runtime.sampling.sampling_params"),
    )


def sampling_fields(sp):
    import msgspec

    out = {}
    for f in msgspec.structs.fields(sp):
        v = getattr(sp, f.name)
        if isinstance(v, set):
            v = sorted(v)
        out[f.name] = v
    return out


def request_fields(req):
    import msgspec

    out = {}
    for f in msgspec.structs.fields(req):
        v = getattr(req, f.name)
        if f.name == "sampling_params":
            v = sampling_fields(v)
        elif isinstance(v, msgspec.Struct):
            v = msgspec.to_builtins(v)
        out[f.name] = v
    return out


def validate(ts, obj):
    """MsgpackRecvSocket's verdict on a decoded request, as an engine with output logprobs."""
    sock = ts.msgpack.MsgpackRecvSocket(
        None, vocab_size=151936, enable_output_logprobs=True, supports_prompt_logprobs=False
    )
    return obj.validation_error or sock._validation_error(obj)


def our_requests(ts, ours):
    out = []
    for case in ours["requests"]:
        entry = {"name": case["name"], "type": case["type"], "hex": case["hex"], "error": None}
        frames = [bytes([case["type"]]), bytes.fromhex(case["hex"])]
        try:
            decoded = ts.wire.decode_request_frames(frames)
        except Exception as e:  # the engine drops the message
            entry["error"] = f"{type(e).__name__}: {e}"
            out.append(entry)
            continue
        if case["type"] == 0:
            (req,) = decoded
            # Before validating: the check resolves logprob_start_len in place.
            entry["decoded"] = request_fields(req)
            entry["validation_error"] = validate(ts, req)
            entry["decoded"]["crc32_rid"] = zlib.crc32(req.rid.encode()) & 0xFFFFFFFF
        else:
            entry["decoded"] = [a.rid for a in decoded]
        out.append(entry)
    return out


def batches(ts):
    enc = ts.io.MsgpackEncoder()
    cases = {
        "reference": dict(
            rids=["req-1", "req-2"],
            output_ids=[[450], [1576, 2]],
            finished_reasons=["", "stop"],
            prompt_tokens=[3, 5],
            completion_tokens=[1, 7],
            cached_tokens=[0, 0],
            output_token_logprobs_val=[[-0.25], []],
            output_token_logprobs_idx=[[450], []],
            engine_index=0,
            num_running=3,
            num_waiting=1,
            kv_active_pages=120,
            kv_total_pages=1000,
        ),
        "mixed_finishes_rank_5": dict(
            rids=["a", "b-" + "x" * 40, "c"],
            output_ids=[[151643, 7, 70000], [], [12]],
            finished_reasons=["length", "abort", ""],
            prompt_tokens=[1, 2, 40000],
            completion_tokens=[3, 0, 51],
            cached_tokens=[0, 0, 32768],
            output_token_logprobs_val=[[-0.0, -0.125, -17.5], [], [-3.0]],
            output_token_logprobs_idx=[[151643, 7, 70000], [], [12]],
            engine_index=5,
            num_running=200,
            num_waiting=70000,
            kv_active_pages=4000000000,
            kv_total_pages=5000000000,
        ),
        "no_snapshot": dict(
            rids=["r"],
            output_ids=[[1]],
            finished_reasons=[""],
            prompt_tokens=[4],
            completion_tokens=[1],
            cached_tokens=[0],
            output_token_logprobs_val=[[]],
            output_token_logprobs_idx=[[]],
        ),
        "long_delta": dict(
            rids=["nonstream"],
            output_ids=[list(range(1000, 1300))],
            finished_reasons=["stop"],
            prompt_tokens=[9],
            completion_tokens=[300],
            cached_tokens=[0],
            output_token_logprobs_val=[[-0.5 * (i + 1) for i in range(300)]],
            output_token_logprobs_idx=[list(range(1000, 1300))],
            engine_index=65535,
            num_running=1,
            num_waiting=0,
            kv_active_pages=1,
            kv_total_pages=1,
        ),
        "empty": dict(
            rids=[],
            output_ids=[],
            finished_reasons=[],
            prompt_tokens=[],
            completion_tokens=[],
            cached_tokens=[],
            output_token_logprobs_val=[],
            output_token_logprobs_idx=[],
            engine_index=1,
            num_running=0,
            num_waiting=0,
            kv_active_pages=0,
            kv_total_pages=100,
        ),
    }
    out = []
    for name, fields in cases.items():
        slim = ts.io.BatchTokenIDOutSlim(**fields)
        frames = enc.encode(slim)
        assert len(frames) == 1, "the text path has no aux frames"
        import msgspec

        values = msgspec.structs.asdict(slim)
        out.append({"name": name, "fields": values, "hex": bytes(frames[0]).hex()})
    return out


def python_adds(ts):
    io, SP = ts.io, ts.sampling.SamplingParams
    enc = io.MsgpackEncoder()
    cases = {
        "full_greedy": io.TokenizedGenerateReqInput(
            rid="py-1",
            input_ids=[1, 2, 3],
            sampling_params=SP(max_new_tokens=8, temperature=0.0, stop_token_ids=[2, 5]),
            stream=True,
        ),
        "full_sampled": io.TokenizedGenerateReqInput(
            rid="py-2",
            input_ids=list(range(100, 140)),
            sampling_params=SP(
                max_new_tokens=300,
                temperature=0.8,
                top_p=0.95,
                top_k=40,
                seed=7,
                stop="END",
                ignore_eos=True,
                stream_interval=4,
                logit_bias={"5": -1.5},
            ),
            return_logprob=True,
        ),
        "n_two": io.TokenizedGenerateReqInput(
            rid="py-3", input_ids=[9], sampling_params=SP(n=2, max_new_tokens=None), stream=True
        ),
        "top_k_too_large": io.TokenizedGenerateReqInput(
            rid="py-4", input_ids=[9], sampling_params=SP(top_k=128), stream=True
        ),
        "client_validation_error": io.TokenizedGenerateReqInput(
            rid="py-5", input_ids=[9], sampling_params=SP(), validation_error="from the client"
        ),
    }
    out = []
    for name, req in cases.items():
        frames = enc.encode(req)
        fields = request_fields(req)
        fields["sampling_params"]["stop_list"] = (
            [] if req.sampling_params.stop is None else [req.sampling_params.stop]
        )
        # What the engine does with these bytes: decode, finalize, validate.
        (decoded,) = ts.wire.decode_request_frames([b"\x00", bytes(frames[0])])
        out.append(
            {
                "name": name,
                "fields": fields,
                "hex": bytes(frames[0]).hex(),
                "engine_validation_error": validate(ts, decoded),
            }
        )
    return out


def malformed(ts):
    import msgspec

    enc = msgspec.msgpack.Encoder()
    tag = "TokenizedGenerateReqInput"
    # Valid values for every field, so each case breaks exactly one thing.
    sampling = [None, None, None, 1.0, 1.0, -1, 0.0, 0.0, 0.0, 1.0, 0, None, None, None, None, False, True, True,
                False, None, None, None, None, None, None, 1, None, 0, False]
    request = [tag, "x", None, None, [1], sampling, False, -1, 0, None, False, None, None, None, False, 0.0,
               None, None, None, None, None, None, None, None, None]
    assert len(sampling) == 29 and len(request) == 25

    def req(**change):
        r = list(request)
        for i, v in change.items():
            r[int(i[1:])] = v
        return enc.encode(r)

    def samp(i, v):
        s = list(sampling)
        s[i] = v
        return req(f5=s)

    cases = {
        "full_valid": (0, req()),
        "map_encoded": (0, enc.encode({"rid": "x", "input_ids": [1], "sampling_params": []})),
        "untagged": (0, enc.encode(request[1:])),
        "five_elements": (0, enc.encode(request[:5])),
        "six_elements_empty_sampling": (0, enc.encode([tag, "x", None, None, [1], []])),
        "int_for_bool": (0, req(f6=1)),
        "int_for_bool_in_sampling": (0, samp(15, 0)),
        "float_for_int": (0, samp(0, 1.5)),
        "int_for_float": (0, samp(3, 1)),
        "nil_for_float": (0, samp(3, None)),
        "nil_rid": (0, req(f1=None)),
        "list_rid": (0, req(f1=["x"])),
        "string_prompt": (0, req(f4="hi")),
        "wrong_tag": (0, req(f0="BatchTokenIDOutSlim")),
        "extra_trailing_fields": (0, enc.encode(request + ["extra", 7])),
        "extra_sampling_fields": (0, req(f5=sampling + ["extra", 3])),
        "abort_ints": (1, enc.encode([1, 2])),
        "abort_string": (1, enc.encode("x")),
        "abort_empty": (1, enc.encode([])),
    }
    out = []
    for name, (kind, payload) in cases.items():
        try:
            ts.wire.decode_request_frames([bytes([kind]), payload])
            accepted = True
        except Exception:
            accepted = False
        out.append({"name": name, "type": kind, "hex": payload.hex(), "accepted": accepted})
    return out


def handshake(ts, ours):
    w = ts.wire
    init = w.decode_init(bytes.fromhex(ours["init"]))
    reg_fields = dict(
        max_model_len=4096,
        num_gpu_blocks=1001,
        prefix_granularity=64,
        dtype="bfloat16",
        vllm_version=f"tokenspeed-{VERSION}",
        world_size=2,
        data_parallel_size=2,
        tensor_parallel_size=1,
        decode_context_parallel_size=1,
        data_parallel_rank=1,
        max_num_seqs=160,
        max_num_batched_tokens=8192,
        instance_id="Qwen/Qwen3-0.6B",
        kv_cache_size_tokens=64000,
    )
    reg = w.WireEngineCoreReadyResponse(**reg_fields)
    import msgspec

    return {
        "init": {"hex": ours["init"], "decoded": msgspec.to_builtins(init.addresses)},
        "status": {
            "hello": w.encode(w.WireReadyMessage(status="HELLO", local=True, headless=True)).hex(),
            "ready": w.encode(w.WireReadyMessage(status="READY", local=True, headless=True)).hex(),
        },
        "registration": {"fields": msgspec.to_builtins(reg), "hex": w.encode(reg).hex()},
        "dead": ts.msgpack.ENGINE_CORE_DEAD.hex(),
    }


def main():
    ensure_python_deps()
    import msgspec

    ts = load_tokenspeed(ensure_wire_sources())
    ours = json.loads((HERE / "requests.json").read_text())
    doc = {
        "tokenspeed": VERSION,
        "msgspec": msgspec.__version__,
        "requests": our_requests(ts, ours),
        **handshake(ts, ours),
        "batches": batches(ts),
        "python_adds": python_adds(ts),
        "malformed": malformed(ts),
    }
    # The reference's example batch must be what the engine's encoder writes.
    reference = next(b for b in doc["batches"] if b["name"] == "reference")["hex"]
    assert len(bytes.fromhex(reference)) == 85, reference
    (HERE / f"tokenspeed-{VERSION}.json").write_text(json.dumps(doc, indent=1) + "\n")
    failures = [r["name"] for r in doc["requests"] if r["error"] or r.get("validation_error")]
    print(f"wrote tokenspeed-{VERSION}.json: {len(doc['requests'])} of our messages decoded"
          f" ({len(failures)} refused: {failures}), {len(doc['batches'])} batches,"
          f" {len(doc['python_adds'])} engine-encoded ADDs, {len(doc['malformed'])} malformed cases")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
