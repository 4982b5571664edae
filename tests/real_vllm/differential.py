#!/usr/bin/env python3
"""Differential test: the same tiny model served by `vllm serve` (the reference API server) and
by shardgate in front of a headless vLLM engine must give identical answers.

Opt-in (needs tools/real-vllm/setup.sh): run with the real-vLLM venv's python or any
python3 (stdlib only):

    python3 tests/real_vllm/differential.py [--cases basic|full] [--keep-going]

It starts shardgate + `vllm serve --headless` (run-engine.sh), records every answer, stops
them, starts `vllm serve` on the same model, replays the same requests, and compares choices,
finish reasons, token counts (and logprobs to 1e-5 where asked). Exit status 0 = identical."""
import argparse, hashlib, json, os, signal, socket, subprocess, sys, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "tools", "real-vllm")
HOME = os.environ.get("REAL_VLLM_HOME", os.path.expanduser("~/.cache/real-vllm"))
MODEL = os.environ.get("REAL_VLLM_MODEL", os.path.join(HOME, "tiny-chat"))
NAME = "tiny-chat"


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def handshake_port(path):
    h = 0xCBF29CE484222325
    for b in path.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return 20000 + h % 10000


def http(method, url, body=None, timeout=120):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_http(url, limit=300):
    deadline = time.time() + limit
    while time.time() < deadline:
        try:
            status, _ = http("GET", url, timeout=5)
            if status == 200:
                return
        except Exception:
            pass
        time.sleep(1)
    raise SystemExit(f"{url} not ready after {limit}s")


def cases(kind):
    msgs = [
        [{"role": "user", "content": "Hello!"}],
        [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name three colors."}],
        [{"role": "user", "content": "Translate to French: good morning, 日本語 🙂"}],
        [{"role": "user", "content": "Count: one two"}, {"role": "assistant", "content": "three"}, {"role": "user", "content": "go on"}],
    ]
    out = []
    for i, m in enumerate(msgs):
        out.append(("chat", {"messages": m, "temperature": 0, "max_tokens": 24}))
        out.append(("chat", {"messages": m, "temperature": 0, "max_tokens": 24, "stream": True}))
    out.append(("completion", {"prompt": "The capital of France is", "temperature": 0, "max_tokens": 20}))
    out.append(("completion", {"prompt": "def fib(n):", "temperature": 0, "max_tokens": 20, "stream": True}))
    out += drop_in_cases()
    if kind == "full":
        out += full_cases(msgs)
    if kind in ("full", "constrained"):
        out += constrained_cases(msgs)
    return out


def drop_in_cases():
    """Where a template alone would differ from `vllm serve`: a developer message (Qwen3's
    template has no developer role; vLLM renders it as the system message), and an output bound
    larger than the context window (vLLM refuses it; the model serves 1024 tokens)."""
    out = []
    for m in (
        [{"role": "developer", "content": "You are terse."}, {"role": "user", "content": "Name three colors."}],
        [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"},
         {"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "Name a color."}],
    ):
        for stream in (False, True):
            out.append(("chat", {"messages": m, "temperature": 0, "max_tokens": 16, "stream": stream}))
    hello = [{"role": "user", "content": "Hello!"}]
    for stream in (False, True):
        out.append(("chat", {"messages": hello, "max_tokens": 1025, "stream": stream}))
        out.append(("completion", {"prompt": "Hello", "max_tokens": 5000, "stream": stream}))
    out.append(("chat", {"messages": hello, "max_completion_tokens": 2048}))
    return out


def constrained_cases(msgs):
    """Constrained decoding (xgrammar on the engine): output formats.

    Forced tool calls are not compared: vLLM 0.32 forces them through its tool parser's
    structural tag (`<tool_call>…</tool_call>` for hermes), while SMG sends the JSON
    schema of the call(s); the two constrain the engine differently by design."""
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                               "age": {"type": "integer"}}, "required": ["name", "age"]}
    out = []
    for m in msgs[:2]:
        for extra in (
            {"response_format": {"type": "json_object"}, "max_tokens": 30},
            {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}}, "max_tokens": 40},
            {"structured_outputs": {"choice": ["yes", "no", "maybe"]}},
            {"structured_outputs": {"regex": "[a-c]{2,5}"}},
        ):
            for stream in (False, True):
                body = {"messages": m, "temperature": 0, "max_tokens": 24, "stream": stream}
                body.update(extra)
                out.append(("chat", body))
    for extra in ({"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}},
                   "max_tokens": 40}, {"structured_outputs": {"regex": "[0-9]{3}-[0-9]{2}"}}):
        body = {"prompt": "The number is", "temperature": 0, "max_tokens": 16}
        body.update(extra)
        out.append(("completion", body))
    return out


