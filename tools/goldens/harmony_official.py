"""The official `openai-harmony` half of `harmony.py`, run by a python that has it
(tools/goldens/requirements.txt; `harmony.py` starts it). Reads one JSON request on stdin:

    {"render": [{"messages": [Message.to_dict(), ...], "continue_final": bool}, ...],
     "parse": [[token ids], ...]}

and writes the prompts' token ids and text, and each output's messages as the
`StreamableParser` reads it token by token (a rejected token skipped, then `process_eos`).
The vocabulary comes from `TIKTOKEN_ENCODINGS_BASE`, offline."""
import json, sys

from openai_harmony import (Conversation, HarmonyEncodingName, HarmonyError, Message, RenderConversationConfig,
                            Role, StreamableParser, load_harmony_encoding)


def render(enc, case):
    conversation = Conversation.from_messages([Message.from_dict(m) for m in case["messages"]])
    config = RenderConversationConfig(auto_drop_analysis=False)
    if case["continue_final"]:
        ids = enc.render_conversation(conversation, config=config)[:-1]
    else:
        ids = enc.render_conversation_for_completion(conversation, Role.ASSISTANT, config=config)
    return {"token_ids": ids, "prompt": enc.decode(ids)}


def parse(enc, tokens):
    parser = StreamableParser(enc, role=Role.ASSISTANT)
    for token in tokens:
        try:
            parser.process(token)
        except HarmonyError:
            continue
    try:
        parser.process_eos()
    except HarmonyError:
        pass
    return [m.to_dict() for m in parser.messages]


def main():
    request = json.load(sys.stdin)
    enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    json.dump({"render": [render(enc, c) for c in request["render"]],
               "parse": [parse(enc, t) for t in request["parse"]],
               "encode": [enc.encode(t, allowed_special="all") for t in request["encode"]]}, sys.stdout)


if __name__ == "__main__":
    main()
