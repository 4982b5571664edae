#!/usr/bin/env python3
"""Invalid output constraints against the real engine and xgrammar (opt-in; needs
tools/real-vllm/setup.sh; run with the real-vLLM venv's python, which has zmq, msgspec and
xgrammar):

    $REAL_VLLM_HOME/venv/bin/python tests/real_vllm/constraints.py [--parts direct,gateway,table]

direct   each probe of PROBES sent straight to a headless engine over its wire (ADD with the
         constraint, as the gateway would send it): records what the engine does (request
         error, death, or served), restarting it after a death.
gateway  shardgate in front of a real headless engine: each probe answers 400 with vLLM's text,
         then valid constrained requests are served (the engine never saw the probes).
table    shardgate in front of the simulator: for every case of TABLE the gateway's verdict
         (400 or not) is compared with xgrammar's own (Grammar.from_regex / from_ebnf /
         from_lark / from_json_schema / from_structural_tag, as vLLM's validation calls them).
         A case xgrammar accepts that the gateway refuses fails the run; the reverse (left to
         the engine) is listed.

Exit status 0 when every check held."""
import argparse, json, os, signal, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from differential import HOME, MODEL, NAME, ROOT, TOOLS, free_port, handshake_port, http, wait_http  # noqa: E402

# The issue's probes: what each would make the engine compile.
PROBES = [
    ("regex", "(((("),
    ("grammar", "root ::= ((("),
    ("structural_tag", "not json"),
    ("json", json.dumps({"type": "object", "properties": {"a": {"type": "foo"}}})),
    ("json", json.dumps({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}})),
]

VALID = [
    ("regex", "[a-c]{2,5}"),
    ("grammar", 'root ::= "yes" | "no"'),
    ("json", json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})),
    ("structural_tag", json.dumps({"type": "structural_tag", "format": {"type": "const_string", "value": "ok"}})),
]

TABLE = [("regex", r) for r in [
    "[ab]{3}", r"^\d{3}-\d{4}$", "(a|b)*c+d?", "(?:ab)+", r"(?<year>\d{4})", "a{2,}", "a{2,5}?", "a*?",
    r"[a-z0-9_\-]+", r"\u00e9\x41\u{1F600}\cA\q", "(a|)", "()", "a||b", r"[\d-z]", "[-a]", "[a-]", r"\.\*", "}",
    "é+", "[^]", "[+--]", r"\u{110000}", "a{1000000000000000}", "((((", "a)", "*a", "a|+b", "(?i)a", "(?=a)",
    "(?<!a)b", "(?P<n>a)", r"(a)\1", r"\bword", r"\p{L}", "a**", "a{2}{3}", "a{,3}", "a{x}", "a{3,1}", "a{3",
    "[]", "[abc", "[z-a]", "[a--]", "\\", r"\u{1234567}x", r"\u{}ab", r"\c1", "[a\nb]", "^*", "(*a)",
    "a{1000000000000001}", "a\nb", "[\\]]", "x{0}",
]] + [("grammar", g) for g in [
    'root ::= "a" | "b"', 'root ::= item+ "!"?\nitem ::= [a-z0-9_-] | "\\n" | "\\u00e9"',
    '# c\nroot ::= ("x" | ()) {2,5} tail{3}\ntail ::= [^"\\\\] # t\n', 'root ::= a (= "b")\na ::= "a"{1,}',
    'root ::= "" | [\\-\\]]', 'root[max_tokens=10] ::= "a"', 'root ::= "a"\n  "b"', 'root ::= "a"{2,-1}',
    "root ::= (((", 'root ::= ("a"', "root ::= ", 'root ::= "a" |', "root ::= other", 'start ::= "a"',
    'root ::= "a"\nroot ::= "b"', 'root ::= "a', 'root ::= "\\q"', "root ::= [z-a]", "root ::= [a-z",
    "root ::= [\\d]", 'root ::= "a"{3,1}', 'root ::= "a"{x}', 'root ::= "a" ; b', 'root ::= "a" a ::= "b"',
    '::= "a"', 'root ::= * "a"', '"a" ::= "b"', 'root ::= "a" +5', 'root ::= "a"{1000000000000001}',
    'start: "a"', '?start: a\na: "x"', "((((", 'a: "b"', 'start: "a" | "b"',
]] + [("json", json.dumps(s)) for s in [
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}, "required": ["a"]}, True, {},
    {"enum": [1, 2], "type": "nope"}, {"$ref": "#/$defs/a", "$defs": {"a": {"type": "string", "maxLength": 3}}},
    {"type": "object", "properties": {"next": {"$ref": "#"}}}, {"$ref": "https://example.com/s"},
    {"type": ["string", "null"]}, {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "number"}}]},
    {"type": "integer", "exclusiveMinimum": 1, "maximum": 2}, {"type": []}, {"$defs": {"x": {"type": "bad"}}},
    {"type": "string", "minLength": -1}, {"type": "array", "minItems": -1},
    False, [1], {"type": "foo"}, {"type": 3}, {"type": ["string", "bar"]}, {"$ref": "#/$defs/missing"}, {"$ref": 1},
    {"enum": []}, {"anyOf": {}}, {"type": "object", "properties": []}, {"type": "object", "required": "a"},
    {"type": "object", "required": [1]}, {"type": "array", "items": 3}, {"type": "array", "minItems": 3, "maxItems": 1},
    {"type": "string", "minLength": 5, "maxLength": 2}, {"type": "string", "minLength": 2.0},
    {"type": "integer", "minimum": 5, "maximum": 1}, {"type": "integer", "minimum": 1.5},
    {"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 1}, {"type": "number", "minimum": "a"},
    {"type": "integer", "multipleOf": 0}, {"type": "array", "maxItems": -1}, {"type": "object", "minProperties": -1},
    {"type": "integer", "minimum": 1e30},
]] + [("structural_tag", t) for t in [
    json.dumps({"type": "structural_tag", "format": {"type": "const_string", "value": "x"}}),
    json.dumps({"format": {"type": "tag", "begin": "<a>", "content": {"type": "any_text"}, "end": "</a>"}}),
    json.dumps({"structures": [{"begin": "<f>", "schema": {"type": "object"}, "end": "</f>"}], "triggers": ["<f"]}),
    "not json", "[1]", "{}", json.dumps({"type": "other", "format": {}}), json.dumps({"format": {"type": "nope"}}),
    json.dumps({"structures": [{"begin": "<f>", "schema": {"type": "bad"}, "end": "</f>"}], "triggers": ["<f"]}),
]]


