"""Encodes vLLM 0.33 engine-core messages with 0.33's own structs and MsgpackEncoder (run by
vllm-0.33.sh, which puts 0.33's sources first on the path). Writes
{"version", "cases": {name: {"frames": [[hex, ...], ...], "note"}}}; tests/wire_vllm_033.rs
decodes every case and checks the values chosen here.

    python vllm_0_33.py OUT.json"""
import json, sys

import msgspec
import numpy as np

import vllm.v1.engine as engine
from vllm.outputs import RequestError
from vllm.sampling_params import SamplingParams
from vllm.v1.engine import (EngineCoreOutput, EngineCoreOutputs, EngineCoreReadyResponse, EngineCoreRequest,
                            FinishReason, UtilityOutput)
from vllm.v1.metrics.stats import PrefillStats, PrefixCacheStats, SchedulerStats
from vllm.v1.outputs import LogprobsLists
from vllm.v1.serial_utils import MsgpackEncoder

assert engine.EngineCoreOutput.__struct_fields__[-1] == "error", "not vLLM 0.33's sources"
# Arrays above the threshold travel as extra frames; one case keeps them inline, one not.
inline, out_of_band = MsgpackEncoder(size_threshold=1 << 20), MsgpackEncoder(size_threshold=0)
cases = {}


def save(name, frames, note):
    cases.setdefault(name, {"frames": [], "note": note})["frames"].append([bytes(f).hex() for f in frames])


for status in ("HELLO", "READY"):
    save(status.lower(), [msgspec.msgpack.encode({"status": status, "local": False, "headless": True})],
         "as EngineCoreProc's handshake sends it")

save("registration", [msgspec.msgpack.encode(EngineCoreReadyResponse(
    max_model_len=4096, num_gpu_blocks=2048, block_size=16, dp_stats_address=None, dtype="bfloat16",
    vllm_version="0.33.0", world_size=2, data_parallel_size=2, tensor_parallel_size=2, pipeline_parallel_size=1,
    decode_context_parallel_size=1, data_parallel_rank=1, max_num_seqs=256, max_num_batched_tokens=8192,
    instance_id="fixture-instance", supports_lora=False, max_loras=0, kv_cache_size_tokens=32768,
    kv_cache_max_concurrency=8.0, effective_attention_block_size=16))],
    "rank 1 of 2, tp 2: what each input socket gets first")

sampling = SamplingParams(temperature=0.0, max_tokens=4, seed=7, stop_token_ids=[151645])
save("add", inline.encode(EngineCoreRequest(
    request_id="r-1", prompt_token_ids=[1, 2, 3], mm_features=None, sampling_params=sampling, pooling_params=None,
    arrival_time=1000.5, lora_request=None, cache_salt=None, data_parallel_rank=None)),
    "prompt [1,2,3], greedy, max_tokens 4, seed 7, stop token 151645")

stats = SchedulerStats(num_running_reqs=3, num_waiting_reqs=2, num_skipped_waiting_reqs=1,
                       num_kv_fetch_reqs_by_stage={"loading": 1}, step_counter=42, current_wave=5,
                       kv_cache_usage=0.75, prefix_cache_stats=PrefixCacheStats(requests=2, queries=80, hits=32),
                       waiting_lora_adapters={}, running_lora_adapters={})
first = EngineCoreOutput(request_id="r-1", new_token_ids=[322],
                         prefill_stats=PrefillStats(num_prompt_tokens=40, num_computed_tokens=8, num_cached_tokens=32))
last = EngineCoreOutput(request_id="r-1", new_token_ids=[7, 151645], finish_reason=FinishReason.STOP,
                        stop_reason=151645)
save("outputs", inline.encode(EngineCoreOutputs(engine_index=1, outputs=[first, last], scheduler_stats=stats,
                                                timestamp=1024.5, finished_requests={"r-0"})),
     "engine 1: a first output with prefill stats, a stop-token finish, full scheduler stats")


def logprobs(rows):
    ids = np.array([[10 + r, 11 + r, 12 + r] for r in range(rows)], dtype=np.int64)
    lps = np.array([[-0.5 - r, -0.5 - r, -1.5 - r] for r in range(rows)], dtype=np.float32)
    return LogprobsLists(ids, lps, np.ones(rows, dtype=np.int64))


for name, encoder in (("logprobs_inline", inline), ("logprobs_out_of_band", out_of_band)):
    out = EngineCoreOutput(request_id="lp", new_token_ids=[10, 11], new_logprobs=logprobs(2))
    save(name, encoder.encode(EngineCoreOutputs(engine_index=0, outputs=[out], timestamp=1.0)),
         "two tokens, logprobs=2: ids [[10,11,12],[11,12,13]], logprobs [[-0.5,-0.5,-1.5],[-1.5,-1.5,-2.5]]")

for name, error in (("error_retryable", RequestError("kv_load_failed", "KV load failed on rank 1", retryable=True)),
                    ("error_fatal", RequestError("internal_error", "sampler crashed"))):
    out = EngineCoreOutput(request_id="e", new_token_ids=[], finish_reason=FinishReason.ERROR, error=error)
    save(name, inline.encode(EngineCoreOutputs(engine_index=0, outputs=[out], timestamp=2.0)),
         f"an ERROR finish carrying RequestError {error}")

save("utility", inline.encode(EngineCoreOutputs(engine_index=0, timestamp=3.0, utility_output=UtilityOutput(
    call_id=12345678901234567890, failure_message="no such method"))), "a failed utility call")

# A layout the decoder must not accept silently: one field inserted after new_token_ids, as a
# release that added a field mid-struct would send it.
shifted = msgspec.msgpack.encode([0, [["r-1", [322], None, *msgspec.msgpack.decode(
    inline.encode(EngineCoreOutputs(outputs=[last]))[0])[1][0][2:]]], None, 0.0])
save("shifted", [shifted], "the stop-token output of 'outputs' with a nil inserted at index 2")

json.dump({"version": "0.33.0", "cases": cases}, open(sys.argv[1], "w"), indent=1)
print(f"{len(cases)} cases -> {sys.argv[1]}")