def full_cases(msgs):
    """The parameter matrix of the text-fidelity issue: stops, sampling, seeds, n, logprobs."""
    out = []
    for m in msgs:
        for extra in (
            {"stop": [" the", "."]}, {"stop": ["\n"], "include_stop_str_in_output": True},
            {"min_tokens": 8, "max_tokens": 12}, {"ignore_eos": True, "max_tokens": 40},
            {"skip_special_tokens": False}, {"seed": 123, "temperature": 0.9, "top_p": 0.8},
            {"seed": 7, "temperature": 0.7, "top_k": 20}, {"seed": 5, "temperature": 1.0, "min_p": 0.1},
            {"presence_penalty": 1.0, "frequency_penalty": 0.5}, {"repetition_penalty": 1.3},
            {"logprobs": True, "top_logprobs": 3}, {"n": 2, "seed": 42, "temperature": 0.8},
            {"max_completion_tokens": 7}, {"logit_bias": {"11": -100, "13": 5}},
        ):
            for stream in (False, True):
                body = {"messages": m, "temperature": 0, "max_tokens": 24, "stream": stream}
                body.update(extra)
                out.append(("chat", body))
    prompts = ["The capital of France is", "def fib(n):", "日本語のテキストと emoji 🙂", "1, 2, 3,"]
    for p in prompts:
        for extra in (
            {}, {"stop": [","]}, {"logprobs": 3}, {"echo": True}, {"n": 2, "seed": 9, "temperature": 0.6},
            {"min_tokens": 5, "max_tokens": 9}, {"ignore_eos": True, "max_tokens": 30}, {"seed": 1, "temperature": 1.2},
            {"prompt_tokens_list": True}, {"stop": ["\n\n"], "include_stop_str_in_output": True},
        ):
            for stream in (False, True):
                body = {"prompt": p, "temperature": 0, "max_tokens": 16, "stream": stream}
                body.update(extra)
                if body.pop("prompt_tokens_list", False):
                    body["prompt"] = [p, p + " and"]
                out.append(("completion", body))
    return out


def run_all(base, reqs):
    results = []
    for kind, body in reqs:
        body = dict(body, model=NAME)
        path = {"chat": "/v1/chat/completions", "completion": "/v1/completions", "tokenize": "/tokenize"}[kind]
        status, raw = http("POST", base + path, body)
        results.append(summarize(kind, body, status, raw))
    return results


def summarize(kind, body, status, raw):
    """The comparable part of an answer: per choice text, finish reason, stop reason, logprobs."""
    if status != 200:
        try:
            error = json.loads(raw).get("error") or {}
        except ValueError:
            error = {}
        return {"status": status, "message": error.get("message"), "param": error.get("param")}
    if kind == "tokenize":
        answer = json.loads(raw)
        return {"status": 200, "count": answer["count"], "tokens": answer["tokens"]}
    if body.get("stream"):
        choices, usage = {}, None
        for line in raw.decode().split("\n\n"):
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("usage"):
                usage = ev["usage"]
            for c in ev.get("choices", []):
                ch = choices.setdefault(c["index"], {"text": "", "finish_reason": None, "logprobs": [], "calls": []})
                d = c.get("delta", {})
                ch["text"] += (d.get("content") or "") if kind == "chat" else (c.get("text") or "")
                for tc in d.get("tool_calls") or []:
                    while len(ch["calls"]) <= tc["index"]:
                        ch["calls"].append({"name": None, "arguments": ""})
                    fn = tc.get("function") or {}
                    if fn.get("name"):
                        ch["calls"][tc["index"]]["name"] = fn["name"]
                    ch["calls"][tc["index"]]["arguments"] += fn.get("arguments") or ""
                if c.get("finish_reason"):
                    ch["finish_reason"] = c["finish_reason"]
                    ch["stop_reason"] = c.get("stop_reason")
                ch["logprobs"] += logprob_entries(kind, c.get("logprobs"))
        return {"status": 200, "choices": [choices[k] for k in sorted(choices)]}
    v = json.loads(raw)
    out = []
    for c in v["choices"]:
        text = (c["message"]["content"] or "") if kind == "chat" else c["text"]
        lp = logprob_entries(kind, c.get("logprobs"))
        calls = [{"name": t["function"]["name"], "arguments": t["function"]["arguments"]}
                 for t in (c.get("message", {}).get("tool_calls") or [])]
        out.append({"text": text, "finish_reason": c["finish_reason"], "stop_reason": c.get("stop_reason"), "logprobs": lp,
                    "calls": calls})
    return {"status": 200, "choices": out, "usage": {k: v["usage"][k] for k in ("prompt_tokens", "completion_tokens")}}


def logprob_entries(kind, lp):
    """Chat and completions logprobs in one comparable shape: token, logprob, top list."""
    if not lp:
        return []
    if kind == "chat":
        return lp.get("content") or []
    out = []
    tops = lp.get("top_logprobs") or [None] * len(lp.get("tokens", []))
    for tok, l, top in zip(lp.get("tokens", []), lp.get("token_logprobs", []), tops):
        out.append({"token": tok, "logprob": l if l is not None else 0.0,
                    "top_logprobs": [{"token": k, "logprob": v} for k, v in (top or {}).items()]})
    return out