def xgrammar_accepts(kind, text):
    """xgrammar's verdict, read the way vLLM's xgrammar validation reads each kind."""
    import xgrammar as xgr
    try:
        if kind == "regex":
            xgr.Grammar.from_regex(text)
        elif kind == "grammar":
            lark = all("::=" not in line.split("#")[0].split("//")[0] for line in text.split("\n"))
            (xgr.Grammar.from_lark if lark else xgr.Grammar.from_ebnf)(text)
        elif kind == "json":
            xgr.Grammar.from_json_schema(text)
        else:
            tag = json.loads(text)
            if isinstance(tag, dict) and "structures" in tag:
                items = [xgr.StructuralTagItem(begin=s["begin"], schema=json.dumps(s["schema"]), end=s["end"])
                         for s in tag["structures"]]
                xgr.Grammar.from_structural_tag(items, tag["triggers"])
            else:
                xgr.Grammar.from_structural_tag(text)
        return True
    except Exception:
        return False


def body_for(kind, text, max_tokens=8):
    return {"model": NAME, "messages": [{"role": "user", "content": "hi"}], "temperature": 0,
            "max_tokens": max_tokens, "structured_outputs": {kind: text}}


def start_engine(port, log):
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", VLLM_CPU_KVCACHE_SPACE="1")
    return subprocess.Popen([os.path.join(TOOLS, "run-engine.sh"), str(port)], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def stop(p):
    if p and p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL); p.wait()


