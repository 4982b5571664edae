//! Chat messages → the conversation a chat template sees, as vLLM builds it
//! (`vllm/renderers/chat_utils.py`): content strings (text parts joined with newlines, or as the
//! renderer joins them; null as ""), assistant `tool_calls` with their JSON `arguments` parsed
//! into objects (kept as written for a renderer that reads them so), reasoning under
//! both `reasoning` and `reasoning_content`, and `name` / `tool_call_id` kept. A `developer`
//! message becomes a system message when the renderer has no `developer` role, as vLLM's
//! renderer does (`vllm/renderers/hf.py`), so the instruction is not silently dropped.

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::media::{Collector, Part};
use shardgate_text::render::Renderer;
use shardgate_text::template::content_format::ContentFormat;

/// The roles of OpenAI's Chat Completions API, in the order its error message lists them.
const API_ROLES: [&str; 6] = ["system", "assistant", "user", "function", "tool", "developer"];

/// The renderer decides which roles can be rendered: the API's own, and any other role it
/// names (a template's string literal such as Llama 3.1's `ipython`). Image parts go to
/// `media`, their placeholders into the message's text.
pub fn normalize(messages: &Value, renderer: &Renderer, media: &mut Collector<'_>) -> Result<Value, ApiError> {
    let list = messages
        .as_array()
        .ok_or_else(|| ApiError::invalid_param("messages", "'messages' must be a list of message objects"))?;
    if list.is_empty() {
        return Err(ApiError::invalid_param("messages", "'messages' must contain at least one message"));
    }
    check_one_modality(list)?;
    let mut out = Vec::with_capacity(list.len());
    for (i, m) in list.iter().enumerate() {
        out.push(normalize_message(i, m, renderer, media)?);
    }
    Ok(Value::Array(template_roles(out, renderer)))
}

/// SMG's limit of the vLLM ZMQ backend: the engine takes one modality per request, so images
/// and videos in one request answer 400 before anything else is read of them.
fn check_one_modality(messages: &[Value]) -> Result<(), ApiError> {
    let parts = messages.iter().filter_map(|m| m.get("content").and_then(Value::as_array)).flatten();
    let (mut image, mut video) = (false, false);
    for kind in parts.filter_map(|p| p.get("type").and_then(Value::as_str)) {
        image |= matches!(kind, "image_url" | "input_image" | "image");
        video |= matches!(kind, "video_url" | "video");
    }
    if image && video {
        return Err(ApiError::invalid_param(
            "messages",
            "the vLLM ZMQ backend takes one modality per request (this one has images and videos); send them in \
             separate requests",
        ));
    }
    Ok(())
}

/// Developer messages as the renderer can render them: unchanged where it names the role,
/// else as system messages (`developer_as_system`). Every conversational API's last step.
pub fn template_roles(conversation: Vec<Value>, renderer: &Renderer) -> Vec<Value> {
    if conversation.iter().any(|m| m["role"] == "developer") && !renderer.names_role("developer") {
        return developer_as_system(conversation);
    }
    conversation
}

/// Developer messages as system messages, and then (when that leaves a system message anywhere
/// but first, or more than one) every system message merged into one at the front, their
/// non-empty contents joined by a blank line: templates such as Qwen's render a system message
/// only in first place.
fn developer_as_system(conversation: Vec<Value>) -> Vec<Value> {
    let mut merged: Vec<String> = Vec::new();
    let mut all = Vec::with_capacity(conversation.len());
    let mut needs_merge = false;
    for (i, mut m) in conversation.into_iter().enumerate() {
        if m["role"] == "developer" {
            m["role"] = Value::from("system");
            if let Some(o) = m.as_object_mut() {
                o.remove("tools");
            }
        }
        if m["role"] == "system" {
            needs_merge |= i > 0 || !merged.is_empty();
            let text = match &m["content"] {
                Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
                other => other.as_str().unwrap_or("").to_string(),
            };
            if !text.is_empty() {
                merged.push(text);
            }
        }
        all.push(m);
    }
    if !needs_merge {
        return all;
    }
    let mut out = Vec::with_capacity(all.len() + 1);
    let mut system = Map::new();
    system.insert("role".into(), Value::from("system"));
    system.insert("content".into(), Value::from(merged.join("\n\n")));
    out.push(Value::Object(system));
    out.extend(all.into_iter().filter(|m| m["role"] != "system"));
    out
}

