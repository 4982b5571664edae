//! The conversion table: request bodies → the template's conversation, and each bad block →
//! its 400 and the field it names.

use serde_json::json;

use super::*;

fn convert(body: Value) -> Result<Value, ApiError> {
    let text_only: crate::media::VisionSupport = Err("its config.json has no vision_config".into());
    conversation(&Fields::new(&body), ContentFormat::String, &mut Collector::new(&text_only, "m"))
}

#[test]
fn conversions() {
    let cases = [
        // A system string, a plain user message.
        (
            json!({"system": "Be terse.", "messages": [{"role": "user", "content": "hi"}]}),
            json!([{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]),
        ),
        // System blocks are joined as vLLM joins them; an empty system is no message.
        (
            json!({"system": [{"type": "text", "text": "A."}, {"type": "text", "text": "B.", "cache_control": {}}],
                   "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}),
            json!([{"role": "system", "content": "A.B."}, {"role": "user", "content": "hi"}]),
        ),
        (
            json!({"system": "", "messages": [{"role": "user", "content": "hi"}]}),
            json!([{"role": "user", "content": "hi"}]),
        ),
        // Text blocks joined by newlines, empty ones skipped.
        (
            json!({"messages": [{"role": "user", "content": [
                {"type": "text", "text": "a"}, {"type": "text", "text": ""}, {"type": "text", "text": "b"}]}]}),
            json!([{"role": "user", "content": "a\nb"}]),
        ),
        // A tool round trip: tool_use → tool_calls with the input object; tool_result → a tool
        // message (string or text-block content); is_error accepted.
        (
            json!({"messages": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
                     "content": [{"type": "text", "text": "no"}, {"type": "text", "text": "clock"}]}]}]}),
            json!([
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": "Let me look.", "tool_calls": [
                    {"id": "toolu_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                    {"id": "toolu_2", "type": "function", "function": {"name": "get_time", "arguments": {}}}]},
                {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
                {"role": "tool", "tool_call_id": "toolu_2", "content": "no\nclock"}
            ]),
        ),
        // A user turn mixing text and a tool result: the tool message first, then the text
        // (llama.cpp's test_anthropic_tool_result_with_text).
        (
            json!({"messages": [{"role": "user", "content": [
                {"type": "text", "text": "Here is the result:"},
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"},
                {"type": "text", "text": "What now?"}]}]}),
            json!([
                {"role": "tool", "tool_call_id": "toolu_1", "content": "42"},
                {"role": "user", "content": "Here is the result:\nWhat now?"}
            ]),
        ),
        // Thinking history becomes the assistant's reasoning; redacted thinking is dropped;
        // a tool-only assistant turn has empty content.
        (
            json!({"messages": [{"role": "assistant", "content": [
                {"type": "thinking", "thinking": "plan", "signature": "s"},
                {"type": "redacted_thinking", "data": "xx"},
                {"type": "tool_use", "id": "t", "name": "f"}]}]}),
            json!([{"role": "assistant", "content": "",
                    "tool_calls": [{"id": "t", "type": "function", "function": {"name": "f", "arguments": {}}}],
                    "reasoning": "plan", "reasoning_content": "plan"}]),
        ),
        // A turn left with nothing is dropped.
        (
            json!({"messages": [{"role": "user", "content": "hi"},
                                {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "x"}]}]}),
            json!([{"role": "user", "content": "hi"}]),
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(convert(body.clone()).unwrap_or_else(|e| panic!("{body}: {e}")), expected, "{body}");
    }
}

