//! Input items → the template's conversation, as vLLM builds it, and every bad item refused
//! naming its field.

use serde_json::json;

use super::*;

/// A template with Qwen's role handling: no `developer`, a system message only first.
const QWEN_LIKE: &str = "{%- if messages[0].role == 'system' %}{%- endif %}";

fn build(instructions: Option<&str>, history: Value, input: Value) -> Result<Conversation, ApiError> {
    let history = history.as_array().cloned().unwrap_or_default();
    let renderer = Renderer::jinja(QWEN_LIKE.into()).unwrap();
    let text_only: crate::media::VisionSupport = Err("its config.json has no vision_config".into());
    let mut media = Collector::new(&text_only, "m");
    let input = read(&input, renderer.content_format(), &mut media)?;
    conversation(instructions, &history, "previous_response_id", input, &renderer, &mut media)
}

#[test]
fn items_become_the_conversation_vllm_builds() {
    let call = |id: &str, name: &str, args: &str| json!({"type": "function_call", "call_id": id, "name": name, "arguments": args});
    let tool_call = |id: &str, name: &str, args: Value| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}});
    let cases = [
        // A string is one user message; instructions come first.
        (
            Some("Be terse."),
            json!([]),
            json!("hi"),
            json!([
                {"role": "system", "content": "Be terse."},
                {"role": "user", "content": "hi"}
            ]),
        ),
        // Message parts: text joined with newlines; assistant history as output_text.
        (
            None,
            json!([]),
            json!([
                {"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "c", "annotations": []}]},
                {"role": "developer", "content": "D"}
            ]),
            json!([
                {"role": "system", "content": "D"},
                {"role": "user", "content": "a\nb"},
                {"role": "assistant", "content": "c"}
            ]),
        ),
        // Reasoning begins the assistant message; its text, its calls, then their outputs.
        (
            None,
            json!([]),
            json!([
                {"role": "user", "content": "weather?"},
                {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "think"}]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
                call("call_1", "get_weather", "{\"city\": \"Paris\"}"),
                call("call_2", "get_weather", "not json"),
                {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
                {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "20C"}]}
            ]),
            json!([
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": "Let me look.", "tool_calls": [
                    tool_call("call_1", "get_weather", json!({"city": "Paris"})),
                    tool_call("call_2", "get_weather", json!({}))
                ], "reasoning": "think", "reasoning_content": "think"},
                {"role": "tool", "content": "18C", "tool_call_id": "call_1"},
                {"role": "tool", "content": "20C", "tool_call_id": "call_2"}
            ]),
        ),
        // Calls with no message before them are one assistant message; a summary stands in
        // for missing reasoning content; reasoning after a message that has none joins it.
        (
            None,
            json!([]),
            json!([
                call("a", "f", "{}"), call("b", "g", "{}"),
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "s1"}, {"type": "summary_text", "text": "s2"}]},
                {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "r2"}]}
            ]),
            json!([
                {"role": "assistant", "content": "", "tool_calls": [tool_call("a", "f", json!({})), tool_call("b", "g", json!({}))],
                 "reasoning": "s1", "reasoning_content": "s1"},
                {"role": "assistant", "content": "", "reasoning": "r2", "reasoning_content": "r2"}
            ]),
        ),
        // MCP items of an earlier response: a call and its output (or error), lists dropped.
        (
            None,
            json!([]),
            json!([
                {"role": "user", "content": "weather?"},
                {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "py", "tools": []},
                {"type": "mcp_call", "id": "mcp_1", "server_label": "py", "name": "weather",
                 "arguments": "{\"city\": \"Paris\"}", "output": "sunny", "error": null, "status": "completed"},
                {"type": "mcp_call", "id": "mcp_2", "server_label": "py", "name": "crash", "arguments": "{}",
                 "output": null, "error": {"type": "mcp_protocol_error", "code": -32000, "message": "gone"}, "status": "failed"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}]}
            ]),
            json!([
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": "", "tool_calls": [tool_call("mcp_1", "weather", json!({"city": "Paris"}))]},
                {"role": "tool", "content": "sunny", "tool_call_id": "mcp_1"},
                {"role": "assistant", "content": "", "tool_calls": [tool_call("mcp_2", "crash", json!({}))]},
                {"role": "tool", "content": "error: gone", "tool_call_id": "mcp_2"},
                {"role": "assistant", "content": "Sunny."}
            ]),
        ),
        // History first (its items as input items); instructions only this request's.
        (
            Some("new"),
            json!([
                {"type": "message", "id": "msg_1", "role": "user", "content": [{"type": "input_text", "text": "q"}]},
                {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "a", "annotations": [], "logprobs": []}]}
            ]),
            json!("q2"),
            json!([
                {"role": "system", "content": "new"},
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "a"},
                {"role": "user", "content": "q2"}
            ]),
        ),
    ];
    for (instructions, history, input, expected) in cases {
        let got = build(instructions, history, input.clone()).unwrap_or_else(|e| panic!("{input}: {e:?}"));
        assert_eq!(got.messages, expected, "{input}");
        assert!(!got.continue_final);
    }
}

