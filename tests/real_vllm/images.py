#!/usr/bin/env python3
"""Differential test of images in chat requests: a tiny vision model of each served family
(setup.sh's tiny-vl, Qwen2-VL; tiny-qwen3-vl, Qwen3-VL; tiny-llava, LLaVA-1.5) served by `vllm serve` (which fetches, decodes and processes images itself) and by shardgate in
front of a headless vLLM engine (shardgate does that work and sends the tensors in
mm_features) must give the same greedy answers and prompt token counts.

Opt-in (needs tools/real-vllm/setup.sh); run with the real-vLLM venv's python (PIL and numpy
make the images):

    ~/.cache/real-vllm/venv/bin/python tests/real_vllm/images.py [--family qwen-vl|qwen3-vl|llava]
        [--gateway PATH] [--port-base N]

The images are made here from a seeded pattern, as PNG and JPEG data URLs, in sizes and aspect
ratios that exercise smart_resize's rounding, its min_pixels raise and its max_pixels cap
(64 merged patches for tiny-vl and tiny-qwen3-vl), and CLIP's shortest-edge resize and centre crop (LLaVA: every
image 576 tokens, so the engine runs with a 2048-token context). One real engine
runs at a time: shardgate's first, then the reference. Exit status 0 = identical.

With --list-template the model is setup.sh's tiny-vl-list (tiny-vl with a real Qwen-VL template
that reads `content` as a list of parts, vLLM's "openai" content format) and the requests are
list_cases(): each image's placeholder goes where its part is, so text interleaved with images,
several images, images in several messages and system prompts in both shapes are compared.

Both ways, api_cases() then sends images through the Anthropic Messages route (`/v1/messages`,
`image` blocks, a `tool_result` holding an image, `count_tokens`) and the Responses route
(`/v1/responses`, `input_image` parts, a call's output before an image): vLLM turns them into
chat messages with the parts in the client's order, and so must the gateway, placeholders in
front under tiny-vl's string template and each image where its block is under tiny-vl-list's.
Their answers are compared as tests/real_vllm/differential_apis.py compares them (blocks or
items, stop reason, usage)."""
import argparse, base64, io, json, os, signal, subprocess, sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import differential  # noqa: E402
import differential_apis  # noqa: E402
from differential import HOME, ROOT, TOOLS, free_port, handshake_port, http, report, wait_http  # noqa: E402

LIST_MODEL = os.path.join(HOME, "tiny-vl-list")
NAME = "tiny-chat"  # what differential.run_all sends as `model`
ENGINE_ARGS = ["--gpu-memory-utilization", "0.3", "--limit-mm-per-prompt", json.dumps({"image": 3})]
# Per family: the model directory, the placeholder a client writes itself, the image formats
# compared, and engine arguments beyond ENGINE_ARGS.
FAMILIES = {
    "qwen-vl": (os.environ.get("REAL_VLLM_VL_MODEL", os.path.join(HOME, "tiny-vl")),
                "<|vision_start|><|image_pad|><|vision_end|>", ("PNG", "JPEG"), []),
    "qwen3-vl": (os.environ.get("REAL_VLLM_QWEN3_VL_MODEL", os.path.join(HOME, "tiny-qwen3-vl")),
                 "<|vision_start|><|image_pad|><|vision_end|>", ("PNG", "JPEG"), []),
    "llava": (os.environ.get("REAL_VLLM_LLAVA_MODEL", os.path.join(HOME, "tiny-llava")),
              "<image>", ("PNG", "JPEG"), ["--max-model-len", "2048"]),
}


def image(w, h, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) % 256], axis=-1)
    noise = rng.integers(0, 32, size=(h, w, 3))
    return Image.fromarray(((base + noise) % 256).astype(np.uint8))


