"""Capture SMG VllmEngine responses to our own requests, as gRPC-framed bodies.

The `shardgate-grpc` codec tests (crates/grpc/tests/codec.rs) decode these bytes. Each case
writes NAME.request (the framed request the client sent) and NAME.response (the framed messages
of the response stream, each behind its 5-byte prefix: the DATA payload of the HTTP/2 stream).
Run with the gRPC-worker venv against a servicer on tiny-chat:

  tools/grpc-workers/run-servicer.sh 18051 &
  ~/.cache/real-vllm/grpc-venv/bin/python tools/grpc-workers/capture.py 127.0.0.1:18051 \
      crates/grpc/tests/fixtures
"""

import pathlib
import struct
import sys

import grpc
from smg_grpc_proto import vllm_engine_pb2 as pb

SERVICE = "/vllm.grpc.engine.VllmEngine/"
PROMPT = [785, 6722, 315, 9625, 374, 264, 3283, 304, 4505]


def framed(message: bytes) -> bytes:
    return struct.pack(">BI", 0, len(message)) + message


def generate(rid: str, **sampling) -> pb.GenerateRequest:
    return pb.GenerateRequest(
        request_id=rid,
        tokenized=pb.TokenizedInput(input_ids=PROMPT),
        sampling_params=pb.SamplingParams(temperature=0.0, **sampling),
        stream=True,
    )


def call_stream(channel, method: str, request) -> list[bytes]:
    rpc = channel.unary_stream(
        SERVICE + method, request_serializer=lambda b: b, response_deserializer=lambda b: b
    )
    return list(rpc(request.SerializeToString(), timeout=120))


def call_unary(channel, method: str, request) -> list[bytes]:
    rpc = channel.unary_unary(
        SERVICE + method, request_serializer=lambda b: b, response_deserializer=lambda b: b
    )
    return [rpc(request.SerializeToString(), timeout=60)]


def main() -> None:
    target, out = sys.argv[1], pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    channel = grpc.insecure_channel(target)
    grpc.channel_ready_future(channel).result(timeout=60)

    greedy = generate("capture-greedy", max_tokens=8)
    first = call_stream(channel, "Generate", greedy)
    tokens = [t for m in first for t in pb.GenerateResponse.FromString(m).chunk.token_ids]
    cases = {
        "generate_greedy": ("Generate", greedy, first),
        # A stop token the greedy answer reaches at its third token: finish "stop" and
        # matched_token_id.
        "generate_stop_token": ("Generate", generate("capture-stop", max_tokens=8,
                                                     stop_token_ids=[tokens[2]]), None),
        "generate_logprobs": ("Generate", generate("capture-logprobs", max_tokens=3, logprobs=2,
                                                   prompt_logprobs=1), None),
        "get_model_info": ("GetModelInfo", pb.GetModelInfoRequest(), None),
        "get_server_info": ("GetServerInfo", pb.GetServerInfoRequest(), None),
        "get_loads": ("GetLoads", pb.GetLoadsRequest(include=["core"]), None),
        "health_check": ("HealthCheck", pb.HealthCheckRequest(), None),
    }
    for name, (method, request, answer) in cases.items():
        if answer is None:
            call = call_stream if method == "Generate" else call_unary
            answer = call(channel, method, request)
        (out / f"{name}.request").write_bytes(framed(request.SerializeToString()))
        (out / f"{name}.response").write_bytes(b"".join(framed(m) for m in answer))
        print(f"{name}: {len(answer)} messages")


if __name__ == "__main__":
    main()
