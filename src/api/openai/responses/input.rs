//! A Responses request's `instructions`, the items before it (`history::load`) and its `input`
//! (a string, or items) → the conversation a chat template sees, built as vLLM builds it
//! (`vllm/entrypoints/openai/responses/utils.py`, `construct_input_messages`):
//!
//! - `instructions` → a system message first (only this request's: OpenAI documents that
//!   instructions do not carry over from a previous response, and they are no item);
//! - a `message` item → a message of its role, its parts (`input_text`, `input_image`, …) in
//!   the client's order; an assistant's text parts are one string (joined with newlines);
//! - `function_call` items → `tool_calls` of the assistant message before them (consecutive
//!   calls, and calls after an assistant message, are one message), `arguments` parsed;
//! - `function_call_output` → a `tool` message (a string, unless its output holds images);
//! - a `reasoning` item (its first `content` text, else its first `summary` text) → the
//!   reasoning of the assistant message it begins, or of the one before it if that has none;
//!   an assistant `message` after it becomes that message's content.
//!
//! Messages end in chat's shape (`conversation.rs`), so templates see what `/v1/chat/completions`
//! would show them: each content in the template's format (`Collector::content`), a string
//! (`instructions`, merged assistant text) as one text part in the list format, and a message
//! of calls alone as no parts. Every refusal names the item's field (`input[1].content[0].type`).

use serde_json::{Map, Value};

use crate::api::openai::conversation::{arguments_object, insert_reasoning, template_roles, tool_content};
use crate::error::ApiError;
use crate::media::{Collector, Part};
use shardgate_text::render::Renderer;
use shardgate_text::template::content_format::ContentFormat;
use shardgate_util::ids::random_hex;

/// What the template renders, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub messages: Value,
    /// The last input item is an assistant message still in progress: the model continues it
    /// (vLLM's `should_continue_final_message`) instead of starting a new turn.
    pub continue_final: bool,
}

/// A request's `input`, read and checked (before any stored item is loaded).
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    messages: Vec<Map<String, Value>>,
    continue_final: bool,
}

/// Its contents in `format` (the renderer's, which `conversation` gets); its `input_image`
/// parts go to `media`.
pub fn read(input: &Value, format: ContentFormat, media: &mut Collector<'_>) -> Result<Input, ApiError> {
    match input {
        Value::String(text) => {
            Ok(Input { messages: vec![message("user", Collector::text(text, format))], continue_final: false })
        }
        Value::Array(items) => Ok(Input {
            messages: Items::build(items, "input", format, media)?,
            continue_final: items.last().is_some_and(in_progress),
        }),
        _ => Err(ApiError::invalid_param("input", "'input' must be a string or a list of input items")),
    }
}

/// The conversation: `instructions`, then `history` (stored items, named `history_param` in
/// errors), then the input (`read` into `media`; the history's images go before its own).
pub fn conversation(
    instructions: Option<&str>,
    history: &[Value],
    history_param: &str,
    input: Input,
    renderer: &Renderer,
    media: &mut Collector<'_>,
) -> Result<Conversation, ApiError> {
    let format = renderer.content_format();
    let mut messages = Vec::new();
    if let Some(text) = instructions.filter(|t| !t.is_empty()) {
        messages.push(message("system", Collector::text(text, format)));
    }
    let input_images = std::mem::take(&mut media.items);
    messages.extend(Items::build(history, history_param, format, media)?);
    media.items.extend(input_images);
    messages.extend(input.messages);
    if messages.is_empty() {
        return Err(ApiError::invalid_param("input", "'input' must contain at least one item"));
    }
    let messages = messages.into_iter().map(|m| chat_shape(m, format)).collect();
    Ok(Conversation {
        messages: Value::Array(template_roles(messages, renderer)),
        continue_final: input.continue_final,
    })
}

/// A message or reasoning item whose status says the model was still writing it.
fn in_progress(item: &Value) -> bool {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("message");
    matches!(kind, "message" | "reasoning")
        && matches!(item.get("status").and_then(Value::as_str), Some("in_progress" | "incomplete"))
}

fn message(role: &str, content: Value) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("role".into(), Value::from(role));
    m.insert("content".into(), content);
    m
}

