#!/usr/bin/env python3
"""The official `openai` Python SDK reading the MCP tool loop of /v1/responses.

    python tests/sdk/test_mcp_sdk.py TARGET_DIR MODEL_DIR MCP_HOME

MCP_HOME is what tools/mcp/install.sh prints. The gateway runs tools/mcp/pyserver.py (PyPI
`mcp`) and `@modelcontextprotocol/server-everything` over stdio; the simulator calls their
tools and answers once the output is in its prompt. Checks `client.responses.create` (typed
`McpListTools` / `McpCall` items) and `client.responses.stream()` (the typed MCP events, and
`get_final_response()` equal to the one-shot items), and a call held for approval continued
with `previous_response_id` and an `mcp_approval_response` input item."""
import json, os, sys, tempfile

import openai

from harness import Stack, run_checks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def call(name, arguments):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


SCRIPT = [
    {"prompt_contains": "sunny in Lyon", "text": "Sunny in Lyon."},
    {"prompt_contains": "Echo: from the sdk", "text": "Echoed."},
    {"prompt_contains": "weather please", "text": call("weather", {"city": "Lyon"})},
    {"prompt_contains": "echo please", "text": call("echo", {"message": "from the sdk"})},
    {"text": "Nothing to call."},
]


def items_of(response):
    """The items without their ids, and without the stream helper's `parsed` (always None here)."""
    out = []
    for item in response.output:
        d = item.model_dump(exclude={"id"})
        for part in d.get("content") or []:
            part.pop("parsed", None)
        out.append(d)
    return out


def create_runs_the_tool(client):
    r = client.responses.create(model="sdk-model", input="weather please",
                                tools=[{"type": "mcp", "server_label": "py", "require_approval": "never"}])
    kinds = [i.type for i in r.output]
    assert kinds == ["mcp_list_tools", "mcp_call", "message"], r.output
    listed, done = r.output[0], r.output[1]
    assert isinstance(listed, openai.types.responses.response_output_item.McpListTools), type(listed)
    assert listed.server_label == "py" and "weather" in [t.name for t in listed.tools], listed
    assert isinstance(done, openai.types.responses.response_output_item.McpCall), type(done)
    assert done.name == "weather" and done.server_label == "py" and json.loads(done.arguments) == {"city": "Lyon"}, done
    assert done.output == "sunny in Lyon, 21 C" and done.error is None and done.status == "completed", done
    assert r.output_text == "Sunny in Lyon." and r.status == "completed", r


def stream_reads_the_events(client):
    tools = [{"type": "mcp", "server_label": "everything"}]
    seen, arguments = [], []
    with client.responses.stream(model="sdk-model", input="echo please", tools=tools) as stream:
        for event in stream:
            seen.append(event.type)
            if event.type == "response.mcp_call_arguments.delta":
                arguments.append(event.delta)
            if event.type == "response.mcp_call.completed":
                assert event.output_index == 1 and event.item_id.startswith("mcp_"), event
        final = stream.get_final_response()
    for name in ["response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed",
                 "response.mcp_call.in_progress", "response.mcp_call_arguments.delta",
                 "response.mcp_call_arguments.done", "response.mcp_call.completed", "response.completed"]:
        assert name in seen, (name, seen)
    assert json.loads("".join(arguments)) == {"message": "from the sdk"}, arguments
    assert final.output[1].output == "Echo: from the sdk" and final.output_text == "Echoed.", final
    one_shot = client.responses.create(model="sdk-model", input="echo please", tools=tools)
    assert items_of(one_shot) == items_of(final), (items_of(one_shot), items_of(final))


def approval_is_answered(client):
    tools = [{"type": "mcp", "server_label": "py", "require_approval": "always"}]
    asked = client.responses.create(model="sdk-model", input="weather please", tools=tools)
    request = asked.output[-1]
    assert isinstance(request, openai.types.responses.response_output_item.McpApprovalRequest), asked.output
    answer = {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}
    r = client.responses.create(model="sdk-model", previous_response_id=asked.id, input=[answer], tools=tools)
    assert [i.type for i in r.output] == ["mcp_list_tools", "mcp_call", "message"], r.output
    done = r.output[1]
    assert done.approval_request_id == request.id and done.output == "sunny in Lyon, 21 C", done
    assert r.output_text == "Sunny in Lyon.", r
    with client.responses.stream(model="sdk-model", previous_response_id=asked.id, input=[answer], tools=tools) as stream:
        seen = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.mcp_call.completed" in seen, seen
    assert items_of(final) == items_of(r), (items_of(final), items_of(r))
    try:
        client.responses.create(model="sdk-model", previous_response_id=r.id, input=[answer], tools=tools)
        raise AssertionError("no exception")
    except openai.BadRequestError as e:
        assert e.param == "input[0].approval_request_id" and "answered already" in str(e), e


def unknown_server_is_a_bad_request(client):
    try:
        client.responses.create(model="sdk-model", input="hi", tools=[{"type": "mcp", "server_label": "nope"}])
        raise AssertionError("no exception")
    except openai.BadRequestError as e:
        assert e.param == "tools[0].server_url" and "'nope'" in str(e), e


TESTS = [create_runs_the_tool, stream_reads_the_events, approval_is_answered, unknown_server_is_a_bad_request]


def main():
    target, model_dir, home = sys.argv[1], sys.argv[2], sys.argv[3]
    print(f"openai SDK {openai.__version__}")
    python = os.path.join(home, "venv", "bin", "python")
    everything = os.path.join(home, "npm", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
    failures = 0
    with tempfile.TemporaryDirectory(prefix="sg-sdk-mcp-") as work:
        config = os.path.join(work, "mcp.json")
        with open(config, "w") as f:
            json.dump({"servers": [
                {"name": "py", "protocol": "stdio", "command": python, "args": [os.path.join(ROOT, "tools", "mcp", "pyserver.py")]},
                {"name": "everything", "protocol": "stdio", "command": "node", "args": [everything, "stdio"]},
            ]}, f)
        args = ["--reasoning-parser", "qwen3", "--tool-call-parser", "qwen", "--mcp-config-path", config]
        with Stack(target, model_dir, os.path.join(work, "stack"), SCRIPT, gateway_args=args) as stack:
            failures = run_checks(TESTS, openai.OpenAI(base_url=stack.base_url, api_key="unused", max_retries=0))
    print(f"{len(TESTS) - failures}/{len(TESTS)} MCP SDK checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
