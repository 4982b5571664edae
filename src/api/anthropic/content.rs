//! `system` and `messages` → the conversation a chat template sees (the shape
//! `api::chat_prompt` takes: OpenAI chat messages, `tool_calls` arguments as objects), built as
//! vLLM's Anthropic endpoint builds it, except where that loses content:
//!
//! - `system`: a string, or text blocks joined with nothing between them (as vLLM joins them),
//!   becomes the first message, a system message.
//! - A user turn: each `tool_result` becomes a `role: "tool"` message with `tool_call_id`, its
//!   content a string or text blocks joined by newlines (vLLM writes a block list as Python's
//!   `str` of it); then the turn's text, if any, as a user message. A turn that mixes both is
//!   split this way, tool messages first: templates render tool results right after the
//!   assistant's calls, and a user message between them breaks that.
//! - An assistant turn: text blocks joined by newlines, `tool_use` blocks as `tool_calls`
//!   (`arguments`: the `input` object), `thinking` blocks as the message's reasoning (under
//!   `reasoning_content` and `reasoning`, the two names templates read); `redacted_thinking` is
//!   dropped (its text is encrypted, for Anthropic's models only).
//! - Empty text blocks are skipped, and a block list that leaves a turn with nothing drops it
//!   (as vLLM does).
//!
//! - A user turn's `image` blocks (`source`: `{"type": "base64", "media_type", "data"}`, as a
//!   `data:` URL, or `{"type": "url", "url"}`) go to the request's media items, their
//!   placeholders in front of the turn's text, as vLLM does for the chat `image_url` parts it
//!   turns them into.
//!
//! Anything else is a 400 naming the block (`messages.1.content.0`): other media blocks, images
//! outside a user turn's own blocks, blocks in the wrong role, and OpenAI chat shapes (a `system`
//! or `tool` role, `tool_calls` on a message).

use serde_json::{Map, Value};

use super::invalid::other_api;
use crate::api::fields::Fields;
use crate::error::ApiError;
use crate::media::Collector;

/// Block types of Anthropic's API that this gateway does not take.
const UNSUPPORTED_BLOCKS: [&str; 8] = [
    "image",
    "document",
    "search_result",
    "server_tool_use",
    "web_search_tool_result",
    "container_upload",
    "mcp_tool_use",
    "mcp_tool_result",
];

/// The request's system prompt and messages as the template's conversation; its images go to
/// `media`.
pub fn conversation(f: &Fields<'_>, media: &mut Collector<'_>) -> Result<Value, ApiError> {
    let messages = match f.get("messages") {
        None => return Err(ApiError::invalid_param("messages", "Field required")),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(ApiError::invalid_param("messages", "Input should be a valid list")),
    };
    if messages.is_empty() {
        return Err(ApiError::invalid_param("messages", "at least one message is required"));
    }
    let mut out = Vec::with_capacity(messages.len() + 1);
    if let Some(system) = system_prompt(f.get("system"))? {
        out.push(message("system", system));
    }
    for (i, m) in messages.iter().enumerate() {
        push_turn(&mut out, i, m, media)?;
    }
    Ok(Value::Array(out))
}

fn message(role: &str, content: String) -> Value {
    Value::Object(message_map(role, content))
}

fn message_map(role: &str, content: String) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("role".into(), Value::from(role));
    m.insert("content".into(), Value::String(content));
    m
}

/// `system`: a string or text blocks; none when empty (vLLM skips an empty one).
fn system_prompt(system: Option<&Value>) -> Result<Option<String>, ApiError> {
    match system {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone()).filter(|s| !s.is_empty())),
        Some(Value::Array(blocks)) if blocks.is_empty() => Ok(None),
        Some(Value::Array(blocks)) => {
            let mut text = String::new();
            for (k, block) in blocks.iter().enumerate() {
                let at = format!("system.{k}");
                let obj = object(block, &at)?;
                match block_type(obj, &at)? {
                    "text" => text.push_str(str_field(obj, "text", &at)?),
                    other => {
                        return Err(ApiError::invalid_param(
                            &format!("{at}.type"),
                            format!("system blocks must be text blocks, got '{other}'"),
                        ))
                    }
                }
            }
            Ok(Some(text))
        }
        Some(_) => Err(ApiError::invalid_param("system", "Input should be a valid string or a list of text blocks")),
    }
}

