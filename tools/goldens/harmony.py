#!/usr/bin/env python3
"""Golden vectors of shardgate's Harmony (gpt-oss) renderer and output parser.

    ~/.cache/real-vllm/venv/bin/python tools/goldens/harmony.py [--check] [--official-python PY]

The messages come from vLLM's own rules, in the real-vLLM venv
(`vllm/entrypoints/openai/parser/harmony_utils.py`: the preamble with the reasoning effort
and the tools, chat messages → Harmony messages, analysis dropped before the last final
answer); they are rendered, and model outputs parsed, by the official `openai-harmony`
package (0.0.8, the version of the crate shardgate renders with), run by another python
(`harmony_official.py`; default `.venv/bin/python`, with tools/goldens/requirements.txt).
vLLM's venv carries `oss-harmony`, a fork that writes a tool result's header as
`functions.NAME<|channel|>commentary to=assistant`; the official package, gpt-oss's own chat
template and SMG write `functions.NAME to=assistant<|channel|>commentary`, and so do the
goldens. Offline: the official package reads its vocabulary from `TIKTOKEN_ENCODINGS_BASE`,
the file written from the npm gpt-oss tokenizer (`reference.tiktoken_dir`).

`harmony.json`: every conversation of `cases.py` (tool-call arguments as the JSON text a
client sends) under each reasoning effort; the conversation start date is pinned
(`VLLM_SYSTEM_START_DATE`), and `continue_final_message` (which vLLM does not offer for
gpt-oss) renders the conversation without the last message's `<|end|>`.

`harmony_output.json`: model outputs (text with Harmony's special tokens), their token ids,
the messages the official `StreamableParser` reads from them token by token (a rejected token
skipped, the stream ended with `process_eos`), and those messages routed as
`crates/parsers/src/harmony.rs` says: `analysis` to reasoning, `final` and recipient-less
`commentary` to content, a function recipient to a tool call; two messages of one field joined
by a newline."""
import copy, json, os, pathlib, subprocess, sys

START_DATE = "2026-01-15"
os.environ["VLLM_SYSTEM_START_DATE"] = START_DATE

from cases import CASES  # noqa: E402
from reference import REPO, tiktoken_dir, vllm_version, write_or_check  # noqa: E402

from openai_harmony import HarmonyError, Role  # noqa: E402


def harmony_utils():
    from vllm.entrypoints.openai.parser import harmony_utils as h
    return h


def as_client_sends(messages):
    """Tool-call arguments as the JSON text a client sends (the renderer reads them as written)."""
    out = copy.deepcopy(messages)
    for m in out:
        for call in m.get("tool_calls") or []:
            if not isinstance(call["function"]["arguments"], str):
                call["function"]["arguments"] = json.dumps(call["function"]["arguments"], ensure_ascii=False)
    return out


def refusals():
    """What vLLM refuses a conversation with."""
    from vllm.exceptions import VLLMValidationError
    return (ValueError, HarmonyError, VLLMValidationError)