def close_logprobs(a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x["token"] != y["token"] or abs(x["logprob"] - y["logprob"]) > 1e-5:
            return False
        tx = [(t["token"], round(t["logprob"], 5)) for t in x.get("top_logprobs", [])]
        ty = [(t["token"], round(t["logprob"], 5)) for t in y.get("top_logprobs", [])]
        if len(tx) != len(ty) or any(p[0] != q[0] or abs(p[1] - q[1]) > 1e-5 for p, q in zip(tx, ty)):
            return False
    return True


def same(a, b):
    if a["status"] != b["status"]:
        return False
    if a["status"] != 200:
        return (a.get("message"), a.get("param")) == (b.get("message"), b.get("param"))
    if "tokens" in a or "choices" not in a:
        # /tokenize's answer, or another route's summary: compared whole.
        return a == b
    if a.get("usage") and b.get("usage") and a["usage"] != b["usage"]:
        return False
    if len(a["choices"]) != len(b["choices"]):
        return False
    for x, y in zip(a["choices"], b["choices"]):
        if (x["text"], x["finish_reason"], x.get("stop_reason")) != (y["text"], y["finish_reason"], y.get("stop_reason")):
            return False
        if x.get("calls", []) != y.get("calls", []):
            return False
        if not close_logprobs(x.get("logprobs", []), y.get("logprobs", [])):
            return False
    return True


def serve_both(reqs, gateway, venv, work, path, port):
    """Answers `reqs` twice: through shardgate in front of a headless engine of `venv` (dialing
    the handshake address derived from `path`), then through `vllm serve` of the same venv.
    `port()` hands out the TCP ports. Returns (shardgate's answers, vLLM's answers)."""
    gw_port, ref_port = port(), port()
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", VLLM_CPU_KVCACHE_SPACE="1", REAL_VLLM_VENV=venv)

    gw = subprocess.Popen([gateway, "launch", "--worker-urls", f"ipc://{path}", "--model-path", MODEL,
                           "--served-model-name", NAME, "--host", "127.0.0.1", "--port", str(gw_port),
                           "--tool-call-parser", "qwen", "--metrics-port", str(port())],
                          stderr=open(f"{work}/gateway.log", "w"))
    eng = subprocess.Popen([os.path.join(TOOLS, "run-engine.sh"), str(handshake_port(path))], env=env,
                           stdout=open(f"{work}/engine.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{gw_port}/readiness")
        ours = run_all(f"http://127.0.0.1:{gw_port}", reqs)
    finally:
        os.killpg(eng.pid, signal.SIGTERM); eng.wait(); gw.terminate(); gw.wait()

    ref = subprocess.Popen([os.path.join(venv, "bin", "vllm"), "serve", MODEL, "--served-model-name", NAME,
                            "--port", str(ref_port), "--dtype", "float32", "--max-model-len", "1024",
                            "--max-num-seqs", "8", "--enforce-eager",
                            # vLLM refuses forced tool calls without a parser (the gateway's own
                            # is set to the same family; forced calls do not use it).
                            "--tool-call-parser", "hermes", "--enable-auto-tool-choice"], env=env,
                           stdout=open(f"{work}/reference.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{ref_port}/v1/models")
        theirs = run_all(f"http://127.0.0.1:{ref_port}", reqs)
    finally:
        os.killpg(ref.pid, signal.SIGTERM); ref.wait()
    return ours, theirs


def report(reqs, ours, theirs, work):
    """Prints each differing request and the count; returns the differing requests."""
    diffs = [(r, a, b) for r, a, b in zip(reqs, ours, theirs) if not same(a, b)]
    for (kind, body), a, b in diffs:
        print(f"DIFF {kind} {json.dumps(body)[:200]}\n  shardgate: {json.dumps(a)[:600]}\n  vllm:      {json.dumps(b)[:600]}")
    print(f"{len(reqs) - len(diffs)}/{len(reqs)} requests identical (logs in {work})")
    json.dump({"requests": reqs, "shardgate": ours, "vllm": theirs}, open(f"{work}/results.json", "w"), indent=1)
    return diffs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="basic", choices=["basic", "full", "constrained"])
    ap.add_argument("--gateway", default=os.path.join(ROOT, "target", "release", "shardgate"))
    args = ap.parse_args()
    reqs = cases(args.cases)
    work = f"/tmp/sg-diff-{os.getpid()}"
    os.makedirs(work, exist_ok=True)
    ours, theirs = serve_both(reqs, args.gateway, os.path.join(HOME, "venv"), work, f"{work}/engine-0", free_port)
    sys.exit(1 if report(reqs, ours, theirs, work) else 0)


if __name__ == "__main__":
    main()