/// Chat's key order and defaults: `content` always (no content when only calls or reasoning
/// came: empty, or no parts), reasoning under both of its names.
fn chat_shape(mut m: Map<String, Value>, format: ContentFormat) -> Value {
    let mut out = Map::new();
    for key in ["role", "content", "tool_calls"] {
        if let Some(v) = m.remove(key) {
            out.insert(key.into(), v);
        } else if key == "content" {
            let none = match format {
                ContentFormat::String => Value::from(""),
                ContentFormat::OpenAi => Value::Array(Vec::new()),
            };
            out.insert(key.into(), none);
        }
    }
    if let Some(r) = m.remove("reasoning") {
        insert_reasoning(&mut out, r);
    }
    out.extend(m);
    Value::Object(out)
}

fn bad(param: &str, message: impl Into<String>) -> ApiError {
    ApiError::invalid_param(param, message)
}

/// The messages of a list of items, merged as vLLM merges them, their contents in `format`;
/// their images go to `media`.
struct Items<'m, 'v> {
    messages: Vec<Map<String, Value>>,
    format: ContentFormat,
    media: &'m mut Collector<'v>,
}

impl Items<'_, '_> {
    fn build(
        items: &[Value],
        param: &str,
        format: ContentFormat,
        media: &mut Collector<'_>,
    ) -> Result<Vec<Map<String, Value>>, ApiError> {
        let mut b = Items { messages: Vec::with_capacity(items.len()), format, media };
        for (i, item) in items.iter().enumerate() {
            b.push(item, &format!("{param}[{i}]"))?;
        }
        Ok(b.messages)
    }

    /// The assistant message the next item may complete.
    fn last_assistant(&mut self) -> Option<&mut Map<String, Value>> {
        self.messages.last_mut().filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
    }

    fn push(&mut self, item: &Value, at: &str) -> Result<(), ApiError> {
        let obj = item.as_object().ok_or_else(|| bad(at, "each input item must be an object"))?;
        let kind = match obj.get("type") {
            None | Some(Value::Null) if obj.contains_key("role") => "message",
            Some(Value::String(kind)) => kind.as_str(),
            _ => return Err(bad(&format!("{at}.type"), "each input item needs a string 'type'")),
        };
        match kind {
            "message" => self.message(obj, at),
            "function_call" => self.function_call(obj, at),
            "function_call_output" => self.function_call_output(obj, at),
            "reasoning" => self.reasoning(obj, at),
            "mcp_call" => self.mcp_call(obj, at),
            // What a server listed and what waited for approval are not the conversation; an
            // answer to an approval request is the tool loop's (`approval.rs`).
            "mcp_list_tools" | "mcp_approval_request" | "mcp_approval_response" => Ok(()),
            other => Err(bad(
                &format!("{at}.type"),
                format!(
                    "input items of type '{other}' are not supported; use 'message', 'function_call', \
                     'function_call_output', 'reasoning', 'mcp_call', 'mcp_list_tools', \
                     'mcp_approval_request' or 'mcp_approval_response'"
                ),
            )),
        }
    }

    fn message(&mut self, obj: &Map<String, Value>, at: &str) -> Result<(), ApiError> {
        let role = match obj.get("role").and_then(Value::as_str) {
            Some(role @ ("user" | "system" | "developer" | "assistant")) => role,
            Some(other) => {
                return Err(bad(
                    &format!("{at}.role"),
                    format!(
                    "Invalid value: '{other}'. Supported values are: 'user', 'assistant', 'system', and 'developer'."
                ),
                ))
            }
            None => return Err(bad(&format!("{at}.role"), "a message needs a string 'role'")),
        };
        let param = format!("{at}.content");
        let parts = content_parts(obj.get("content"), &param, self.media)?;
        let content = if role == "assistant" && parts.iter().all(|p| matches!(p, Part::Text(_))) {
            // vLLM hands an assistant item's text on as a string: one text part.
            let texts: Vec<&str> =
                parts.iter().filter_map(|p| if let Part::Text(t) = p { Some(*t) } else { None }).collect();
            Collector::text(&texts.join("\n"), self.format)
        } else {
            Collector::content(&parts, "\n", &param, self.format)?
        };
        if role == "assistant" {
            if let Some(prev) = self.last_assistant().filter(|m| !m.contains_key("content")) {
                prev.insert("content".into(), content);
                return Ok(());
            }
        }
        self.messages.push(message(role, content));
        Ok(())
    }