class Direct:
    """The engine-core wire, spoken by hand: handshake, then ADDs and their outputs."""

    def __init__(self, work):
        import msgspec, zmq
        self.msgspec, self.zmq, self.work = msgspec, zmq, work
        self.enc = msgspec.msgpack.Encoder()
        self.engine = None

    def start(self):
        zmq = self.zmq
        self.ctx = zmq.Context()
        port = free_port()
        self.hs = self.ctx.socket(zmq.ROUTER); self.hs.bind(f"tcp://127.0.0.1:{port}")
        d = tempfile.mkdtemp(prefix="sg-constraints-")
        self.inp = self.ctx.socket(zmq.ROUTER); self.inp.bind(f"ipc://{d}/in.sock")
        self.out = self.ctx.socket(zmq.PULL); self.out.bind(f"ipc://{d}/out.sock")
        self.engine = start_engine(port, open(f"{self.work}/direct-engine.log", "a"))
        if not self.hs.poll(300_000):
            raise SystemExit("engine sent no HELLO")
        self.ident, _ = self.hs.recv_multipart()
        self.hs.send_multipart([self.ident, self.enc.encode({
            "addresses": {"inputs": [f"ipc://{d}/in.sock"], "outputs": [f"ipc://{d}/out.sock"],
                          "coordinator_input": None, "coordinator_output": None,
                          "frontend_stats_publish_address": None}, "parallel_config": {}})])
        self.inp.recv_multipart()  # registration
        self.hs.recv_multipart()  # READY

    def close(self):
        stop(self.engine)
        self.ctx.destroy(linger=0)

    def add(self, rid, kind, text):
        so = {k: None for k in ("json", "regex", "choice", "grammar", "json_object", "whitespace_pattern",
                                "structural_tag")}
        so.update({kind: text, "disable_any_whitespace": False, "disable_additional_properties": False,
                   "_backend": "xgrammar", "_backend_was_auto": True})
        sp = {"temperature": 0.0, "max_tokens": 4}
        if kind:
            sp["structured_outputs"] = so
        req = [rid, [1, 2, 3], None, sp, None, time.time(), None, None, None, None, None, 0, 0, 0,
               None, False, None, None, None, False, None, None]
        self.inp.send_multipart([self.ident, b"\x00", self.enc.encode(req)])

    def outcome(self, rid, timeout=60):
        """'served', 'request error', 'dead' or 'no answer'."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.engine.poll() is not None:
                return "dead"
            if not self.out.poll(1000):
                continue
            frames = self.out.recv_multipart()
            if frames[0] == b"ENGINE_CORE_DEAD":
                return "dead"
            batch = self.msgspec.msgpack.decode(frames[0])
            for o in batch[1] or []:
                if o[0] == rid and o[5] is not None:
                    return "request error" if o[5] == 3 else "served"
        return "no answer"


def part_direct(work):
    d, results = Direct(work), []
    d.start()
    try:
        for i, (kind, text) in enumerate(PROBES):
            rid = f"probe-{i}"
            d.add(rid, kind, text)
            got = d.outcome(rid)
            alive = got != "dead" and (d.add(f"after-{i}", "", "") or d.outcome(f"after-{i}") == "served")
            results.append({"probe": [kind, text], "engine": got, "serves_after": alive})
            print(f"direct  {kind:15} {text[:50]!r:55} -> {got}; serves after: {alive}", flush=True)
            if not alive:
                d.close(); d.start()
    finally:
        d.close()
    return results, True


def gateway(work, worker, extra_args=()):
    port = free_port()
    path = f"{work}/{worker}-0"
    gw = subprocess.Popen([os.environ.get("SHARDGATE", os.path.join(ROOT, "target", "release", "shardgate")),
                           "launch", "--worker-urls", f"ipc://{path}", "--model-path", MODEL,
                           "--served-model-name", NAME, "--host", "127.0.0.1", "--port", str(port),
                           "--metrics-port", str(free_port()), *extra_args],
                          stderr=open(f"{work}/gateway-{worker}.log", "w"))
    return gw, port, path


def part_gateway(work):
    gw, port, path = gateway(work, "real")
    eng = start_engine(handshake_port(path), open(f"{work}/gateway-engine.log", "w"))
    ok, results = True, []
    try:
        wait_http(f"http://127.0.0.1:{port}/readiness")
        base = f"http://127.0.0.1:{port}/v1/chat/completions"
        for kind, text in PROBES:
            status, raw = http("POST", base, body_for(kind, text))
            msg = json.loads(raw).get("error", {}).get("message", "") if status == 400 else raw[:200].decode()
            results.append({"probe": [kind, text], "status": status, "message": msg})
            print(f"gateway {kind:15} {text[:50]!r:55} -> {status} {msg[:90]}", flush=True)
            ok &= status == 400
        for kind, text in VALID:
            status, raw = http("POST", base, body_for(kind, text))
            print(f"gateway valid {kind:9} {text[:50]!r:55} -> {status}", flush=True)
            ok &= status == 200
        ok &= eng.poll() is None
    finally:
        stop(eng); gw.terminate(); gw.wait()
    return results, ok


def part_table(work):
    gw, port, path = gateway(work, "sim")
    sim = subprocess.Popen([os.path.join(os.path.dirname(os.environ.get("SHARDGATE", os.path.join(
        ROOT, "target", "release", "shardgate"))), "shardgate-sim"), "--worker-url", f"ipc://{path}",
        "--model-path", MODEL], stderr=open(f"{work}/sim.log", "w"))
    rows, over_refused, over_accepted = [], [], []
    try:
        wait_http(f"http://127.0.0.1:{port}/readiness")
        for kind, text in TABLE:
            status, _ = http("POST", f"http://127.0.0.1:{port}/v1/chat/completions", body_for(kind, text, 1))
            xg = xgrammar_accepts(kind, text)
            ours = status != 400
            rows.append({"kind": kind, "text": text, "xgrammar": xg, "gateway_status": status})
            if xg and not ours:
                over_refused.append((kind, text))
            elif ours and not xg:
                over_accepted.append((kind, text))
    finally:
        sim.terminate(); sim.wait(); gw.terminate(); gw.wait()
    agree = len(rows) - len(over_refused) - len(over_accepted)
    print(f"table: {agree}/{len(rows)} cases agree with xgrammar "
          f"({sum(r['xgrammar'] for r in rows)} accepted by it, {sum(not r['xgrammar'] for r in rows)} refused)")
    for kind, text in over_refused:
        print(f"  REFUSED but xgrammar accepts: {kind} {text!r}")
    for kind, text in over_accepted:
        print(f"  passed to the engine, xgrammar refuses: {kind} {text!r}")
    return rows, not over_refused


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="direct,gateway,table")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sg-constraints-")
    report, ok = {}, True
    for part in args.parts.split(","):
        rows, good = {"direct": part_direct, "gateway": part_gateway, "table": part_table}[part](work)
        report[part] = rows
        ok &= good
    json.dump(report, open(f"{work}/results.json", "w"), indent=1)
    print(f"{'all checks held' if ok else 'FAILED'} (logs and results.json in {work})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
