"""The conversations every native renderer's goldens are made of, in the shape shardgate's
API layer hands a renderer (`src/api/openai/conversation.rs`): content as strings, assistant
tool-call arguments as objects, reasoning under both `reasoning` and `reasoning_content`.

Each case is (name, messages, tools, continue_final_message). The generators run each case
through the reference encoder under every thinking and effort setting the renderer has."""

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web — returns snippets",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "number"},
                                                    "filters": {"type": "object"}}}}}
TOOLS = [WEATHER, SEARCH]


def user(text):
    return {"role": "user", "content": text}


def system(text):
    return {"role": "system", "content": text}


def developer(text):
    return {"role": "developer", "content": text, "tools": None}


def assistant(text, reasoning=None, calls=None):
    m = {"role": "assistant", "content": text}
    if calls:
        m["tool_calls"] = [{"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                           for i, (n, a) in enumerate(calls)]
    if reasoning is not None:
        m["reasoning"] = reasoning
        m["reasoning_content"] = reasoning
    return m


def tool(call_id, text):
    return {"role": "tool", "content": text, "tool_call_id": call_id}


PARIS = ("get_weather", {"city": "Paris", "days": 2})
ODD_ARGS = ("search", {"query": "naïve \"café\" <b>", "limit": 2.5,
                       "filters": {"langs": ["fr", "日本語"], "safe": True, "since": None}})

CASES = [
    ("hello", [user("Hello!")], None, False),
    ("system", [system("You are terse."), user("Name three colors.")], None, False),
    ("empty_system", [system(""), user("hi")], None, False),
    ("multi_turn", [user("one"), assistant("two", "count up"), user("three")], None, False),
    ("multi_turn_no_reasoning", [user("q1"), assistant("a1"), user("q2"), assistant("a2"), user("q3")], None, False),
    ("system_multi_turn", [system("S"), user("q1"), assistant("a1", "r1"), user("q2")], None, False),
    ("developer", [developer("Be brief."), user("hi")], None, False),
    ("developer_only", [developer("Answer in French: hello")], None, False),
    ("system_then_developer", [system("Be kind."), user("hi"), assistant("hello", "greet"),
                               developer("Answer in French."), user("again")], None, False),
    ("two_users", [user("a"), user("b")], None, False),
    ("unicode", [user("Unicode: 日本語 é 🙂 \"quotes\" <tags> & {braces}\nnew line\ttab")], None, False),
    ("tools_first_turn", [user("Weather in Paris?")], TOOLS, False),
    ("tools_with_system", [system("Use tools."), user("Weather in Paris?")], TOOLS, False),
    ("tools_with_developer", [developer("Use tools wisely."), user("Weather in Paris?")], TOOLS, False),
    ("tool_call_pending", [user("Weather in Paris?"), assistant("", "need weather", [PARIS])], TOOLS, False),
    ("tool_result", [user("Weather in Paris?"), assistant("", "need weather", [PARIS]),
                     tool("call_0", "{\"temp\": 21}")], TOOLS, False),
    ("two_tool_results", [user("Weather in Paris and search?"),
                          assistant("Checking.", "two calls", [PARIS, ODD_ARGS]),
                          tool("call_0", "21C"), tool("call_1", "snippet one\nsnippet two")], TOOLS, False),
    ("tool_round_then_user", [system("S"), user("Weather in Paris?"), assistant("", "need weather", [PARIS]),
                              tool("call_0", "21C"), assistant("It is 21C.", "answer"), user("Thanks! And tomorrow?")],
     TOOLS, False),
    ("tool_round_no_tools_given", [user("Weather?"), assistant("", None, [PARIS]), tool("call_0", "21C"),
                                   assistant("21C."), user("ok")], None, False),
    ("odd_arguments", [user("search"), assistant("", "s", [ODD_ARGS]), tool("call_0", "[]")], TOOLS, False),
    ("ends_with_assistant", [user("hi"), assistant("hello there", "greet")], None, False),
    ("continue_final", [user("Tell a story"), assistant("Once upon a time")], None, True),
    ("continue_final_reasoning", [user("Tell a story"), assistant("Once upon", "plan a story")], None, True),
    ("continue_final_system", [system("Be poetic."), user("q"), assistant("a", "r"), user("Tell a story"),
                               assistant("Once", "plan")], None, True),
    ("continue_final_tools", [user("Weather?"), assistant("Let me", "check")], TOOLS, True),
    ("long_history", [system("S"), user("q1"), assistant("a1", "r1"), user("q2"), assistant("a2", "r2"),
                      user("q3"), assistant("a3", "r3"), user("q4")], None, False),
    ("empty_developer", [developer(""), user("hi")], None, False),
    ("tool_without_call", [user("hi"), tool("call_9", "x")], None, False),
]
