//! `system` and `messages` → the conversation a chat template sees (the shape
//! `api::chat_prompt` takes: OpenAI chat messages, `tool_calls` arguments as objects), built as
//! vLLM's Anthropic endpoint builds it, except where that loses content:
//!
//! - `system`: a string, or text blocks joined with nothing between them (as vLLM joins them),
//!   becomes the first message, a system message.
//! - A user turn: each `tool_result` becomes a `role: "tool"` message with `tool_call_id`, its
//!   content a string or text blocks joined by newlines (always a string, as vLLM's chat path
//!   leaves a tool message of text), followed by a user message of the result's `image` blocks
//!   if it has any (as vLLM does: templates show no images in a tool message); then the turn's
//!   own content, if any, as a user message. A turn that mixes both is split this way, tool
//!   messages first: templates render tool results right after the assistant's calls, and a
//!   user message between them breaks that.
//! - An assistant turn: text blocks joined by newlines, `tool_use` blocks as `tool_calls`
//!   (`arguments`: the `input` object), `thinking` blocks as the message's reasoning (under
//!   `reasoning_content` and `reasoning`, the two names templates read); `redacted_thinking` is
//!   dropped (its text is encrypted, for Anthropic's models only).
//! - Empty text blocks are skipped, and a block list that leaves a turn with nothing drops it
//!   (as vLLM does).
//!
//! - `image` blocks (`source`: `{"type": "base64", "media_type", "data"}` as a `data:` URL, the
//!   type `base64` and the media type `image/jpeg` where missing, as vLLM defaults them; or
//!   `{"type": "url", "url"}`) go to the request's media items, in prompt order, as the chat
//!   `image_url` parts vLLM turns them into; other fields (`cache_control`) are ignored.
//!
//! Each message's content is what vLLM's chat path makes of those parts for the template's
//! content format (`Collector::content`): a string (texts joined by newlines, an image's
//! placeholder in front per image), or the list of parts in the client's order, where a string
//! is one text part and a turn of calls alone no parts.
//!
//! Anything else is a 400 naming the block (`messages.1.content.0`): other media blocks, images
//! in a system prompt, blocks in the wrong role, and OpenAI chat shapes (a `system` or `tool`
//! role, `tool_calls` on a message).

use serde_json::{Map, Value};

use super::invalid::other_api;
use crate::api::fields::Fields;
use crate::error::ApiError;
use crate::media::{Collector, Part};
use shardgate_text::template::content_format::ContentFormat;

/// Block types of Anthropic's API that this gateway does not take.
const UNSUPPORTED_BLOCKS: [&str; 7] = [
    "document",
    "search_result",
    "server_tool_use",
    "web_search_tool_result",
    "container_upload",
    "mcp_tool_use",
    "mcp_tool_result",
];

/// The request's system prompt and messages as the template's conversation, each content in
/// `format`; its images go to `media`.
pub fn conversation(f: &Fields<'_>, format: ContentFormat, media: &mut Collector<'_>) -> Result<Value, ApiError> {
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
        out.push(message("system", Collector::text(&system, format)));
    }
    for (i, m) in messages.iter().enumerate() {
        push_turn(&mut out, i, m, format, media)?;
    }
    Ok(Value::Array(out))
}

fn message(role: &str, content: Value) -> Value {
    Value::Object(message_map(role, content))
}

fn message_map(role: &str, content: Value) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("role".into(), Value::from(role));
    m.insert("content".into(), content);
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
fn push_turn(
    out: &mut Vec<Value>,
    i: usize,
    m: &Value,
    format: ContentFormat,
    media: &mut Collector<'_>,
) -> Result<(), ApiError> {
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
            out.push(message(role.name(), Collector::text(s, format)));
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
        turn.add(role, block, &format!("{at}.content.{j}"))?;
    }
    turn.push_into(out, role, &format!("{at}.content"), format, media)
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
struct Turn<'v> {
    /// The turn's own content, in the client's order.
    parts: Vec<Block<'v>>,
    /// Each `tool_result`'s tool message, and the images of its content.
    tool_results: Vec<(Value, Vec<Image>)>,
    calls: Vec<Value>,
    /// The thinking blocks' text, when there were any.
    thinking: Option<String>,
}