    fn function_call(&mut self, obj: &Map<String, Value>, at: &str) -> Result<(), ApiError> {
        let call_id = required_str(obj, "call_id", at)?;
        let name = required_str(obj, "name", at)?;
        let arguments = required_str(obj, "arguments", at)?;
        let mut function = Map::new();
        function.insert("name".into(), Value::from(name));
        function.insert("arguments".into(), arguments_object(Some(&Value::from(arguments))));
        let mut call = Map::new();
        call.insert("id".into(), Value::from(call_id));
        call.insert("type".into(), Value::from("function"));
        call.insert("function".into(), Value::Object(function));
        let call = Value::Object(call);
        if let Some(prev) = self.last_assistant() {
            if let Some(Value::Array(calls)) = prev.get_mut("tool_calls") {
                calls.push(call);
            } else {
                prev.insert("tool_calls".into(), Value::Array(vec![call]));
            }
            return Ok(());
        }
        let mut m = Map::new();
        m.insert("role".into(), Value::from("assistant"));
        m.insert("tool_calls".into(), Value::Array(vec![call]));
        self.messages.push(m);
        Ok(())
    }

    /// An MCP call the gateway ran (a stored response's, continued): the model's call under the
    /// tool's name, and its output (or its error) as the call's output.
    fn mcp_call(&mut self, obj: &Map<String, Value>, at: &str) -> Result<(), ApiError> {
        let id = required_str(obj, "id", at)?;
        let output = match (obj.get("output").and_then(Value::as_str), obj.get("error").filter(|e| !e.is_null())) {
            (Some(output), _) => output.to_string(),
            (None, Some(e)) => {
                let message = e.get("message").and_then(Value::as_str).map_or_else(|| e.to_string(), str::to_string);
                format!("error: {message}")
            }
            (None, None) => String::new(),
        };
        let mut call = Map::new();
        call.insert("call_id".into(), Value::from(id));
        call.insert("name".into(), Value::from(required_str(obj, "name", at)?));
        call.insert("arguments".into(), Value::from(required_str(obj, "arguments", at)?));
        self.function_call(&call, at)?;
        let mut result = Map::new();
        result.insert("call_id".into(), Value::from(id));
        result.insert("output".into(), Value::from(output));
        self.function_call_output(&result, at)
    }

    fn function_call_output(&mut self, obj: &Map<String, Value>, at: &str) -> Result<(), ApiError> {
        let call_id = required_str(obj, "call_id", at)?;
        let output = match obj.get("output") {
            Some(Value::String(s)) => Value::String(s.clone()),
            Some(parts @ Value::Array(_)) => {
                let param = format!("{at}.output");
                let parts = content_parts(Some(parts), &param, self.media)?;
                tool_content(Collector::content(&parts, "\n", &param, self.format)?)
            }
            _ => return Err(bad(&format!("{at}.output"), "'output' must be a string or a list of content parts")),
        };
        let mut m = message("tool", output);
        m.insert("tool_call_id".into(), Value::from(call_id));
        self.messages.push(m);
        Ok(())
    }

    fn reasoning(&mut self, obj: &Map<String, Value>, at: &str) -> Result<(), ApiError> {
        if obj.get("encrypted_content").is_some_and(|v| !v.is_null()) {
            return Err(bad(&format!("{at}.encrypted_content"), "Encrypted content is not supported."));
        }
        let first_text = |field: &str| -> Result<Option<String>, ApiError> {
            match obj.get(field) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Array(parts)) => match parts.first() {
                    None => Ok(None),
                    Some(part) => {
                        part.get("text").and_then(Value::as_str).map(|t| Some(t.to_string())).ok_or_else(|| {
                            bad(&format!("{at}.{field}[0].text"), "a reasoning part needs a string 'text'")
                        })
                    }
                },
                Some(_) => Err(bad(&format!("{at}.{field}"), format!("'{field}' must be a list"))),
            }
        };
        // vLLM reads the first part only, `content` before `summary`.
        let text = match first_text("content")? {
            Some(t) => t,
            None => first_text("summary")?.unwrap_or_default(),
        };
        if let Some(prev) = self.last_assistant().filter(|m| !m.contains_key("reasoning")) {
            prev.insert("reasoning".into(), Value::String(text));
            return Ok(());
        }
        let mut m = Map::new();
        m.insert("role".into(), Value::from("assistant"));
        m.insert("reasoning".into(), Value::String(text));
        self.messages.push(m);
        Ok(())
    }
}