fn normalize_message(i: usize, m: &Value, renderer: &Renderer, media: &mut Collector<'_>) -> Result<Value, ApiError> {
    let param = |field: &str| format!("messages.[{i}].{field}");
    let obj = m
        .as_object()
        .ok_or_else(|| ApiError::invalid_param(&format!("messages.[{i}]"), "each message must be an object"))?;
    let role = match obj.get("role") {
        Some(Value::String(r)) => r.as_str(),
        Some(_) => return Err(ApiError::invalid_param(&param("role"), "'role' must be a string")),
        None => return Err(ApiError::invalid_param(&param("role"), "each message needs a 'role'")),
    };
    if !API_ROLES.contains(&role) && !renderer.names_role(role) {
        // OpenAI's own answer for an unknown role; a template would drop the message silently.
        return Err(ApiError::invalid_param(
            &param("role"),
            format!(
                "Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'."
            ),
        ));
    }
    let content = content(obj.get("content"), i, renderer, media)?;
    let mut out = Map::new();
    out.insert("role".into(), Value::String(role.to_string()));
    out.insert("content".into(), if role == "tool" { tool_content(content) } else { content });
    match role {
        "assistant" => {
            if let Some(calls) = obj.get("tool_calls").filter(|v| !v.is_null()) {
                let as_written = renderer.reads_arguments_as_written();
                out.insert("tool_calls".into(), normalize_tool_calls(calls, &param("tool_calls"), as_written)?);
            }
            let reasoning = obj
                .get("reasoning")
                .filter(|v| !v.is_null())
                .or_else(|| obj.get("reasoning_content").filter(|v| !v.is_null()));
            if let Some(r) = reasoning {
                insert_reasoning(&mut out, r.clone());
            }
        }
        "tool" => {
            if let Some(id) = obj.get("tool_call_id") {
                out.insert("tool_call_id".into(), id.clone());
            }
        }
        _ => {}
    }
    if let Some(Value::String(name)) = obj.get("name") {
        out.insert("name".into(), Value::String(name.clone()));
    }
    if role == "developer" {
        out.insert("tools".into(), obj.get("tools").cloned().unwrap_or(Value::Null));
    }
    if out.get("tool_calls").and_then(Value::as_array).is_some_and(Vec::is_empty) {
        // An empty list would send templates down the tool-call path.
        out.remove("tool_calls");
    }
    Ok(Value::Object(out))
}

/// A message's content as the renderer reads it (`Collector::content`): string content, or
/// text, `image_url` parts (`{"url": ..., "detail": ...}`, `detail` ignored as vLLM does) and
/// `video_url` parts (`{"url": ...}`); other media parts are refused. In the list format a
/// string is one text part and null no parts, as vLLM hands them over.
fn content(
    content: Option<&Value>,
    i: usize,
    renderer: &Renderer,
    media: &mut Collector<'_>,
) -> Result<Value, ApiError> {
    let param = &format!("messages.[{i}].content");
    let format = renderer.content_format();
    let parts = match content {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) if format == ContentFormat::String => return Ok(Value::String(s.clone())),
        Some(Value::String(s)) => vec![Part::Text(s)],
        Some(Value::Array(parts)) => content_parts(parts, i, param, media)?,
        Some(_) => {
            return Err(ApiError::invalid_param(param, "'content' must be a string, a list of content parts, or null"))
        }
    };
    Collector::content(&parts, renderer.text_part_separator(), param, format)
}

fn content_parts<'v>(
    parts: &'v [Value],
    i: usize,
    param: &str,
    media: &mut Collector<'_>,
) -> Result<Vec<Part<'v>>, ApiError> {
    let mut out = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let kind = part.get("type").and_then(Value::as_str).unwrap_or("text");
        match kind {
            "text" | "input_text" | "output_text" => out.push(Part::Text(
                part.get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ApiError::invalid_param(param, "a text content part needs a string 'text'"))?,
            )),
            "refusal" => out.push(Part::Text(part.get("refusal").and_then(Value::as_str).unwrap_or(""))),
            "image_url" | "video_url" => {
                let at = format!("messages[{i}].content[{j}].{kind}");
                let url = part.get(kind).and_then(|u| u.get("url")).and_then(Value::as_str);
                let url = url
                    .ok_or_else(|| ApiError::invalid_param(&at, format!("{at} needs an object with a string 'url'")))?;
                out.push(match kind {
                    "image_url" => Part::Image(media.image(at, url)?),
                    _ => Part::Video(media.video(at, url)?),
                });
            }
            other => {
                return Err(ApiError::invalid_param(
                    param,
                    format!("content parts of type '{other}' are not supported: this model takes text only"),
                ))
            }
        }
    }
    Ok(out)
}