/// One message of the request → its template messages (none, one, or tool messages and one).
fn push_turn(out: &mut Vec<Value>, i: usize, m: &Value, media: &mut Collector<'_>) -> Result<(), ApiError> {
    let at = format!("messages.{i}");
    let obj = object(m, &at)?;
    for key in ["tool_calls", "tool_call_id", "function_call"] {
        if obj.get(key).is_some_and(|v| !v.is_null()) {
            return Err(other_api(
                &format!("{at}.{key}"),
                "Chat Completions",
                "tool calls are tool_use blocks in an assistant message, their results tool_result blocks in a \
                 user message",
            ));
        }
    }
    let role = role(obj, &at)?;
    let blocks = match obj.get("content") {
        None | Some(Value::Null) => return Err(ApiError::invalid_param(&format!("{at}.content"), "Field required")),
        Some(Value::String(s)) => {
            out.push(message(role.name(), s.clone()));
            return Ok(());
        }
        Some(Value::Array(blocks)) if blocks.is_empty() => {
            return Err(ApiError::invalid_param(&format!("{at}.content"), "message content must not be empty"))
        }
        Some(Value::Array(blocks)) => blocks,
        Some(_) => {
            return Err(ApiError::invalid_param(
                &format!("{at}.content"),
                "Input should be a valid string or a list of content blocks",
            ))
        }
    };
    let mut turn = Turn::default();
    for (j, block) in blocks.iter().enumerate() {
        turn.add(role, block, &format!("{at}.content.{j}"), media)?;
    }
    turn.push_into(out, role, &format!("{at}.content"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    User,
    Assistant,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

fn role(obj: &Map<String, Value>, at: &str) -> Result<Role, ApiError> {
    let param = format!("{at}.role");
    match obj.get("role") {
        Some(Value::String(r)) => match r.as_str() {
            "user" => Ok(Role::User),
            "assistant" => Ok(Role::Assistant),
            "system" => Err(ApiError::invalid_param(
                &param,
                "the Messages API has no system role in `messages` (that is OpenAI's Chat Completions shape); \
                 put the system prompt in the top-level `system` field",
            )),
            other @ ("tool" | "developer" | "function") => Err(other_api(
                &param,
                "Chat Completions",
                &format!(
                    "'{other}' is not a role here: roles are 'user' and 'assistant', tool results are \
                     tool_result blocks"
                ),
            )),
            other => {
                Err(ApiError::invalid_param(&param, format!("Input should be 'user' or 'assistant', got '{other}'")))
            }
        },
        Some(_) => Err(ApiError::invalid_param(&param, "Input should be 'user' or 'assistant'")),
        None => Err(ApiError::invalid_param(&param, "Field required")),
    }
}

/// One turn's blocks, sorted by what they become.
#[derive(Debug, Default)]
struct Turn {
    texts: Vec<String>,
    tool_results: Vec<Value>,
    calls: Vec<Value>,
    /// The thinking blocks' text, when there were any.
    thinking: Option<String>,
    /// A placeholder per image block.
    images: Vec<&'static str>,
}

impl Turn {
    fn add(&mut self, role: Role, block: &Value, at: &str, media: &mut Collector<'_>) -> Result<(), ApiError> {
        let obj = object(block, at)?;
        let kind = block_type(obj, at)?;
        match (kind, role) {
            ("text", _) => {
                let text = str_field(obj, "text", at)?;
                if !text.is_empty() {
                    self.texts.push(text.to_string());
                }
            }
            ("tool_use", Role::Assistant) => self.calls.push(tool_call(obj, at)?),
            ("thinking", Role::Assistant) => {
                self.thinking.get_or_insert_with(String::new).push_str(str_field(obj, "thinking", at)?)
            }
            ("redacted_thinking", Role::Assistant) => {}
            ("tool_result", Role::User) => self.tool_results.push(tool_message(obj, at)?),
            ("image", Role::User) => {
                let at = format!("{at}.source");
                let url = image_url(obj.get("source"), &at)?;
                self.images.push(media.image(at, &url)?);
            }
            ("tool_use" | "thinking" | "redacted_thinking", Role::User) => {
                return Err(ApiError::invalid_param(
                    &format!("{at}.type"),
                    format!("'{kind}' blocks belong in assistant messages"),
                ))
            }
            ("tool_result", Role::Assistant) => {
                return Err(ApiError::invalid_param(
                    &format!("{at}.type"),
                    "'tool_result' blocks belong in user messages",
                ))
            }
            (other, _) => return Err(unknown_block(other, at)),
        }
        Ok(())
    }

    fn push_into(self, out: &mut Vec<Value>, role: Role, at: &str) -> Result<(), ApiError> {
        out.extend(self.tool_results);
        let texts: Vec<&str> = self.texts.iter().map(String::as_str).collect();
        let content = Collector::message_text(&texts, "\n", &self.images, at)?;
        match role {
            Role::User if self.texts.is_empty() && self.images.is_empty() => {}
            Role::User => out.push(message("user", content)),
            Role::Assistant if self.texts.is_empty() && self.calls.is_empty() && self.thinking.is_none() => {}
            Role::Assistant => {
                let mut m = message_map("assistant", content);
                if !self.calls.is_empty() {
                    m.insert("tool_calls".into(), Value::Array(self.calls));
                }
                if let Some(thinking) = self.thinking {
                    m.insert("reasoning".into(), Value::String(thinking.clone()));
                    m.insert("reasoning_content".into(), Value::String(thinking));
                }
                out.push(Value::Object(m));
            }
        }
        Ok(())
    }
}

/// An image block's `source` as a URL: base64 data as a `data:` URL, or the URL given.
fn image_url(source: Option<&Value>, at: &str) -> Result<String, ApiError> {
    let source = object(source.unwrap_or(&Value::Null), at)?;
    match block_type(source, at)? {
        "base64" => {
            let media_type = str_field(source, "media_type", at)?;
            Ok(format!("data:{media_type};base64,{}", str_field(source, "data", at)?))
        }
        "url" => Ok(str_field(source, "url", at)?.to_string()),
        other => Err(ApiError::invalid_param(
            &format!("{at}.type"),
            format!("image sources of type '{other}' are not supported; use 'base64' or 'url'"),
        )),
    }
}

/// A block type this gateway does not take, or one no API has.
fn unknown_block(kind: &str, at: &str) -> ApiError {
    if UNSUPPORTED_BLOCKS.contains(&kind) {
        return ApiError::invalid_param(at, format!("{kind} content blocks are not supported yet"));
    }
    ApiError::invalid_param(
        &format!("{at}.type"),
        format!(
            "Input tag '{kind}' found using 'type' does not match any of the expected tags: 'text', 'image', \
             'tool_use', 'tool_result', 'thinking', 'redacted_thinking'"
        ),
    )
}

/// An assistant's `tool_use` as a template tool call.
fn tool_call(obj: &Map<String, Value>, at: &str) -> Result<Value, ApiError> {
    let id = str_field(obj, "id", at)?;
    let name = str_field(obj, "name", at)?;
    let arguments = match obj.get("input") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::Object(input)) => Value::Object(input.clone()),
        Some(_) => return Err(ApiError::invalid_param(&format!("{at}.input"), "Input should be a valid dictionary")),
    };
    let mut function = Map::new();
    function.insert("name".into(), Value::from(name));
    function.insert("arguments".into(), arguments);
    let mut call = Map::new();
    call.insert("id".into(), Value::from(id));
    call.insert("type".into(), Value::from("function"));
    call.insert("function".into(), Value::Object(function));
    Ok(Value::Object(call))
}

/// A user's `tool_result` as a tool message (`is_error` is accepted; templates have no place
/// for it).
fn tool_message(obj: &Map<String, Value>, at: &str) -> Result<Value, ApiError> {
    let id = str_field(obj, "tool_use_id", at)?;
    if obj.get("is_error").is_some_and(|v| !v.is_null() && !v.is_boolean()) {
        return Err(ApiError::invalid_param(&format!("{at}.is_error"), "Input should be a valid boolean"));
    }
    let content = match obj.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::with_capacity(blocks.len());
            for (k, block) in blocks.iter().enumerate() {
                let at = format!("{at}.content.{k}");
                let inner = object(block, &at)?;
                match block_type(inner, &at)? {
                    "text" => texts.push(str_field(inner, "text", &at)?),
                    other => return Err(unknown_block(other, &at)),
                }
            }
            texts.join("\n")
        }
        Some(_) => {
            return Err(ApiError::invalid_param(
                &format!("{at}.content"),
                "Input should be a valid string or a list of content blocks",
            ))
        }
    };
    let mut m = Map::new();
    m.insert("role".into(), Value::from("tool"));
    m.insert("tool_call_id".into(), Value::from(id));
    m.insert("content".into(), Value::String(content));
    Ok(Value::Object(m))
}

fn object<'v>(v: &'v Value, at: &str) -> Result<&'v Map<String, Value>, ApiError> {
    v.as_object().ok_or_else(|| ApiError::invalid_param(at, "Input should be a valid dictionary"))
}

fn block_type<'v>(obj: &'v Map<String, Value>, at: &str) -> Result<&'v str, ApiError> {
    match obj.get("type") {
        Some(Value::String(t)) => Ok(t),
        Some(_) => Err(ApiError::invalid_param(&format!("{at}.type"), "Input should be a valid string")),
        None => Err(ApiError::invalid_param(&format!("{at}.type"), "Field required")),
    }
}

fn str_field<'v>(obj: &'v Map<String, Value>, key: &str, at: &str) -> Result<&'v str, ApiError> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(ApiError::invalid_param(&format!("{at}.{key}"), "Field required")),
        Some(_) => Err(ApiError::invalid_param(&format!("{at}.{key}"), "Input should be a valid string")),
    }
}

#[cfg(test)]
#[path = "content_tests.rs"]
mod tests;