fn required_str<'v>(obj: &'v Map<String, Value>, field: &str, at: &str) -> Result<&'v str, ApiError> {
    obj.get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| bad(&format!("{at}.{field}"), format!("'{field}' must be a string")))
}

/// A message's content as parts: a string as one text part; text parts, and `input_image`
/// parts (`image_url`: a data or http(s) URL; `detail` ignored, as vLLM ignores it) as their
/// placeholders. Other media parts, and an image by `file_id`, are refused naming the part.
fn content_parts<'v>(
    content: Option<&'v Value>,
    param: &str,
    media: &mut Collector<'_>,
) -> Result<Vec<Part<'v>>, ApiError> {
    let parts = match content {
        Some(Value::String(s)) => return Ok(vec![Part::Text(s)]),
        Some(Value::Array(parts)) => parts,
        _ => return Err(bad(param, "'content' must be a string or a list of content parts")),
    };
    let mut out = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let at = format!("{param}[{j}]");
        let kind = part
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(&format!("{at}.type"), "a content part needs a string 'type'"))?;
        let field = match kind {
            "input_text" | "output_text" | "text" => "text",
            "refusal" => "refusal",
            "input_image" => {
                out.push(Part::Image(input_image(part, &at, media)?));
                continue;
            }
            "input_file" => return Err(bad(&at, "file inputs are not supported yet")),
            "input_audio" => return Err(bad(&at, "audio inputs are not supported yet")),
            other => {
                return Err(bad(
                    &format!("{at}.type"),
                    format!("content parts of type '{other}' are not supported; use 'input_text' or 'output_text'"),
                ))
            }
        };
        let text = part
            .get(field)
            .and_then(Value::as_str)
            .ok_or_else(|| bad(&format!("{at}.{field}"), format!("a '{kind}' part needs a string '{field}'")))?;
        out.push(Part::Text(text));
    }
    Ok(out)
}

/// An `input_image` part's placeholder (its image to `media`).
fn input_image(part: &Value, at: &str, media: &mut Collector<'_>) -> Result<&'static str, ApiError> {
    if part.get("file_id").is_some_and(|v| !v.is_null()) {
        return Err(bad(&format!("{at}.file_id"), "images by file_id are not supported; give 'image_url' (a URL)"));
    }
    let url = part.get("image_url").and_then(Value::as_str);
    let url = url.ok_or_else(|| bad(&format!("{at}.image_url"), "an 'input_image' part needs a string 'image_url'"))?;
    media.image(format!("{at}.image_url"), url)
}

/// The request's input as stored items (`history::save`): a string as one user message, every
/// item with a `type` and an `id` (`msg_…`, `fc_…`, `fco_…`, `rs_…`) where it had none.
/// Call it on input `conversation` accepted.
pub fn stored_items(input: &Value) -> Vec<Value> {
    match input {
        Value::String(text) => {
            let part = serde_json::json!({"type": "input_text", "text": text});
            vec![serde_json::json!({"type": "message", "id": item_id("msg"), "role": "user", "content": [part]})]
        }
        Value::Array(items) => items.iter().filter_map(Value::as_object).map(stored_item).collect(),
        _ => Vec::new(),
    }
}

fn stored_item(item: &Map<String, Value>) -> Value {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("message").to_string();
    let mut out = Map::new();
    let id = match item.get("id").and_then(Value::as_str) {
        Some(id) => id.to_string(),
        None => item_id(match kind.as_str() {
            "function_call" => "fc",
            "function_call_output" => "fco",
            "reasoning" => "rs",
            _ => "msg",
        }),
    };
    out.insert("type".into(), Value::String(kind));
    out.insert("id".into(), Value::String(id));
    out.extend(item.iter().filter(|(k, _)| *k != "type" && *k != "id").map(|(k, v)| (k.clone(), v.clone())));
    Value::Object(out)
}

/// `<prefix>_<32 hex>`, as vLLM's item ids.
pub fn item_id(prefix: &str) -> String {
    let mut id = String::with_capacity(prefix.len() + 33);
    id.push_str(prefix);
    id.push('_');
    id.push_str(&random_hex(32));
    id
}

#[cfg(test)]
#[path = "input_tests.rs"]
mod tests;