/// A content block of the turn's own message.
#[derive(Debug)]
enum Block<'v> {
    Text(&'v str),
    Image(Image),
}

/// An image block, read but not yet taken: the media items must follow the prompt's order,
/// and a turn's tool results (with their images) go before its own content.
#[derive(Debug)]
struct Image {
    /// The path naming its source (`messages.1.content.0.source`).
    at: String,
    url: String,
}

impl Image {
    fn read(block: &Map<String, Value>, at: &str) -> Result<Image, ApiError> {
        let at = format!("{at}.source");
        let url = image_url(block.get("source"), &at)?;
        Ok(Image { at, url })
    }

    /// Its media item taken, its part in the message.
    fn take(self, media: &mut Collector<'_>) -> Result<Part<'static>, ApiError> {
        media.image(self.at, &self.url).map(Part::Image)
    }
}

impl<'v> Turn<'v> {
    fn add(&mut self, role: Role, block: &'v Value, at: &str) -> Result<(), ApiError> {
        let obj = object(block, at)?;
        let kind = block_type(obj, at)?;
        match (kind, role) {
            ("text", _) => {
                let text = str_field(obj, "text", at)?;
                if !text.is_empty() {
                    self.parts.push(Block::Text(text));
                }
            }
            ("image", _) => self.parts.push(Block::Image(Image::read(obj, at)?)),
            ("tool_use", Role::Assistant) => self.calls.push(tool_call(obj, at)?),
            ("thinking", Role::Assistant) => {
                self.thinking.get_or_insert_with(String::new).push_str(str_field(obj, "thinking", at)?)
            }
            ("redacted_thinking", Role::Assistant) => {}
            ("tool_result", Role::User) => self.tool_results.push(tool_message(obj, at)?),
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

    fn push_into(
        self,
        out: &mut Vec<Value>,
        role: Role,
        at: &str,
        format: ContentFormat,
        media: &mut Collector<'_>,
    ) -> Result<(), ApiError> {
        for (tool, images) in self.tool_results {
            out.push(tool);
            if !images.is_empty() {
                let parts = images.into_iter().map(|image| image.take(media)).collect::<Result<Vec<_>, _>>()?;
                out.push(message("user", Collector::content(&parts, "\n", at, format)?));
            }
        }
        let parts = self
            .parts
            .into_iter()
            .map(|block| match block {
                Block::Text(text) => Ok(Part::Text(text)),
                Block::Image(image) => image.take(media),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let content = Collector::content(&parts, "\n", at, format)?;
        match role {
            Role::User if parts.is_empty() => {}
            Role::User => out.push(message("user", content)),
            Role::Assistant if parts.is_empty() && self.calls.is_empty() && self.thinking.is_none() => {}
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
    let kind = match source.get("type") {
        None | Some(Value::Null) => "base64",
        Some(_) => block_type(source, at)?,
    };
    match kind {
        "base64" => {
            let media_type = match source.get("media_type") {
                None | Some(Value::Null) => "image/jpeg",
                Some(_) => str_field(source, "media_type", at)?,
            };
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

/// A user's `tool_result` as a tool message and the images of its content (`is_error` is
/// accepted; templates have no place for it).
fn tool_message(obj: &Map<String, Value>, at: &str) -> Result<(Value, Vec<Image>), ApiError> {
    let id = str_field(obj, "tool_use_id", at)?;
    if obj.get("is_error").is_some_and(|v| !v.is_null() && !v.is_boolean()) {
        return Err(ApiError::invalid_param(&format!("{at}.is_error"), "Input should be a valid boolean"));
    }
    let mut images = Vec::new();
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
                    "image" => images.push(Image::read(inner, &at)?),
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
    Ok((Value::Object(m), images))
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
