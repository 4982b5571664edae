#!/usr/bin/env python3
"""Every parser family end to end: the simulator emits the family's format (a golden vector's
model output), the gateway parses it, and the official `openai` SDK reads it back, through
`chat.completions.create` and through the SDK's `chat.completions.stream()` helper.

    python tests/sdk/test_parsers_e2e.py TARGET_DIR MODEL_DIR"""
import glob, json, os, sys, tempfile

import openai

from harness import Stack

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tools_param(tools):
    return [{"type": "function", "function": {"name": t["name"], "parameters": t.get("parameters") or {"type": "object"}}}
            for t in tools]


def norm_calls(calls):
    return [(c["name"], json.loads(c["arguments"]) if isinstance(c["arguments"], str) else c["arguments"]) for c in calls]


def check_tool_family(target, model_dir, work, parser, vector, case):
    tools = case.get("tools", vector.get("tools", []))
    expected_calls = [(c["name"], c["arguments"]) for c in case["calls"]]
    with Stack(target, model_dir, work, case["input"], gateway_args=["--tool-call-parser", parser,
                                                                    "--reasoning-parser", "passthrough"],
               served=vector.get("model", "sdk-model")) as stack:
        client = openai.OpenAI(base_url=stack.base_url, api_key="x", max_retries=0)
        args = dict(model=stack.served, messages=[{"role": "user", "content": "call a tool"}], tools=tools_param(tools))
        r = client.chat.completions.create(**args)
        m = r.choices[0].message
        got = norm_calls([{"name": c.function.name, "arguments": c.function.arguments} for c in (m.tool_calls or [])])
        assert got == expected_calls, f"non-stream calls {got} != {expected_calls}"
        assert (m.content or "").strip() == case["content"].strip(), f"content {m.content!r} != {case['content']!r}"
        assert r.choices[0].finish_reason == ("tool_calls" if expected_calls else "stop"), r.choices[0].finish_reason
        for c in m.tool_calls or []:
            assert c.id and c.type == "function", c
        with client.chat.completions.stream(**args) as stream:
            final = stream.get_final_completion()
        fm = final.choices[0].message
        got = norm_calls([{"name": c.function.name, "arguments": c.function.arguments} for c in (fm.tool_calls or [])])
        assert got == expected_calls, f"stream helper calls {got} != {expected_calls}"
        assert (fm.content or "").strip() == case["content"].strip(), f"stream content {fm.content!r}"
        assert final.choices[0].finish_reason == r.choices[0].finish_reason


def check_reasoning_family(target, model_dir, work, parser, case):
    with Stack(target, model_dir, work, case["input"], gateway_args=["--reasoning-parser", parser]) as stack:
        client = openai.OpenAI(base_url=stack.base_url, api_key="x", max_retries=0)
        args = dict(model=stack.served, messages=[{"role": "user", "content": "think"}])
        if case.get("force_reasoning_start"):
            args["extra_body"] = {"thinking": {"type": "enabled"}}
        r = client.chat.completions.create(**args)
        m = r.choices[0].message
        reasoning = getattr(m, "reasoning_content", None) or ""
        assert reasoning == case["reasoning"], f"reasoning {reasoning!r} != {case['reasoning']!r}"
        assert (m.content or "") == case["content"], f"content {m.content!r} != {case['content']!r}"
        reasoning, content = "", ""
        for chunk in client.chat.completions.create(stream=True, **args):
            for c in chunk.choices:
                reasoning += getattr(c.delta, "reasoning_content", None) or ""
                content += c.delta.content or ""
        assert reasoning == case["reasoning"], f"streamed reasoning {reasoning!r}"
        assert content == case["content"], f"streamed content {content!r}"


def main():
    target, model_dir = sys.argv[1], sys.argv[2]
    failures, runs = [], 0
    with tempfile.TemporaryDirectory(prefix="sg-parsers-") as work:
        for path in sorted(glob.glob(os.path.join(ROOT, "..", "crates", "parsers", "tests", "vectors", "tool", "*.json"))):
            vector = json.load(open(path))
            with_calls = [c for c in vector["cases"] if c["calls"]][:1] or vector["cases"][:1]
            for parser in vector["parsers"][:1]:
                for case in with_calls:
                    runs += 1
                    try:
                        check_tool_family(target, model_dir, os.path.join(work, f"t{runs}"), parser, vector, case)
                        print(f"ok   tool {parser}: {case['name']}")
                    except Exception as e:  # noqa: BLE001
                        failures.append(f"tool {parser}: {case['name']}: {e}")
                        print(f"FAIL tool {parser}: {case['name']}: {e}")
        for path in sorted(glob.glob(os.path.join(ROOT, "..", "crates", "parsers", "tests", "vectors", "reasoning", "*.json"))):
            vector = json.load(open(path))
            picks = [c for c in vector["cases"] if c["reasoning"] and c["content"]][:1]
            picks += [c for c in vector["cases"] if c.get("force_reasoning_start")][:1]
            for parser in vector["parsers"]:
                for case in picks:
                    runs += 1
                    try:
                        check_reasoning_family(target, model_dir, os.path.join(work, f"r{runs}"), parser, case)
                        print(f"ok   reasoning {parser}: {case['name']}")
                    except Exception as e:  # noqa: BLE001
                        failures.append(f"reasoning {parser}: {case['name']}: {e}")
                        print(f"FAIL reasoning {parser}: {case['name']}: {e}")
    print(f"{runs - len(failures)}/{runs} parser families passed end to end")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