/// vLLM's tool message in the list format: text parts only become one string (joined by
/// newlines), since most templates print a tool result as a string.
pub fn tool_content(content: Value) -> Value {
    let Value::Array(parts) = &content else { return content };
    if parts.iter().any(|p| p["type"] != "text") {
        return content;
    }
    let texts: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
    Value::String(texts.join("\n"))
}

/// Assistant tool calls with `function.arguments` parsed (templates expect objects), or as
/// written (`as_written`).
fn normalize_tool_calls(calls: &Value, param: &str, as_written: bool) -> Result<Value, ApiError> {
    let list = calls.as_array().ok_or_else(|| ApiError::invalid_param(param, "'tool_calls' must be a list"))?;
    let mut out = Vec::with_capacity(list.len());
    for call in list {
        let mut call = call
            .as_object()
            .cloned()
            .ok_or_else(|| ApiError::invalid_param(param, "assistant tool_calls entries must be objects."))?;
        let is_function = call.get("type").and_then(Value::as_str).unwrap_or("function") == "function";
        let Some(Value::Object(function)) = call.get_mut("function").filter(|_| is_function) else {
            return Err(ApiError::invalid_param(
                param,
                "chat completions only support assistant tool_calls of type 'function'.",
            ));
        };
        if !as_written {
            let parsed = arguments_object(function.get("arguments"));
            function.insert("arguments".into(), parsed);
        }
        out.push(Value::Object(call));
    }
    Ok(Value::Array(out))
}

/// An assistant message's reasoning, under both names templates read (`reasoning`, vLLM's
/// since 0.17, and `reasoning_content`, DeepSeek's and SGLang's).
pub fn insert_reasoning(message: &mut Map<String, Value>, reasoning: Value) {
    message.insert("reasoning".into(), reasoning.clone());
    message.insert("reasoning_content".into(), reasoning);
}