#[test]
fn bad_input_names_its_field() {
    let user = |content: Value| json!({"messages": [{"role": "user", "content": content}]});
    let assistant = |content: Value| json!({"messages": [{"role": "assistant", "content": content}]});
    let cases = [
        (json!({}), "messages", "Field required"),
        (json!({"messages": "hi"}), "messages", "valid list"),
        (json!({"messages": []}), "messages", "at least one"),
        (json!({"messages": [1]}), "messages.0", "dictionary"),
        (json!({"messages": [{"content": "x"}]}), "messages.0.role", "Field required"),
        (json!({"messages": [{"role": "system", "content": "x"}]}), "messages.0.role", "top-level `system`"),
        (json!({"messages": [{"role": "tool", "content": "x"}]}), "messages.0.role", "Chat Completions"),
        (json!({"messages": [{"role": "wizard", "content": "x"}]}), "messages.0.role", "'user' or 'assistant'"),
        (json!({"messages": [{"role": "user"}]}), "messages.0.content", "Field required"),
        (json!({"messages": [{"role": "user", "content": 5}]}), "messages.0.content", "valid string"),
        (user(json!([])), "messages.0.content", "must not be empty"),
        (
            json!({"messages": [{"role": "user", "content": "a"},
                                {"role": "user", "content": [{"type": "text", "text": "b"},
                                 {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}}]}]}),
            "messages.1.content.1.source",
            "the model 'm' does not take images",
        ),
        (
            user(json!([{"type": "image", "source": {"type": "file", "file_id": "f"}}])),
            "messages.0.content.0.source.type",
            "'file'",
        ),
        (
            user(json!([{"type": "image", "source": {"type": "base64", "media_type": 5, "data": "x"}}])),
            "messages.0.content.0.source.media_type",
            "valid string",
        ),
        (user(json!([{"type": "image"}])), "messages.0.content.0.source", "dictionary"),
        (assistant(json!([{"type": "image", "source": {}}])), "messages.0.content.0.source.data", "Field required"),
        (user(json!([{"type": "document", "source": {}}])), "messages.0.content.0", "document content blocks"),
        (user(json!([{"text": "x"}])), "messages.0.content.0.type", "Field required"),
        (user(json!([{"type": "image_url", "image_url": {"url": "x"}}])), "messages.0.content.0.type", "'image_url'"),
        (user(json!([{"type": "text"}])), "messages.0.content.0.text", "Field required"),
        (user(json!([{"type": "text", "text": 1}])), "messages.0.content.0.text", "valid string"),
        (user(json!(["x"])), "messages.0.content.0", "dictionary"),
        (
            user(json!([{"type": "tool_use", "id": "t", "name": "f", "input": {}}])),
            "messages.0.content.0.type",
            "assistant",
        ),
        (user(json!([{"type": "thinking", "thinking": "x"}])), "messages.0.content.0.type", "assistant"),
        (user(json!([{"type": "tool_result"}])), "messages.0.content.0.tool_use_id", "Field required"),
        (
            user(json!([{"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}])),
            "messages.0.content.0.is_error",
            "boolean",
        ),
        (
            user(json!([{"type": "tool_result", "tool_use_id": "t", "content": 5}])),
            "messages.0.content.0.content",
            "valid string",
        ),
        (
            user(json!([{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "image", "source": {}}]}])),
            "messages.0.content.0.content.0.source.data",
            "Field required",
        ),
        (
            user(json!([{"type": "tool_result", "tool_use_id": "t",
                         "content": [{"type": "image", "source": {"type": "url", "url": "http://x/a.png"}}]}])),
            "messages.0.content.0.content.0.source",
            "the model 'm' does not take images",
        ),
        (
            user(json!([{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "document", "source": {}}]}])),
            "messages.0.content.0.content.0",
            "document content blocks",
        ),
        (assistant(json!([{"type": "tool_result", "tool_use_id": "t"}])), "messages.0.content.0.type", "user messages"),
        (assistant(json!([{"type": "tool_use", "name": "f"}])), "messages.0.content.0.id", "Field required"),
        (assistant(json!([{"type": "tool_use", "id": "t"}])), "messages.0.content.0.name", "Field required"),
        (
            assistant(json!([{"type": "tool_use", "id": "t", "name": "f", "input": "{}"}])),
            "messages.0.content.0.input",
            "dictionary",
        ),
        (assistant(json!([{"type": "thinking"}])), "messages.0.content.0.thinking", "Field required"),
        // OpenAI chat shapes.
        (
            json!({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]}]}),
            "messages.0.tool_calls",
            "Chat Completions",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x", "tool_call_id": "c"}]}),
            "messages.0.tool_call_id",
            "Chat Completions",
        ),
        // The system prompt.
        (json!({"system": 5, "messages": [{"role": "user", "content": "x"}]}), "system", "valid string"),
        (
            json!({"system": [{"type": "image", "source": {}}], "messages": [{"role": "user", "content": "x"}]}),
            "system.0.type",
            "text blocks",
        ),
    ];
    for (body, param, words) in cases {
        let e = convert(body.clone()).expect_err(&body.to_string());
        assert_eq!((e.status, e.param.as_deref()), (400, Some(param)), "{body}: {}", e.message);
        assert!(e.message.contains(words), "{body}: {}", e.message);
    }
}

const P: &str = "<|vision_start|><|image_pad|><|vision_end|>";

