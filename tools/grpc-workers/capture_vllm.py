"""Capture vLLM's own gRPC answers (`vllm.Inference` / `vllm.Control`, served by `vllm-rs serve
--grpc-port`) to our own requests, as gRPC-framed bodies, for crates/grpc/tests/codec.rs.

vLLM publishes no Python bindings for these protos, so the few request messages are written
here field by field (numbers from the `vllm-proto` crate's inference.proto / control.proto).
Each case writes NAME.request and NAME.response as capture.py does.

  ~/.cache/real-vllm/grpc-venv/bin/python tools/grpc-workers/capture_vllm.py 127.0.0.1:18061 \\
      crates/grpc/tests/fixtures
"""

import pathlib
import struct
import sys

import grpc

PROMPT = [785, 6722, 315, 9625, 374, 264, 3283, 304, 4505]


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, value) -> bytes:
    if isinstance(value, bool) or isinstance(value, int):
        return varint(number << 3) + varint(int(value))
    if isinstance(value, float):
        return varint(number << 3 | 5) + struct.pack("<f", value)
    if isinstance(value, str):
        value = value.encode()
    return varint(number << 3 | 2) + varint(len(value)) + value


def packed(number: int, values: list[int]) -> bytes:
    return field(number, b"".join(varint(v) for v in values))


def generate(rid: str, max_new_tokens: int, stop_token_ids=(), logprobs=False) -> bytes:
    stopping = field(1, max_new_tokens) + (packed(3, list(stop_token_ids)) if stop_token_ids else b"")
    # ResponseOptions as the gateway asks: output_text (4) off, output_token_ids (5);
    # output_logprobs (6) with output_candidates (7: CandidateTokens.top_n = 2); the prompt's
    # ids (1) and prompt_logprobs (2) with prompt_candidates (3: top_n 1).
    response = field(4, False) + field(5, True)
    if logprobs:
        response += (field(6, True) + field(7, field(1, 2)) + field(1, True) + field(2, True)
                     + field(3, field(1, 1)))
    return (field(1, rid) + field(4, packed(1, PROMPT)) + field(5, 0.0)
            + field(8, stopping) + field(9, response))


def framed(message: bytes) -> bytes:
    return struct.pack(">BI", 0, len(message)) + message


def call(channel, path: str, request: bytes, stream: bool) -> list[bytes]:
    kind = channel.unary_stream if stream else channel.unary_unary
    rpc = kind(path, request_serializer=lambda b: b, response_deserializer=lambda b: b)
    answer = rpc(request, timeout=120)
    return list(answer) if stream else [answer]


def main() -> None:
    target, out = sys.argv[1], pathlib.Path(sys.argv[2])
    channel = grpc.insecure_channel(target)
    grpc.channel_ready_future(channel).result(timeout=60)
    cases = {
        "vllm_generate_greedy": ("/vllm.Inference/GenerateStream", generate("capture-greedy", 8), True),
        "vllm_generate_stop_token": ("/vllm.Inference/GenerateStream",
                                     generate("capture-stop", 8, stop_token_ids=[17735]), True),
        "vllm_generate_logprobs": ("/vllm.Inference/GenerateStream",
                                   generate("capture-logprobs", 3, logprobs=True), True),
        "vllm_server_info": ("/vllm.Control/GetServerInfo", b"", False),
        "vllm_model_info": ("/vllm.Control/GetModelInfo", b"", False),
    }
    for name, (path, request, stream) in cases.items():
        answer = call(channel, path, request, stream)
        (out / f"{name}.request").write_bytes(framed(request))
        (out / f"{name}.response").write_bytes(b"".join(framed(m) for m in answer))
        print(f"{name}: {len(answer)} messages, {sum(map(len, answer))} bytes")


if __name__ == "__main__":
    main()
