#!/usr/bin/env python3
"""The official `openai` Python SDK's Responses client against shardgate (+ shardgate-sim).

    python tests/sdk/test_responses_sdk.py TARGET_DIR MODEL_DIR

Starts the simulator and the gateway from TARGET_DIR (release binaries): one stack answering with
text, one whose engine speaks a Qwen tool call (gateway with Qwen's reasoning and tool parsers),
and checks `client.responses.create`, the `client.responses.stream()` helper (its text deltas add
up to `output_text`, `get_final_response()`), function calls streamed and not (arguments parsed by
the SDK for a strict tool), `text.format` json_schema, `BadRequestError` for a bad request, and the stored
state (`previous_response_id`, retrieve, input items, delete, the Conversations client)."""
import json, os, sys, tempfile

import openai

from harness import Stack, run_checks

TEXT = "Responses work: every token arrives, even 日本語 and emoji 🙂."
CALL = ('<think>the user wants weather</think>Checking.<tool_call>\n'
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather by city", "strict": True,
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                          "additionalProperties": False}}


def create_text(client):
    r = client.responses.create(model="sdk-model", input="hi", instructions="Be brief.")
    assert r.id.startswith("resp_") and r.object == "response", r
    assert r.status == "completed" and r.output_text == TEXT, r
    assert r.output[0].type == "message" and r.output[0].id.startswith("msg_"), r.output
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens, r.usage
    assert r.instructions == "Be brief." and r.tools == [] and r.parallel_tool_calls is True, r


def stream_helper(client):
    deltas, kinds = [], set()
    with client.responses.stream(model="sdk-model", input=[{"role": "user", "content": "hi"}]) as stream:
        for event in stream:
            kinds.add(event.type)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert "".join(deltas) == TEXT and len(deltas) > 5, deltas
    assert final.output_text == TEXT and final.status == "completed", final
    assert {"response.created", "response.in_progress", "response.completed"} <= kinds, kinds


def raw_stream_sequence(client):
    events = list(client.responses.create(model="sdk-model", input="hi", stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events))), events
    assert events[-1].type == "response.completed" and events[-1].response.output_text == TEXT, events[-1]


def json_schema_format(client):
    fmt = {"type": "json_schema", "name": "answer", "strict": True,
           "schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}
    r = client.responses.create(model="sdk-model", input="hi", text={"format": fmt})
    assert r.status == "completed" and r.text.format.type == "json_schema", r.text


def bad_request_raises(client):
    try:
        client.responses.create(model="sdk-model", input=[{"role": "user", "content": [
            {"type": "input_image", "image_url": "data:image/png;base64,AA"}]}])
        raise AssertionError("no exception")
    except openai.BadRequestError as e:
        assert e.status_code == 400 and e.param == "input[0].content[0].image_url", (e.param, e)
    try:
        client.responses.create(model="sdk-model", input="hi", extra_body={"max_tokens": 5})
        raise AssertionError("no exception")
    except openai.BadRequestError as e:
        assert e.param == "max_tokens" and "max_output_tokens" in str(e), e


def previous_response_not_found(client):
    try:
        client.responses.create(model="sdk-model", input="hi", previous_response_id="resp_nope")
        raise AssertionError("no exception")
    except openai.NotFoundError as e:
        assert e.status_code == 404, e


def stored_state(client):
    """`previous_response_id`, retrieve, input items, delete, and the Conversations client."""
    first = client.responses.create(model="sdk-model", input="remember this")
    second = client.responses.create(model="sdk-model", input="and now?", previous_response_id=first.id)
    assert second.previous_response_id == first.id and second.output_text == TEXT, second
    got = client.responses.retrieve(first.id)
    assert got.id == first.id and got.output_text == TEXT, got
    items = client.responses.input_items.list(first.id)
    assert [i.content[0].text for i in items.data] == ["remember this"], items
    client.responses.delete(first.id)
    try:
        client.responses.retrieve(first.id)
        raise AssertionError("deleted response still retrievable")
    except openai.NotFoundError:
        pass
    conv = client.conversations.create(metadata={"topic": "sdk"})
    assert conv.id.startswith("conv_") and conv.metadata == {"topic": "sdk"}, conv
    r = client.responses.create(model="sdk-model", input="in a conversation", conversation=conv.id)
    assert r.output_text == TEXT, r
    roles = [i.role for i in client.conversations.items.list(conv.id, order="asc").data]
    assert roles == ["user", "assistant"], roles
    assert client.conversations.delete(conv.id).deleted is True


def function_call(client):
    r = client.responses.parse(model="sdk-model", input="weather?", tools=[WEATHER])
    kinds = [item.type for item in r.output]
    assert kinds == ["reasoning", "message", "function_call"], kinds
    call = r.output[2]
    assert call.name == "get_weather" and call.call_id.startswith("call_") and call.status == "completed", call
    assert call.parsed_arguments == {"city": "Paris"}, call
    assert r.output[0].content[0].text == "the user wants weather", r.output[0]
    assert r.usage.output_tokens_details.reasoning_tokens > 0, r.usage
    # The result goes back as the next turn's input.
    follow = client.responses.create(model="sdk-model", tools=[WEATHER], input=[
        {"role": "user", "content": "weather?"}, *[item.model_dump(exclude_none=True) for item in r.output],
        {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps({"temp": 18})}])
    assert follow.status == "completed", follow


def function_call_streamed(client):
    arguments = []
    with client.responses.stream(model="sdk-model", input="weather?", tools=[WEATHER]) as stream:
        for event in stream:
            if event.type == "response.function_call_arguments.delta":
                arguments.append(event.delta)
        final = stream.get_final_response()
    call = [item for item in final.output if item.type == "function_call"]
    assert len(call) == 1 and call[0].parsed_arguments == {"city": "Paris"}, final.output
    assert "".join(arguments) == call[0].arguments, arguments


TEXT_TESTS = (create_text, stream_helper, raw_stream_sequence, json_schema_format, bad_request_raises,
              previous_response_not_found, stored_state)
CALL_TESTS = (function_call, function_call_streamed)


def main():
    target, model_dir = sys.argv[1], sys.argv[2]
    print(f"openai SDK {openai.__version__}")
    failures = 0
    with tempfile.TemporaryDirectory(prefix="sg-sdk-responses-") as work:
        with Stack(target, model_dir, os.path.join(work, "text"), TEXT) as stack:
            failures += run_checks(TEXT_TESTS, openai.OpenAI(base_url=stack.base_url, api_key="unused", max_retries=0))
        parsers = ["--reasoning-parser", "qwen3", "--tool-call-parser", "qwen"]
        with Stack(target, model_dir, os.path.join(work, "call"), CALL, gateway_args=parsers) as stack:
            failures += run_checks(CALL_TESTS, openai.OpenAI(base_url=stack.base_url, api_key="unused", max_retries=0))
    total = len(TEXT_TESTS) + len(CALL_TESTS)
    print(f"{total - failures}/{total} Responses SDK checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