def data_url(img, fmt):
    buf = io.BytesIO()
    img.save(buf, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    mime = "image/png" if fmt == "PNG" else "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(buf.getvalue()).decode()}"


def part(w, h, fmt, seed):
    return {"type": "image_url", "image_url": {"url": data_url(image(w, h, seed), fmt)}}


def cases(placeholder, formats):
    def item(w, h, fmt, seed):
        # A family that compares fewer formats gets its first one instead.
        return part(w, h, fmt if fmt in formats else formats[0], seed)

    text = {"type": "text", "text": "What is in the picture?"}
    singles = [(96, 64, "PNG"), (64, 96, "JPEG"), (28, 28, "PNG"), (300, 200, "JPEG"), (640, 64, "PNG"),
               (500, 375, "JPEG"), (17, 301, "PNG")]
    out = []
    for i, (w, h, fmt) in enumerate(singles):
        body = {"messages": [{"role": "user", "content": [item(w, h, fmt, i), text]}], "temperature": 0,
                "max_tokens": 16}
        out.append(("chat", body))
    two = [item(96, 64, "PNG", 10), item(120, 90, "JPEG", 11), text]
    out.append(("chat", {"messages": [{"role": "user", "content": two}], "temperature": 0, "max_tokens": 16}))
    out.append(("chat", {"messages": [{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": [item(200, 100, "PNG", 12)]},
                                      {"role": "assistant", "content": "A gradient."},
                                      {"role": "user", "content": [text, item(100, 200, "JPEG", 13)]}],
                         "temperature": 0, "max_tokens": 16, "stream": True}))
    # Placeholders the client wrote itself stay where they are.
    placed = {"type": "text", "text": f"Look: {placeholder} what is it?"}
    out.append(("chat", {"messages": [{"role": "user", "content": [item(80, 80, "PNG", 14), placed]}],
                         "temperature": 0, "max_tokens": 16}))
    # The same request again (the engine's caches now hold the image), and another image of the
    # same size (the same prompt ids: only the tensors differ).
    out.append(out[0])
    out.append(("chat", {"messages": [{"role": "user", "content": [item(96, 64, "PNG", 99), text]}],
                         "temperature": 0, "max_tokens": 16}))
    # /tokenize counts the expanded placeholders, as the engine gets them.
    out += [("tokenize", {"messages": out[i][1]["messages"]}) for i in (0, 7)]
    return out


def text(t):
    return {"type": "text", "text": t}


def list_cases():
    """PNG images only: JPEG decoding is compared by cases()."""
    def chat(messages, **extra):
        return ("chat", dict({"messages": messages, "temperature": 0, "max_tokens": 16}, **extra))
    out = [
        # Text on both sides of an image.
        chat([{"role": "user", "content": [text("First this:"), part(96, 64, "PNG", 20), text("then what?")]}]),
        # Several images between texts, two of them adjacent.
        chat([{"role": "user", "content": [text("Compare"), part(64, 96, "PNG", 21), text("with"),
                                           part(120, 90, "PNG", 22), part(56, 56, "PNG", 23)]}]),
        # Images in several messages, a system prompt as a string, an assistant turn between.
        chat([{"role": "system", "content": "Be brief."},
              {"role": "user", "content": [part(200, 100, "PNG", 24), text("What is this?")]},
              {"role": "assistant", "content": "A gradient."},
              {"role": "user", "content": [text("And this one?"), part(100, 200, "PNG", 25)]}], stream=True),
        # A system prompt as a list of text parts; the image alone in its message.
        chat([{"role": "system", "content": [text("You describe images."), text("Be brief.")]},
              {"role": "user", "content": [part(80, 80, "PNG", 26)]}]),
        # Text only, under the list template (a string becomes one text part).
        chat([{"role": "user", "content": "Hello there"}]),
        # A placeholder the client wrote in a text part: the list format leaves it as text, so
        # the prompt has one placeholder more than images.
        chat([{"role": "user", "content": [part(80, 80, "PNG", 28),
                                           text("Look: <|vision_start|><|image_pad|><|vision_end|> what is it?")]}]),
    ]
    # /tokenize of chat messages with images: the prompt the engine gets, placeholders expanded.
    for kind, body in out[:3]:
        out.append(("tokenize", {"messages": body["messages"]}))
    return out


def b64(img, fmt):
    return data_url(img, fmt).split(",", 1)[1]


def api_cases():
    """Messages and Responses requests with images (PNG, and one JPEG without its media type)."""
    def block(w, h, seed, fmt="PNG", **extra):
        source = {"type": "base64", "media_type": f"image/{fmt.lower()}", "data": b64(image(w, h, seed), fmt)}
        return dict({"type": "image", "source": source}, **extra)

    def messages(msgs, **extra):
        return ("messages", dict({"messages": msgs, "max_tokens": 16, "temperature": 0}, **extra))

    interleaved = [{"role": "user", "content": [text("First this:"), block(96, 64, 30), text("then what?")]}]
    two = [{"role": "user", "content": [text("Compare"), block(64, 96, 31), text("with"), block(120, 90, 32)]}]
    camera_call = {"type": "tool_use", "id": "toolu_1", "name": "camera", "input": {}}
    tool_image = [{"role": "user", "content": "Take a photo."},
                  {"role": "assistant", "content": [text("Taking it."), camera_call]},
                  {"role": "user", "content": [
                      {"type": "tool_result", "tool_use_id": "toolu_1",
                       "content": [text("Here it is:"), block(80, 80, 33)]},
                      text("What is in it?")]}]
    # vLLM's defaults: a base64 source's media type is image/jpeg; cache_control is ignored.
    jpeg = block(100, 60, 34, "JPEG", cache_control={"type": "ephemeral"})
    del jpeg["source"]["media_type"]
    out = [
        messages(interleaved, system="Be brief."),
        messages(two, stream=True),
        messages(tool_image),
        messages([{"role": "user", "content": [jpeg, text("Describe.")]}],
                 system=[{"type": "text", "text": "You describe images."}]),
        ("count_tokens", {"messages": interleaved, "system": "Be brief."}),
        ("count_tokens", {"messages": tool_image}),
    ]

    def input_image(w, h, seed, detail="auto"):
        return {"type": "input_image", "image_url": data_url(image(w, h, seed), "PNG"), "detail": detail}

    def responses(input_, **extra):
        return ("responses", dict({"input": input_, "max_output_tokens": 16, "temperature": 0}, **extra))

    def input_text(t):
        return {"type": "input_text", "text": t}

    out += [
        responses([{"role": "user", "content": [input_text("First this:"), input_image(96, 64, 40),
                                                input_text("then what?")]}], instructions="Be brief."),
        responses([{"role": "user", "content": [input_text("Compare"), input_image(64, 96, 41, "low"),
                                                input_text("with"), input_image(120, 90, 42, "high")]}],
                  stream=True),
        responses([{"role": "user", "content": "Take a photo."},
                   {"type": "function_call", "call_id": "call_1", "name": "camera", "arguments": "{}"},
                   {"type": "function_call_output", "call_id": "call_1", "output": "Taken."},
                   {"type": "message", "role": "user",
                    "content": [input_image(80, 80, 43), input_text("What is in it?")]}]),
    ]
    return out


API_KINDS = ("messages", "count_tokens", "responses")


def run_all(base, reqs):
    """Chat and /tokenize as tests/real_vllm/differential.py runs them, the other routes as
    tests/real_vllm/differential_apis.py summarises them."""
    out = []
    for kind, body in reqs:
        if kind not in API_KINDS:
            out += differential.run_all(base, [(kind, body)])
            continue
        body = dict(body, model=NAME)
        status, raw = http("POST", base + differential_apis.paths(kind), body)
        out.append(differential_apis.summarize(kind, body, status, raw)[0])
    return out


def main(reqs=None, engine_args=None, label="images"):
    """Runs `reqs` (this file's cases by default) through both stacks; tests/real_vllm/video.py
    runs its own with its engine arguments."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", choices=sorted(FAMILIES), default="qwen-vl")
    ap.add_argument("--gateway", default=os.path.join(ROOT, "target", "release", "shardgate"))
    ap.add_argument("--port-base", type=int, default=0,
                    help="take the 100 TCP ports from here up (default: any free)")
    ap.add_argument("--list-template", action="store_true", help="tiny-vl-list and list_cases() (qwen-vl)")
    args = ap.parse_args()
    if args.list_template and args.family != "qwen-vl":
        ap.error("--list-template is tiny-vl-list's, a qwen-vl model")
    model, placeholder, formats, family_args = FAMILIES[args.family]
    engine_args = (engine_args or ENGINE_ARGS) + family_args
    if reqs is None and args.list_template:
        model, reqs = LIST_MODEL, list_cases() + api_cases()
    elif reqs is None:
        reqs = cases(placeholder, formats) + api_cases()
    work = f"/tmp/sg-diff-{label}-{args.family}-{os.getpid()}"
    os.makedirs(work, exist_ok=True)
    # Within the 100 ports from --port-base: HTTP from the first 50, the handshake from the rest.
    ports = iter(range(args.port_base, args.port_base + 50)) if args.port_base else None
    port = (lambda: next(ports)) if ports else free_port
    # The gateway derives the engine's handshake port from the socket path: pick a path whose
    # port lies in the range's upper half.
    path = next(p for p in (f"{work}/engine-{i}" for i in range(100000))
                if not args.port_base or args.port_base + 50 <= handshake_port(p) < args.port_base + 100)
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", VLLM_CPU_KVCACHE_SPACE="1", REAL_VLLM_MODEL=model)
    gw_port, ref_port = port(), port()

    gw = subprocess.Popen([args.gateway, "launch", "--worker-urls", f"ipc://{path}", "--model-path", model,
                           "--served-model-name", NAME, "--host", "127.0.0.1", "--port", str(gw_port),
                           "--metrics-port", str(port()), "--data-dir", f"{work}/data"],
                          stderr=open(f"{work}/gateway.log", "w"))
    eng = subprocess.Popen([os.path.join(TOOLS, "run-engine.sh"), str(handshake_port(path)), "1"] + engine_args,
                           env=env, stdout=open(f"{work}/engine.log", "w"), stderr=subprocess.STDOUT,
                           start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{gw_port}/readiness", limit=600)
        ours = run_all(f"http://127.0.0.1:{gw_port}", reqs)
    finally:
        os.killpg(eng.pid, signal.SIGTERM); eng.wait(); gw.terminate(); gw.wait()

    ref = subprocess.Popen([os.path.join(HOME, "venv", "bin", "vllm"), "serve", model, "--served-model-name", NAME,
                            "--port", str(ref_port), "--dtype", "float32", "--max-model-len", "1024",
                            "--max-num-seqs", "8", "--enforce-eager"] + engine_args, env=env,
                           stdout=open(f"{work}/reference.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{ref_port}/v1/models", limit=600)
        theirs = run_all(f"http://127.0.0.1:{ref_port}", reqs)
    finally:
        os.killpg(ref.pid, signal.SIGTERM); ref.wait()
    sys.exit(1 if report(reqs, ours, theirs, work) else 0)


if __name__ == "__main__":
    main()
