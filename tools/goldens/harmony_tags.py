#!/usr/bin/env python3
"""Golden structural tags of gpt-oss (Harmony): forced tool calls and output formats.

    ~/.cache/real-vllm/venv/bin/python tools/goldens/harmony_tags.py [--check]

`harmony_tags.json`: for each set of tools and each forced `tool_choice` (`required`, and
every tool by name), the xgrammar structural tag vLLM sends its engine for a gpt-oss request
(`vllm/parser/harmony.py`'s `get_harmony_structural_tag` through
`get_model_structural_tag`), at `--tool-strict-level parameter`: every tool's arguments are held
to its schema, as shardgate holds them (`src/pipeline/harmony_tag.rs`); and for each requested
output format (`structured_outputs` as shardgate sends it: a JSON schema, any object, a regex,
an EBNF grammar, a structural tag in both forms), the tag that holds it to the final message
(`vllm/parser/harmony.py`'s `_adjust_output_format`)."""
import json, sys

from reference import vllm_version, write_or_check


def tool(name, parameters=None, description=None):
    function = {"name": name}
    if description is not None:
        function["description"] = description
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


WEATHER = tool("get_weather", {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
               "Weather for a city")
PING = tool("ping")
EMPTY = tool("now", {})
NESTED = tool("book_flight", {
    "type": "object",
    "properties": {"route": {"$ref": "#/$defs/route"}, "passengers": {"type": "integer", "minimum": 1},
                   "class": {"enum": ["economy", "business"]}, "notes": {"type": ["string", "null"]}},
    "required": ["route", "passengers"], "additionalProperties": False,
    "$defs": {"route": {"type": "object", "properties": {"from": {"type": "string"}, "to": {"type": "string"}}}}})
UNICODE = tool("recherche_café", {"type": "object", "properties": {"requête": {"type": "string", "maxLength": 80}}},
               "Cherche « quelque chose »")
DOTTED = tool("files.read", {"type": "object", "properties": {"path": {"type": "string"}}})

TOOL_SETS = [("weather", [WEATHER]), ("no_parameters", [PING]), ("empty_parameters", [EMPTY]),
             ("nested_defs", [NESTED]), ("unicode", [UNICODE]), ("dotted_name", [DOTTED]),
             ("several", [WEATHER, PING, NESTED, UNICODE])]


def tags():
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    import vllm.parser.harmony  # noqa: F401  (registers the "harmony" builder)
    from vllm.tool_parsers.structural_tag_registry import get_model_structural_tag
    from vllm.tool_parsers.tool_strict_level import ToolStrictLevel
    cases = []
    for set_name, tools in TOOL_SETS:
        choices = ["required"] + [{"type": "function", "function": {"name": t["function"]["name"]}} for t in tools]
        for choice in choices:
            request = ChatCompletionRequest(model="gpt-oss", messages=[{"role": "user", "content": "hi"}],
                                            tools=tools, tool_choice=choice)
            tag = get_model_structural_tag("harmony", request.tools, request.tool_choice, reasoning=False,
                                           strict_level=ToolStrictLevel.PARAMETER)
            label = choice if isinstance(choice, str) else choice["function"]["name"]
            cases.append({"name": f"{set_name}/{label}", "tools": tools, "tool_choice": choice,
                          "tag": tag.model_dump()})
    return cases


OUTPUT_FORMATS = [
    ("json_schema", {"json": {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}}),
    ("json_object", {"json_object": True}),
    ("regex", {"regex": "(yes|no) [0-9]{1,3}"}),
    ("grammar", {"grammar": 'root ::= "red" | "green" | "blé"'}),
    ("structural_tag", {"structural_tag": json.dumps(
        {"type": "structural_tag", "format": {"type": "const_string", "value": "done"}})}),
    ("structural_tag_structures", {"structural_tag": json.dumps(
        {"structures": [{"begin": "<answer>", "schema": {"type": "object"}, "end": "</answer>"}],
         "triggers": ["<answer>"]})}),
]


def output_tags():
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.parser.harmony import _adjust_output_format
    cases = []
    for name, structured in OUTPUT_FORMATS:
        request = ChatCompletionRequest(model="gpt-oss", messages=[{"role": "user", "content": "hi"}],
                                        structured_outputs=structured)
        tag = json.loads(_adjust_output_format(request).structured_outputs.structural_tag)
        cases.append({"name": f"output/{name}", "structured_outputs": structured, "tag": tag})
    return cases


def main():
    check = "--check" in sys.argv[1:]
    reference = f"vllm {vllm_version()} vllm/parser/harmony.py get_harmony_structural_tag (strict level parameter), _adjust_output_format"
    ok = write_or_check("harmony_tags", {"constraint": "harmony", "reference": reference, "cases": tags() + output_tags()}, check)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