/// A request's conversation for a Qwen-VL model in `format`, and its media items (the path
/// naming each, its URL) in the order the engine gets them.
fn convert_images(body: &Value, format: ContentFormat) -> (Value, Vec<(String, String)>) {
    let vision = crate::media::vision::qwen_vl_for_tests();
    let mut media = Collector::new(&vision, "m");
    let conversation = conversation(&Fields::new(body), format, &mut media).unwrap_or_else(|e| panic!("{body}: {e}"));
    (conversation, media.items.into_iter().map(|i| (i.at, i.url)).collect())
}

#[test]
fn images_and_strings_in_each_content_format() {
    let image = |url: &str| json!({"type": "image", "source": {"type": "url", "url": url}});
    let text = |t: &str| json!({"type": "text", "text": t});
    let img = json!({"type": "image"});
    let tool_call = json!({"id": "t", "type": "function", "function": {"name": "f", "arguments": {}}});
    // (request, what a string-content template gets, what a list-content template gets, the
    // media items' paths in prompt order).
    let cases = [
        // Mixed text and images: placeholders in front, or each image where its block is.
        (
            json!({"messages": [{"role": "user", "content": [text("a"), image("http://x/1"), text("b"), image("http://x/2")]}]}),
            json!([{"role": "user", "content": format!("{P}\n{P}\na\nb")}]),
            json!([{"role": "user", "content": [text("a"), img, text("b"), img]}]),
            vec!["messages.0.content.1.source", "messages.0.content.3.source"],
        ),
        // Strings are one text part; a turn of calls alone has no parts.
        (
            json!({"system": "S", "messages": [{"role": "user", "content": "q"},
                   {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
                   {"role": "assistant", "content": "more"}]}),
            json!([{"role": "system", "content": "S"}, {"role": "user", "content": "q"},
                   {"role": "assistant", "content": "", "tool_calls": [tool_call]},
                   {"role": "assistant", "content": "more"}]),
            json!([{"role": "system", "content": [text("S")]}, {"role": "user", "content": [text("q")]},
                   {"role": "assistant", "content": [], "tool_calls": [tool_call]},
                   {"role": "assistant", "content": [text("more")]}]),
            vec![],
        ),
        // A tool result's images: its tool message (a string), then a user message of them,
        // before the turn's own image, so the media follow the prompt (not the block order).
        (
            json!({"messages": [{"role": "user", "content": [
                image("http://x/own"),
                {"type": "tool_result", "tool_use_id": "t", "content": [text("r1"), image("http://x/tool"), text("r2")]},
                text("next")]}]}),
            json!([{"role": "tool", "tool_call_id": "t", "content": "r1\nr2"}, {"role": "user", "content": P},
                   {"role": "user", "content": format!("{P}\nnext")}]),
            json!([{"role": "tool", "tool_call_id": "t", "content": "r1\nr2"}, {"role": "user", "content": [img]},
                   {"role": "user", "content": [img, text("next")]}]),
            vec!["messages.0.content.1.content.1.source", "messages.0.content.0.source"],
        ),
        // An assistant's image is taken as chat takes one.
        (
            json!({"messages": [{"role": "assistant", "content": [text("see"), image("http://x/a")]}]}),
            json!([{"role": "assistant", "content": format!("{P}\nsee")}]),
            json!([{"role": "assistant", "content": [text("see"), img]}]),
            vec!["messages.0.content.1.source"],
        ),
    ];
    for (body, string, list, items) in cases {
        for (format, want) in [(ContentFormat::String, &string), (ContentFormat::OpenAi, &list)] {
            let (got, media) = convert_images(&body, format);
            assert_eq!(&got, want, "{format:?}: {body}");
            let ats: Vec<&str> = media.iter().map(|(at, _)| at.as_str()).collect();
            assert_eq!(ats, items, "{format:?}: {body}");
        }
    }
}

#[test]
fn image_sources_as_vllm_reads_them() {
    // (source, the URL it stands for): base64 and its media type are the defaults; fields
    // such as `cache_control` beside the source are ignored.
    let cases = [
        (json!({"type": "base64", "media_type": "image/png", "data": "AA=="}), "data:image/png;base64,AA=="),
        (json!({"data": "AA=="}), "data:image/jpeg;base64,AA=="),
        (json!({"type": "base64", "data": "AA=="}), "data:image/jpeg;base64,AA=="),
        (json!({"type": "url", "url": "https://x/a.png"}), "https://x/a.png"),
    ];
    for (source, url) in cases {
        let block = json!({"type": "image", "source": source, "cache_control": {"type": "ephemeral"}});
        let body = json!({"messages": [{"role": "user", "content": [block]}]});
        let (_, media) = convert_images(&body, ContentFormat::String);
        assert_eq!(media, [("messages.0.content.0.source".to_string(), url.to_string())], "{source}");
    }
}