#[test]
fn an_assistant_message_in_progress_is_continued() {
    let input = json!([
        {"role": "user", "content": "count"},
        {"type": "message", "role": "assistant", "status": "in_progress", "content": [{"type": "output_text", "text": "1, 2,"}]}
    ]);
    assert!(build(None, json!([]), input).unwrap().continue_final);
    let done = json!([{"role": "assistant", "status": "completed", "content": "x"}]);
    assert!(!build(None, json!([]), done).unwrap().continue_final);
}

#[test]
fn bad_items_are_refused_naming_the_field() {
    let cases = [
        (json!(5), "input"),
        (json!([]), "input"),
        (json!([1]), "input[0]"),
        (json!([{"content": "x"}]), "input[0].type"),
        (json!([{"type": "computer_call"}]), "input[0].type"),
        (json!([{"role": "tool", "content": "x"}]), "input[0].role"),
        (json!([{"role": "user", "content": 5}]), "input[0].content"),
        (
            json!([{"role": "user", "content": "a"}, {"role": "user", "content": [{"text": "x"}]}]),
            "input[1].content[0].type",
        ),
        (json!([{"role": "user", "content": [{"type": "input_text"}]}]), "input[0].content[0].text"),
        (json!([{"role": "user", "content": [{"type": "input_video"}]}]), "input[0].content[0].type"),
        (
            json!([{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                   {"role": "user", "content": [{"type": "input_image", "image_url": "data:x"}]}]),
            "input[2].content[0].image_url",
        ),
        (
            json!([{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]),
            "input[0].content[0].file_id",
        ),
        (json!([{"role": "user", "content": [{"type": "input_image"}]}]), "input[0].content[0].image_url"),
        (json!([{"type": "function_call", "name": "f", "arguments": "{}"}]), "input[0].call_id"),
        (json!([{"type": "function_call", "call_id": "c", "arguments": "{}"}]), "input[0].name"),
        (json!([{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}]), "input[0].arguments"),
        (json!([{"type": "function_call_output", "call_id": "c"}]), "input[0].output"),
        (json!([{"type": "function_call_output", "output": "x"}]), "input[0].call_id"),
        (json!([{"type": "reasoning", "encrypted_content": "opaque"}]), "input[0].encrypted_content"),
        (json!([{"type": "reasoning", "content": "x"}]), "input[0].content"),
        (json!([{"type": "reasoning", "content": [{}]}]), "input[0].content[0].text"),
    ];
    for (input, param) in cases {
        let e = build(None, json!([]), input.clone()).expect_err(&input.to_string());
        assert_eq!((e.status, e.param.as_deref()), (400, Some(param)), "{input}: {}", e.message);
    }
    let image = json!([{"role": "user", "content": [{"type": "input_image", "image_url": "data:x"}]}]);
    let e = build(None, image, json!("x")).unwrap_err();
    assert_eq!(e.param.as_deref(), Some("previous_response_id[0].content[0].image_url"));
    assert_eq!(e.message, "the model 'm' does not take images (its config.json has no vision_config)");
}

#[test]
fn stored_items_have_types_and_ids() {
    let items = stored_items(&json!("hi"));
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["type"], "message");
    assert_eq!(items[0]["content"], json!([{"type": "input_text", "text": "hi"}]));
    assert!(items[0]["id"].as_str().is_some_and(|id| id.starts_with("msg_") && id.len() == 36));
    let items = stored_items(&json!([
        {"role": "user", "content": "q"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "id": "mine", "call_id": "c", "output": "x"}
    ]));
    let ids: Vec<&str> = items.iter().map(|i| i["id"].as_str().unwrap_or("")).collect();
    assert!(ids[0].starts_with("msg_") && ids[1].starts_with("fc_"), "{ids:?}");
    assert_eq!(ids[2], "mine");
    assert_eq!(items[0]["type"], "message");
    assert_eq!(items[1]["call_id"], "c");
}

const P: &str = "<|vision_start|><|image_pad|><|vision_end|>";

/// The conversation for a Qwen-VL model under a template reading `format`, and the paths
/// naming its media items in prompt order.
fn build_images(
    instructions: Option<&str>,
    history: &Value,
    input: &Value,
    format: ContentFormat,
) -> (Value, Vec<String>) {
    let history = history.as_array().cloned().unwrap_or_default();
    let renderer = Renderer::jinja(QWEN_LIKE.into()).unwrap().with_content_format(Some(format));
    let vision = crate::media::vision::qwen_vl_for_tests();
    let mut media = Collector::new(&vision, "m");
    let built = read(input, format, &mut media)
        .and_then(|input| conversation(instructions, &history, "previous_response_id", input, &renderer, &mut media))
        .unwrap_or_else(|e| panic!("{input}: {e:?}"));
    (built.messages, media.items.into_iter().map(|i| i.at).collect())
}

#[test]
fn images_and_strings_in_each_content_format() {
    let image = |url: &str| json!({"type": "input_image", "image_url": url, "detail": "low"});
    let text = |t: &str| json!({"type": "text", "text": t});
    let img = json!({"type": "image"});
    let call = json!({"id": "a", "type": "function", "function": {"name": "f", "arguments": {}}});
    // (instructions, history, input, what a string-content template gets, what a list-content
    // template gets, the media items' paths in prompt order).
    let cases = [
        // Parts in order; `instructions` a string, so one text part.
        (
            Some("I"),
            json!([]),
            json!([{"role": "user", "content": [{"type": "input_text", "text": "a"}, image("http://x/1"),
                                                 {"type": "input_text", "text": "b"}]}]),
            json!([{"role": "system", "content": "I"}, {"role": "user", "content": format!("{P}\na\nb")}]),
            json!([{"role": "system", "content": [text("I")]}, {"role": "user", "content": [text("a"), img, text("b")]}]),
            vec!["input[0].content[1].image_url"],
        ),
        // Merged messages: calls alone are no parts, an assistant's texts one string, a tool
        // output a string unless it holds an image.
        (
            None,
            json!([]),
            json!([
                {"role": "user", "content": "q"},
                {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "a", "output": "18C"},
                {"type": "function_call_output", "call_id": "a",
                 "output": [{"type": "input_text", "text": "see"}, image("http://x/2")]},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "x"}, {"type": "output_text", "text": "y"}]}
            ]),
            json!([
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "content": "18C", "tool_call_id": "a"},
                {"role": "tool", "content": format!("{P}\nsee"), "tool_call_id": "a"},
                {"role": "assistant", "content": "x\ny"}
            ]),
            json!([
                {"role": "user", "content": [text("q")]},
                {"role": "assistant", "content": [], "tool_calls": [call]},
                {"role": "tool", "content": "18C", "tool_call_id": "a"},
                {"role": "tool", "content": [text("see"), img], "tool_call_id": "a"},
                {"role": "assistant", "content": [text("x\ny")]}
            ]),
            vec!["input[3].output[1].image_url"],
        ),
        // The history's image before the input's.
        (
            None,
            json!([{"type": "message", "role": "user", "content": [image("http://x/h")]}]),
            json!([{"role": "user", "content": [image("http://x/i")]}]),
            json!([{"role": "user", "content": P}, {"role": "user", "content": P}]),
            json!([{"role": "user", "content": [img]}, {"role": "user", "content": [img]}]),
            vec!["previous_response_id[0].content[0].image_url", "input[0].content[0].image_url"],
        ),
    ];
    for (instructions, history, input, string, list, items) in cases {
        for (format, want) in [(ContentFormat::String, &string), (ContentFormat::OpenAi, &list)] {
            let (got, media) = build_images(instructions, &history, &input, format);
            assert_eq!(&got, want, "{format:?}: {input}");
            assert_eq!(media, items, "{format:?}: {input}");
        }
    }
}