def harmony_messages(h, messages, tools, variables):
    """vLLM's `_make_request_with_harmony` up to the messages it renders."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionToolsParam
    effort = variables.get("reasoning_effort")
    if effort == "none":
        raise ValueError("Harmony does not support reasoning_effort='none'")
    instructions, rest = h.extract_instructions_from_messages(messages)
    tool_params = [ChatCompletionToolsParam.model_validate(t) for t in tools] if tools else None
    msgs = h.build_harmony_preamble(instructions=instructions, tools=tool_params, reasoning_effort=effort)
    msgs += h.parse_chat_inputs_to_harmony_messages(rest)
    return h.auto_drop_analysis_messages(msgs)


FEW = {"hello", "system_multi_turn", "tools_first_turn", "tool_result", "continue_final_reasoning",
       "system_then_developer"}
SETTINGS = [{}, {"reasoning_effort": "high"}, {"reasoning_effort": "low"}, {"reasoning_effort": "medium"},
            {"reasoning_effort": "none"}, {"reasoning_effort": "minimal"}]


def render_goldens(h, official):
    cases, requests = [], []
    for name, messages, tools, continue_final in CASES:
        messages = as_client_sends(messages)
        for n, variables in enumerate(SETTINGS):
            if n >= 2 and name not in FEW:
                continue
            case = {"name": name, "messages": messages, "tools": tools, "variables": variables,
                    "continue_final_message": continue_final}
            try:
                msgs = harmony_messages(h, copy.deepcopy(messages), tools, variables)
            except refusals():
                case["error"] = True
            else:
                continued = continue_final and msgs[-1].author.role == Role.ASSISTANT
                requests.append((case, {"messages": [m.to_dict() for m in msgs], "continue_final": continued}))
            cases.append(case)
    for (case, _), rendered in zip(requests, official(render=[r for _, r in requests])["render"]):
        case["prompt"] = rendered["prompt"]
        case["token_ids"] = rendered["token_ids"]
    return cases


OUTPUTS = [
    ("final_only", "<|channel|>final<|message|>Hello there!<|return|>"),
    ("reasoning_then_final", "<|channel|>analysis<|message|>The user greets; reply.<|end|>"
                             "<|start|>assistant<|channel|>final<|message|>Hi! How can I help?<|return|>"),
    ("tool_call", "<|channel|>analysis<|message|>Need the weather.<|end|>"
                  "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
                  "{\"city\": \"Paris\", \"days\": 2}<|call|>"),
    ("tool_call_constrained", "<|channel|>analysis<|message|>Search it.<|end|>"
                              "<|start|>assistant<|channel|>commentary to=functions.search <|constrain|>json<|message|>"
                              "{\"query\":\"naïve café\"}<|call|>"),
    ("preamble_then_call", "<|channel|>commentary<|message|>Let me check the weather.<|end|>"
                           "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{}<|call|>"),
    ("two_analysis", "<|channel|>analysis<|message|>First thought.<|end|>"
                     "<|start|>assistant<|channel|>analysis<|message|>Second thought.<|end|>"
                     "<|start|>assistant<|channel|>final<|message|>Done.<|return|>"),
    ("two_finals", "<|channel|>final<|message|>Part one.<|end|>"
                   "<|start|>assistant<|channel|>final<|message|>Part two.<|return|>"),
    ("unicode", "<|channel|>analysis<|message|>日本語 é 🙂 \"quotes\"\n<tags><|end|>"
                "<|start|>assistant<|channel|>final<|message|>Ça va 👍🏽 — ok<|return|>"),
    ("truncated_reasoning", "<|channel|>analysis<|message|>Thinking about a very long"),
    ("truncated_in_header", "<|channel|>analysis<|message|>Plan.<|end|><|start|>assistant<|channel|>fin"),
    ("builtin_tool_ignored", "<|channel|>analysis<|message|>Browse.<|end|>"
                             "<|start|>assistant to=browser.search<|channel|>commentary json<|message|>{\"q\": \"x\"}<|call|>"),
    ("empty_final", "<|channel|>analysis<|message|>Nothing to say.<|end|>"
                    "<|start|>assistant<|channel|>final<|message|><|return|>"),
    ("call_first", " to=functions.now<|channel|>commentary json<|message|><|call|>"),
    ("garbage_then_final", "oops<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>Recovered.<|return|>"),
    ("final_with_markup", "<|channel|>final<|message|>Use `<think>` tags and {\"json\": true}.<|return|>"),
    ("end_instead_of_return", "<|channel|>final<|message|>Short answer.<|end|>"),
]


def route(h, messages):
    """The messages' text by field, as the stream routes it."""
    reasoning, content, calls = [], [], []
    for m in messages:
        if m.get("role") != "assistant":
            continue
        text = "".join(c.get("text", "") for c in m.get("content", []))
        recipient = m.get("recipient")
        if recipient is not None and "<|constrain|>" in recipient:
            recipient = recipient[:recipient.index("<|constrain|>")].rstrip() or None
        channel = m.get("channel")
        if recipient and h.is_function_recipient(recipient):
            calls.append({"name": h.extract_function_from_recipient(recipient), "arguments": text})
        elif channel == "analysis" and text:
            reasoning.append(text)
        elif (channel == "final" or (channel == "commentary" and recipient is None)) and text:
            content.append(text)
    return {"reasoning": "\n".join(reasoning), "content": "\n".join(content), "calls": calls}


def output_goldens(h, official):
    tokens = official(encode=[text for _, text in OUTPUTS])["encode"]
    parsed = official(parse=tokens)["parse"]
    return [{"name": name, "text": text, "token_ids": ids, "messages": messages, **route(h, messages)}
            for (name, text), ids, messages in zip(OUTPUTS, tokens, parsed)]


def official_runner(python):
    """Calls `harmony_official.py` with the official package, offline."""
    env = {**os.environ, "TIKTOKEN_ENCODINGS_BASE": str(tiktoken_dir())}
    script = pathlib.Path(__file__).with_name("harmony_official.py")

    def run(render=(), parse=(), encode=()):
        request = json.dumps({"render": list(render), "parse": list(parse), "encode": list(encode)})
        done = subprocess.run([python, str(script)], input=request, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            sys.exit(f"{python} {script} failed (pip install -r tools/goldens/requirements.txt):\n{done.stderr}")
        return json.loads(done.stdout)
    return run


def main():
    args = sys.argv[1:]
    check = "--check" in args
    python = args[args.index("--official-python") + 1] if "--official-python" in args else str(REPO / ".venv/bin/python")
    h = harmony_utils()
    official = official_runner(python)
    reference = (f"messages: vllm {vllm_version()} vllm/entrypoints/openai/parser/harmony_utils.py; "
                 "rendering: openai-harmony 0.0.8")
    ok = write_or_check("harmony", {"renderer": "harmony", "reference": reference, "start_date": START_DATE,
                                    "tokenizer": "o200k_harmony", "cases": render_goldens(h, official)}, check)
    ok &= write_or_check("harmony_output", {"parser": "harmony", "reference": "openai-harmony 0.0.8 StreamableParser",
                                            "cases": output_goldens(h, official)}, check)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
