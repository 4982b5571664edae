#!/usr/bin/env python3
"""Writes the committed seed corpora (tests/fuzz/seeds/<target>/).

Seeds are our own data: hand-written HTTP requests and request bodies, and the engine frames the
wire tests already hold (tests/wire/vllm/engine-0.32.0.json, captured from a real vLLM engine;
tests/wire/tokenspeed/tokenspeed-0.1.1.json, written by TokenSpeed's own codec). The structured
input modes (odd first byte) have no seeds: `arbitrary` finds them within seconds.

Run from anywhere: python3 tests/fuzz/seeds/generate.py
"""

import hashlib
import io
import json
import pathlib
import shutil
import struct
import subprocess
import tempfile
import zlib

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]


def write(target, items):
    out = HERE / target
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name, data in items:
        digest = hashlib.sha1(data).hexdigest()[:10]
        (out / f"{name}-{digest}").write_bytes(data)
    print(f"{target}: {len(items)} seeds")


def http_request():
    chat = b'{"model":"qwen3-demo","messages":[{"role":"user","content":"Hi"}],"max_tokens":4}'
    post = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
    chunked = post + b"Transfer-Encoding: chunked\r\n\r\n"
    return [
        ("get", b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("http10", b"GET /v1/models HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
        ("post-length", b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
         b"Authorization: Bearer k\r\nContent-Length: %d\r\n\r\n%s" % (len(chat), chat)),
        ("pipelined", b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + post + b"Content-Length: 2\r\n\r\n{}"
         b"GET /readiness HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        ("chunked", post + b"Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
         b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("chunked-body", b"4\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\n\r\n"),
        # `\0\0` + k expands to k x 64 bytes in the target (see `expand` there).
        ("chunked-long-ext", b"3;\0\0\x30\r\nabc\r\n0\r\n\r\n"),
        ("head-near-limit", b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"\0\0\xff" * 3 + b"\0\0\xf0\r\n\r\n"),
        ("bare-lf", b"GET / HTTP/1.1\nHost: x\n\n"),
        ("smuggle", post + b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        # The strict framing rules (RFC 9112), one seed each: all are refused with a 400.
        ("te-list", post + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
        ("te-twice", post + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("te-http10", b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("length-signed", post + b"Content-Length: +2\r\n\r\n{}"),
        ("no-host", b"GET /health HTTP/1.1\r\n\r\n"),
        ("two-hosts", b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
        ("two-authorizations", b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\r\n"
         b"Authorization: Bearer b\r\n\r\n"),
        ("chunk-size-signed", chunked + b"+5\r\nhello\r\n0\r\n\r\n"),
        ("chunk-size-spaces", chunked + b" 5 \r\nhello\r\n0\r\n\r\n"),
        ("chunk-bare-lf", chunked + b"5\nhello\n0\n\n"),
        ("chunk-bare-cr", chunked + b"5\rX\r\nhello\r\n0\r\n\r\n"),
        ("chunk-data-bare-lf", chunked + b"5\r\nhello\n0\r\n\r\n"),
        ("chunked-body-bare-lf", b"5\nhello\r\n0\r\n\r\n"),
    ]


def request_json():
    bodies = [
        {"model": "qwen3-demo", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 16},
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [
            {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
         "stream": True, "stream_options": {"include_usage": True}, "n": 2, "temperature": 0.7, "top_p": 0.9,
         "top_k": 20, "min_p": 0.05, "seed": 7, "stop": ["\n\n", "END"], "logprobs": True, "top_logprobs": 3},
        {"messages": [{"role": "user", "content": "weather?"},
                      {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
         "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
             "type": "object", "properties": {"city": {"type": "string"}}}}}],
         "tool_choice": "auto", "chat_template_kwargs": {"enable_thinking": False}},
        {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "partial"}],
         "add_generation_prompt": False, "continue_final_message": True, "reasoning_effort": "low"},
        {"model": "qwen3-demo", "prompt": "Once upon a time", "max_tokens": 8, "echo": True, "logprobs": 2,
         "stop_token_ids": [151645], "logit_bias": {"100": 5, "200": -100}, "bad_words": ["bad", " worse"],
         "min_tokens": 2, "ignore_eos": True, "include_stop_str_in_output": True, "skip_special_tokens": False},
        {"prompt": [[1, 2, 3], [151935]], "n": 3, "allowed_token_ids": [1, 2, 3], "priority": -1,
         "cache_salt": "s", "frequency_penalty": -2, "presence_penalty": 2, "repetition_penalty": 1.1},
        {"prompt": ["a", "b"], "max_tokens": 2.0, "best_of": 1, "response_format": {"type": "text"}},
    ]
    return [(f"body{i}", json.dumps(b).encode()) for i, b in enumerate(bodies)]


AUX_SEPARATOR = b"|AUX|"


def vllm_output():
    fixture = json.loads((REPO / "tests/wire/vllm/engine-0.32.0.json").read_text())
    seeds = []
    for name, case in fixture["cases"].items():
        if name in ("hello", "init", "registration", "ready"):
            continue
        for i, message in enumerate(case["frames"]):
            frames = [bytes.fromhex(f) for f in message]
            # Even first byte: raw mode.
            seeds.append((f"{name}{i}", b"\x00" + AUX_SEPARATOR.join(frames)))
    return seeds


def tokenspeed_output():
    fixture = json.loads((REPO / "tests/wire/tokenspeed/tokenspeed-0.1.1.json").read_text())
    seeds = []
    for batch in fixture["batches"]:
        seeds.append((batch["name"], b"\x00" + bytes.fromhex(batch["hex"])))
    seeds.append(("dead", b"\x00" + b"ENGINE_CORE_DEAD"))
    return seeds


def zmtp_peer():
    fixture = json.loads((REPO / "tests/wire/zmtp/pyzmq-4.3.5.json").read_text())
    # Even first byte: raw mode; bit 1 picks the socket (0: ROUTER for the DEALER's stream).
    return [("dealer", b"\x00" + bytes.fromhex(fixture["dealer"])), ("push", b"\x02" + bytes.fromhex(fixture["push"]))]


def constraint_check():
    # First byte picks the kind: 0 regex, 1 grammar, 2 grammar after `root ::= `, 3 JSON schema,
    # 4 structural tag.
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"type": "integer"}}}
    tag = {"type": "structural_tag", "format": {"type": "const_string", "value": "x"}}
    return [
        ("regex-ok", b"\x00^\\d{3}-[a-z]+(?:x|y)*$"),
        ("regex-open", b"\x00(((("),
        ("ebnf-ok", b'\x01root ::= "a" | b\nb ::= [a-z]{1,3}'),
        ("ebnf-open", b"\x02((("),
        ("schema-ref", b"\x03" + json.dumps(schema).encode()),
        ("tag-ok", b"\x04" + json.dumps(tag).encode()),
    ]


def png(width, height, colour_type, bit_depth, rows, extra_chunks=()):
    """A PNG from raw rows (filter byte included), with the standard library only."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    head = struct.pack(">IIBBBBB", width, height, bit_depth, colour_type, 0, 0, 0)
    body = b"".join(chunk(k, d) for k, d in extra_chunks)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head) + body + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def tiff_orientation(value):
    """A little-endian TIFF block with one IFD entry: Orientation (0x0112, SHORT) = value."""
    return b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", 1) + struct.pack("<HHIHH", 0x0112, 3, 1, value, 0) \
        + struct.pack("<I", 0)


def pil_images():
    """JPEG and WebP seeds, where PIL is importable (the real-vLLM venv's python); else None."""
    try:
        from PIL import Image
    except ImportError:
        return None
    image = Image.new("RGB", (24, 16))
    image.putdata([(x * 10, y * 15, (x * y) % 256) for y in range(16) for x in range(24)])
    out = []
    for name, fmt, options in [("jpeg-baseline", "JPEG", {"quality": 80}),
                               ("jpeg-progressive", "JPEG", {"quality": 80, "progressive": True}),
                               ("jpeg-grey", "JPEG", {}),
                               ("jpeg-444", "JPEG", {"quality": 90, "subsampling": 0}),
                               ("jpeg-422-restarts", "JPEG", {"subsampling": 1, "restart_marker_blocks": 2}),
                               ("jpeg-progressive-444-restarts", "JPEG",
                                {"progressive": True, "subsampling": 0, "restart_marker_rows": 1}),
                               ("jpeg-progressive-grey", "JPEG", {"progressive": True}),
                               ("jpeg-cmyk", "JPEG", {"quality": 90}),
                               ("webp-lossy", "WEBP", {"quality": 80}),
                               ("webp-lossless", "WEBP", {"lossless": True})]:
        buffer = io.BytesIO()
        mode = "L" if "grey" in name else "CMYK" if "cmyk" in name else "RGB"
        image.convert(mode).save(buffer, format=fmt, **options)
        out.append((name, b"\x00" + buffer.getvalue()))
        if name == "jpeg-progressive-444-restarts":
            # The same scans under a frame header claiming 1024x1024 (the fuzz limit's 1 Mi
            # pixels): libjpeg's whole coefficient buffer, then the data runs out.
            data = bytearray(buffer.getvalue())
            at = data.index(b"\xff\xc2")
            data[at + 5:at + 9] = struct.pack(">HH", 1024, 1024)
            out.append(("jpeg-progressive-claims-1024x1024", b"\x00" + bytes(data)))
    for orientation in (3, 8):
        exif = Image.Exif()
        exif[0x0112] = orientation
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=80, exif=exif.tobytes())
        out.append((f"jpeg-exif-orientation-{orientation}", b"\x00" + buffer.getvalue()))
    return out


def image_decode():
    """Even first byte: a file; odd: a header of the format byte 2 picks, sized by bytes 3-10."""
    rgb_rows = b"".join(b"\x00" + bytes((x * 40 + y) % 256 for x in range(3 * 4)) for y in range(3))
    grey16_rows = b"".join(b"\x00" + bytes(range(y, y + 8)) for y in range(2))
    palette_rows = b"".join(b"\x00" + bytes([0x1b]) for _ in range(2))
    gif = (b"GIF89a\x02\x00\x02\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff"
           b"\x21\xf9\x04\x01\x00\x00\x01\x00"
           b"\x2c\x00\x00\x00\x00\x02\x00\x02\x00\x00\x02\x03\x44\x34\x05\x00\x3b")
    seeds = [
        ("png-rgb", b"\x00" + png(4, 3, 2, 8, rgb_rows)),
        ("png-grey16", b"\x00" + png(4, 2, 0, 16, grey16_rows)),
        ("png-palette-trns", b"\x00" + png(4, 2, 3, 2, palette_rows,
                                           [(b"PLTE", bytes(range(12))), (b"tRNS", b"\x00\x80")])),
        ("gif-transparent", b"\x00" + gif),
        # EXIF orientation 6 (turn 90°) in a PNG eXIf chunk: the decoder's TIFF reader.
        ("png-exif-orientation", b"\x00" + png(4, 3, 2, 8, rgb_rows, [(b"eXIf", tiff_orientation(6))])),
    ]
    # A progressive 8x8 grey JPEG of 64 repeated DC scans (one-code Huffman table, unit
    # quantisation): libjpeg warns and decodes on; the scan bound's path.
    scan = b"\xff\xda\x00\x08\x01\x01\x00\x00\x00\x00\x7f"
    seeds.append(("jpeg-progressive-many-scans", b"\x00\xff\xd8\xff\xdb\x00\x43\x00" + b"\x01" * 64
                  + b"\xff\xc2\x00\x0b\x08\x00\x08\x00\x08\x01\x01\x11\x00"
                  + b"\xff\xc4\x00\x14\x00\x01" + b"\x00" * 16 + scan * 64 + b"\xff\xd9"))
    for kind, name in enumerate(["png", "gif", "jpeg", "webp"]):
        seeds.append((f"header-{name}-huge", bytes([1, kind]) + struct.pack("<II", 50000, 40000)))
        seeds.append((f"header-{name}-small", bytes([1, kind]) + struct.pack("<II", 16, 16) + b"\x00" * 32))
    return seeds


def video_decode():
    """MP4s the OpenH264 encoder makes (the media crate's make_video example): sizes with and
    without SPS cropping, frame counts odd and even; and the B-frame MP4s libx264 made of our
    own pattern, committed in crates/media/tests/videos/ (High CABAC, Main CAVLC; `ctts`)."""
    items = [(f"bframes-{p.stem}", p.read_bytes()) for p in sorted((REPO / "crates/media/tests/videos").glob("*.mp4"))]
    with tempfile.TemporaryDirectory() as tmp:
        for width, height, frames, fps in [(32, 32, 6, 4), (48, 18, 5, 2), (64, 48, 12, 8)]:
            out = pathlib.Path(tmp) / "v.mp4"
            subprocess.run(["cargo", "run", "-q", "--release", "-p", "shardgate-media", "--example", "make_video",
                            "--", str(out), str(width), str(height), str(frames), str(fps)], cwd=REPO, check=True)
            items.append((f"h264-{width}x{height}x{frames}", out.read_bytes()))
    return items


if __name__ == "__main__":
    write("http_request", http_request())
    write("request_json", request_json())
    write("vllm_output", vllm_output())
    write("tokenspeed_output", tokenspeed_output())
    write("zmtp_peer", zmtp_peer())
    write("constraint_check", constraint_check())
    made_by_pil = pil_images()
    if made_by_pil is None:
        print("image_decode: kept as it is (JPEG and WebP seeds need PIL: run with the real-vLLM venv's python)")
    else:
        write("image_decode", image_decode() + made_by_pil)
    write("video_decode", video_decode())
