#!/usr/bin/env python3
"""The official `anthropic` Python SDK against shardgate's Messages API (+ shardgate-sim, scripted).

    python tests/sdk/test_anthropic_sdk.py TARGET_DIR MODEL_DIR

Starts the simulator and the gateway (with an API key, and Qwen's tool-call and reasoning
parsers) from TARGET_DIR, then checks that the SDK reads messages and their usage, that its
`messages.stream()` helper accumulates the same message (text, thinking, tool calls), that
tool_use blocks come back with parsed inputs, that `count_tokens` works, that errors raise the
SDK's exception classes, that both key styles are accepted, and that an error event mid-stream
raises."""
import os, sys, tempfile

import anthropic

from harness import Stack

KEY = "sk-ant-sdk-test"
TEXT = "Streaming works: every token arrives, even 日本語 and emoji 🙂."
TOOLS = [
    {"name": "get_weather", "description": "Weather for a city",
     "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
    {"name": "get_time", "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}}},
]
SCRIPT = [
    # A forced call: the engine is held to the tool's schema and speaks its JSON.
    {"prompt_contains": "forced weather", "text": "{\"city\": \"Paris\"}"},
    # The model's own call, in Qwen's syntax, after some text.
    {"prompt_contains": "ask the tool",
     "text": "Let me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"},
    {"prompt_contains": "think first", "text": "<think>plan the answer</think>The answer."},
    {"text": TEXT},
]
MODEL = "sdk-model"


def user(text):
    return [{"role": "user", "content": text}]


def client_for(stack, **kwargs):
    return anthropic.Anthropic(base_url=stack.root_url, max_retries=0, **kwargs)


def main():
    target, model_dir = sys.argv[1], sys.argv[2]
    print(f"anthropic SDK {anthropic.__version__}")
    # Only what each test passes decides how the SDK authenticates.
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_PROFILE"):
        os.environ.pop(name, None)
    failures, checks = 0, 0
    with tempfile.TemporaryDirectory(prefix="sg-anthropic-") as work:
        gateway_args = ["--api-key", KEY, "--tool-call-parser", "qwen", "--reasoning-parser", "qwen3"]
        with Stack(target, model_dir, os.path.join(work, "ok"), SCRIPT, gateway_args=gateway_args) as stack:
            for name, fn in TESTS:
                checks += 1
                try:
                    fn(stack)
                    print(f"ok   {name}")
                except Exception as e:  # noqa: BLE001 - report and continue
                    failures += 1
                    print(f"FAIL {name}: {type(e).__name__}: {e}")
        # A stream whose engine dies mid-way: the SDK raises from the error event.
        with Stack(target, model_dir, os.path.join(work, "die"), TEXT * 50,
                   sim_args=["--fault", "die@2", "--itl-ms", "20"]) as stack:
            checks += 1
            try:
                stream_error_raises(client_for(stack, api_key="unused"))
                print("ok   stream_error_raises")
            except Exception as e:  # noqa: BLE001
                failures += 1
                print(f"FAIL stream_error_raises: {type(e).__name__}: {e}")
    print(f"{checks - failures}/{checks} Anthropic SDK checks passed")
    sys.exit(1 if failures else 0)


def create_text(stack):
    """`messages.create`, not streamed, with the SDK's default auth (Authorization: Bearer)."""
    m = client_for(stack, api_key=KEY).messages.create(model=MODEL, max_tokens=200, messages=user("hi"),
                                                       system="Be brief.", metadata={"user_id": "u1"},
                                                       extra_body={"temperature": 0.2, "top_k": 5})
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_"), m
    assert [b.type for b in m.content] == ["text"] and m.content[0].text == TEXT, m.content
    assert m.stop_reason == "end_turn" and m.stop_sequence is None, m
    assert m.usage.input_tokens > 0 and m.usage.output_tokens > 5, m.usage
    assert m.usage.cache_read_input_tokens is not None and m.usage.cache_creation_input_tokens == 0, m.usage


def stream_helper_text(stack):
    """`messages.stream`: the text as it comes, and the final message equal to the non-streamed one."""
    client = client_for(stack, api_key=KEY)
    with client.messages.stream(model=MODEL, max_tokens=200, messages=user("hi")) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(pieces) == TEXT and len(pieces) > 5, pieces
    assert final.content[0].text == TEXT and final.stop_reason == "end_turn", final
    whole = client.messages.create(model=MODEL, max_tokens=200, messages=user("hi"))
    assert final.usage.input_tokens == whole.usage.input_tokens, (final.usage, whole.usage)
    assert final.usage.output_tokens == whole.usage.output_tokens, (final.usage, whole.usage)


def stop_sequences(stack):
    m = client_for(stack, api_key=KEY).messages.create(model=MODEL, max_tokens=200, messages=user("hi"),
                                                       stop_sequences=["日本語"])
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == "日本語", m
    assert m.content[0].text == "Streaming works: every token arrives, even ", m.content


def forced_tool_call(stack):
    """`tool_choice` of one tool: a tool_use block with the parsed input, streamed and not."""
    client = client_for(stack, api_key=KEY)
    args = dict(model=MODEL, max_tokens=200, messages=user("forced weather please"), tools=TOOLS,
                tool_choice={"type": "tool", "name": "get_weather"})
    m = client.messages.create(**args)
    assert m.stop_reason == "tool_use", m
    (call,) = [b for b in m.content if b.type == "tool_use"]
    assert call.name == "get_weather" and call.input == {"city": "Paris"} and call.id.startswith("toolu_"), call
    with client.messages.stream(**args) as stream:
        final = stream.get_final_message()
    (call,) = [b for b in final.content if b.type == "tool_use"]
    assert call.name == "get_weather" and call.input == {"city": "Paris"}, final
    assert final.stop_reason == "tool_use", final


def model_tool_call(stack):
    """The model's own call (`auto`): text, then a tool_use block, streamed and not."""
    client = client_for(stack, api_key=KEY)
    args = dict(model=MODEL, max_tokens=200, messages=user("ask the tool about Oslo"), tools=TOOLS)
    for m in (client.messages.create(**args), stream_final(client, args)):
        assert [b.type for b in m.content] == ["text", "tool_use"], m.content
        assert m.content[0].text == "Let me check.", m.content
        assert (m.content[1].name, m.content[1].input) == ("get_weather", {"city": "Oslo"}), m.content
        assert m.stop_reason == "tool_use", m
    # The call and its result as history: a mixed user turn (result, then text) is accepted.
    call = client.messages.create(**args).content[1]
    history = user("ask the tool about Oslo") + [
        {"role": "assistant", "content": [{"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "cold"},
                                     {"type": "text", "text": "thanks"}]},
    ]
    m = client.messages.create(model=MODEL, max_tokens=200, messages=history, tools=TOOLS)
    assert m.content[0].text == "Let me check." and m.content[1].type == "tool_use", m.content


def stream_final(client, args):
    with client.messages.stream(**args) as stream:
        return stream.get_final_message()


def thinking_blocks(stack):
    client = client_for(stack, api_key=KEY)
    args = dict(model=MODEL, max_tokens=200, messages=user("think first"),
                thinking={"type": "enabled", "budget_tokens": 100})
    for m in (client.messages.create(**args), stream_final(client, args)):
        assert [b.type for b in m.content] == ["thinking", "text"], m.content
        assert m.content[0].thinking == "plan the answer" and m.content[0].signature == "", m.content
        assert m.content[1].text == "The answer.", m.content


def count_tokens(stack):
    client = client_for(stack, api_key=KEY)
    counted = client.messages.count_tokens(model=MODEL, messages=user("hi"), system="Be brief.")
    with client.messages.stream(model=MODEL, max_tokens=5, messages=user("hi"), system="Be brief.") as stream:
        final = stream.get_final_message()
    assert counted.input_tokens == final.usage.input_tokens > 0, (counted, final.usage)
    with_tools = client.messages.count_tokens(model=MODEL, messages=user("hi"), system="Be brief.", tools=TOOLS)
    assert with_tools.input_tokens > counted.input_tokens, (with_tools, counted)


def errors_raise_sdk_exceptions(stack):
    client = client_for(stack, api_key=KEY)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    cases = [
        (dict(model=MODEL, messages=[{"role": "user", "content": [image]}]), anthropic.BadRequestError,
         "messages.0.content.0.source: the model"),
        (dict(model=MODEL, messages=user("hi"), extra_body={"temperature": 5}), anthropic.BadRequestError,
         "temperature"),
        (dict(model="nope", messages=user("hi")), anthropic.NotFoundError, "nope"),
    ]
    for kwargs, cls, words in cases:
        try:
            client.messages.create(max_tokens=20, **kwargs)
            raise AssertionError(f"no exception for {kwargs}")
        except cls as e:
            assert words in e.message and e.body["type"] == "error", (e.message, e.body)
    try:
        client_for(stack, api_key="wrong").messages.create(model=MODEL, max_tokens=5, messages=user("hi"))
        raise AssertionError("no exception for a wrong key")
    except anthropic.AuthenticationError as e:
        assert e.status_code == 401 and e.body["error"]["type"] == "authentication_error", e.body


def x_api_key_header(stack):
    """The older SDKs' (and curl users') `x-api-key` header instead of Bearer."""
    client = client_for(stack, default_headers={"x-api-key": KEY})
    m = client.messages.create(model=MODEL, max_tokens=200, messages=user("hi"))
    assert m.content[0].text == TEXT, m
    bad = client_for(stack, default_headers={"x-api-key": "wrong"})
    try:
        bad.messages.create(model=MODEL, max_tokens=5, messages=user("hi"))
        raise AssertionError("no exception for a wrong x-api-key")
    except anthropic.AuthenticationError:
        pass


def stream_error_raises(client):
    client.messages.create(model=MODEL, max_tokens=2, messages=user("warm"))
    seen = 0
    try:
        with client.messages.stream(model=MODEL, max_tokens=2000, messages=user("hi")) as stream:
            for _ in stream:
                seen += 1
                if seen == 3:
                    # Trigger the engine's death with another request while this stream runs.
                    try:
                        client.messages.create(model=MODEL, max_tokens=2, messages=user("x"))
                    except anthropic.APIError:
                        pass
        raise AssertionError("stream ended without an error")
    except anthropic.APIStatusError as e:
        assert "engine" in str(e).lower(), e


TESTS = [(f.__name__, f) for f in (create_text, stream_helper_text, stop_sequences, forced_tool_call, model_tool_call,
                                  thinking_blocks, count_tokens, errors_raise_sdk_exceptions, x_api_key_header)]

if __name__ == "__main__":
    main()