/// A call's `arguments` as the object templates expect: JSON text parsed, an object kept.
/// Malformed or non-object arguments in history become {} (as vLLM does), so the conversation
/// stays usable.
pub fn arguments_object(arguments: Option<&Value>) -> Value {
    match arguments {
        Some(Value::Object(o)) => Value::Object(o.clone()),
        Some(Value::String(s)) if !s.is_empty() => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(o)) => Value::Object(o),
            _ => Value::Object(Map::new()),
        },
        _ => Value::Object(Map::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A template with Qwen's role handling: no `developer`, a system message only first.
    const QWEN_LIKE: &str =
        "{%- if messages[0].role == 'system' %}{%- endif %}{%- if message.role == \"user\" %}{% endif %}";

    fn normalize(messages: &Value, template: &str) -> Result<Value, ApiError> {
        let text_only: crate::media::VisionSupport = Err("its config.json has no vision_config".into());
        let mut media = Collector::new(&text_only, "test-model");
        super::normalize(messages, &Renderer::jinja(template.to_string()).expect("a template"), &mut media)
    }

    #[test]
    fn normalizes_like_vllm() {
        let input = json!([
            {"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "user", "content": "hi", "name": "bob", "extra": 1},
            {"role": "assistant", "content": null, "reasoning_content": "think",
             "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "42"}]},
            {"role": "assistant", "content": "x", "tool_calls": []}
        ]);
        let out = normalize(&input, QWEN_LIKE).unwrap();
        assert_eq!(
            out,
            json!([
                {"role": "system", "content": "a\nb"},
                {"role": "user", "content": "hi", "name": "bob"},
                {"role": "assistant", "content": "",
                 "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}],
                 "reasoning": "think", "reasoning_content": "think"},
                {"role": "tool", "content": "42", "tool_call_id": "call_1"},
                {"role": "assistant", "content": "x"}
            ])
        );
    }

    #[test]
    fn a_template_reading_parts_gets_them_as_vllm_hands_them_over() {
        // Reads content as parts (a loop over it); names no developer role.
        let parts = "{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}";
        let input = json!([
            {"role": "system", "content": "s"},
            {"role": "developer", "content": [{"type": "text", "text": "d1"}, {"type": "text", "text": "d2"}]},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": null},
            {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "4"}, {"type": "text", "text": "2"}]}
        ]);
        let out = normalize(&input, parts).unwrap();
        assert_eq!(
            out,
            json!([
                // The system messages merged into one string, as vLLM merges them.
                {"role": "system", "content": "s\n\nd1\nd2"},
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                {"role": "assistant", "content": []},
                {"role": "tool", "content": "4\n2", "tool_call_id": "c"}
            ])
        );
        let one = normalize(&json!([{"role": "user", "content": "hi"}]), parts).unwrap();
        assert_eq!(one, json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}]));
    }

    #[test]
    fn rejects_bad_messages_naming_the_field() {
        let cases = [
            (json!([]), "messages"),
            (json!("hi"), "messages"),
            (json!([{"content": "x"}]), "messages.[0].role"),
            (json!([{"role": "user", "content": 5}]), "messages.[0].content"),
            (
                json!([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}]}]),
                "messages[0].content[1].image_url",
            ),
            (
                json!([{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}]),
                "messages[0].content[0].image_url",
            ),
            (json!([{"role": "user", "content": [{"type": "input_audio"}]}]), "messages.[0].content"),
            (json!([1]), "messages.[0]"),
            (json!([{"role": "user", "content": "a"}, {"role": "wizard", "content": "b"}]), "messages.[1].role"),
            (json!([{"role": "ipython", "content": "b"}]), "messages.[0].role"),
            (
                json!([{"role": "user", "content": [{"type": "video_url", "video_url": {"url": "x"}}]},
                       {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "y"}}]}]),
                "messages",
            ),
        ];
        for (input, param) in cases {
            let e = normalize(&input, QWEN_LIKE).unwrap_err();
            assert_eq!(e.status, 400);
            assert_eq!(e.param.as_deref(), Some(param), "{input}");
        }
    }

    #[test]
    fn images_and_videos_in_one_request_answer_smgs_text() {
        let mixed = json!([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}},
                                                        {"type": "video_url", "video_url": {"url": "y"}}]}]);
        let e = normalize(&mixed, QWEN_LIKE).unwrap_err();
        assert!(e.message.starts_with("the vLLM ZMQ backend takes one modality per request"), "{}", e.message);
        let one = json!([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}},
                                                      {"type": "image_url", "image_url": {"url": "y"}}]}]);
        assert_eq!(
            normalize(&one, QWEN_LIKE).unwrap_err().message,
            "the model 'test-model' does not take images (its config.json has no vision_config)"
        );
    }

    #[test]
    fn malformed_arguments_become_empty_objects() {
        let input =
            json!([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "not json"}}]}]);
        let out = normalize(&input, QWEN_LIKE).unwrap();
        assert_eq!(out[0]["tool_calls"][0]["function"]["arguments"], json!({}));
    }

    #[test]
    fn an_unknown_role_is_refused_unless_the_template_names_it() {
        let e = normalize(&json!([{"role": "wizard", "content": "x"}]), QWEN_LIKE).unwrap_err();
        assert_eq!(
            e.message,
            "Invalid value: 'wizard'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'."
        );
        let llama = "{%- if message.role == 'ipython' %}{% endif %}";
        assert!(normalize(&json!([{"role": "ipython", "content": "x"}]), llama).is_ok());
    }

    #[test]
    fn developer_messages_become_system_where_the_template_has_no_developer_role() {
        let cases = [
            // Alone: just renamed, its tools dropped.
            (
                json!([{"role": "developer", "content": "Be terse.", "tools": [1]}, {"role": "user", "content": "hi"}]),
                QWEN_LIKE,
                json!([{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]),
            ),
            // Beside a system message, or after the first turn: merged into one system message first.
            (
                json!([
                    {"role": "system", "content": "S"}, {"role": "user", "content": "hi"},
                    {"role": "developer", "content": "D"}, {"role": "developer", "content": ""}
                ]),
                QWEN_LIKE,
                json!([{"role": "system", "content": "S\n\nD"}, {"role": "user", "content": "hi"}]),
            ),
            // A template that renders developer messages gets them as they are.
            (
                json!([{"role": "developer", "content": "D"}]),
                "{% if m.role == \"developer\" %}{% endif %}",
                json!([{"role": "developer", "content": "D", "tools": null}]),
            ),
        ];
        for (input, template, expected) in cases {
            assert_eq!(normalize(&input, template).unwrap(), expected, "{input}");
        }
    }
}
