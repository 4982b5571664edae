//! The message encoder DeepSeek-V4 and V4.1 share, a port of `encode_messages` in vLLM's
//! `deepseek_v4_encoding.py` and `deepseek_v41_encoding.py`; a [`Dialect`] holds what the two
//! do differently. The renderers (`deepseek_v4.rs`, `deepseek_v41.rs`) prepare the messages
//! (tools placed, the continued turn marked) and resolve thinking and the effort prefix.
//!
//! The encoder's own rules: tool results become `<tool_result>` blocks of a user turn (with
//! any user text right after them), ordered as the assistant's calls; consecutive user turns
//! merge, their parts joined by a blank line; with thinking on and `drop_thinking` (unless a
//! message declares tools), assistant turns before the last user turn lose their reasoning and
//! developer messages before it are dropped; the effort prefix leads the first message; a
//! turn that hands over to the assistant ends with `<｜Assistant｜>` and `<think>` (thinking
//! on, at or after the last user turn) or `</think>`.

use serde_json::{Map, Value};

use super::{dsml, text, truthy};
use crate::error::{PromptError, TemplateError};

const BOS: &str = "<｜begin▁of▁sentence｜>";
const EOS: &str = "<｜end▁of▁sentence｜>";
const USER: &str = "<｜User｜>";
const ASSISTANT: &str = "<｜Assistant｜>";
const SYSTEM: &str = "<｜System｜>";
const THINK_START: &str = "<think>";
const THINK_END: &str = "</think>";

/// What V4 and V4.1 encode differently.
pub struct Dialect {
    pub tags: dsml::Tags,
    /// The key an assistant turn's reasoning is read from (and dropped under).
    pub reasoning_key: &'static str,
    /// V4.1's system messages: a system message after the first is a turn of its own (marked
    /// `<｜System｜>`, counted as the last user turn, handing over to the assistant), and the
    /// first message is marked `<｜System｜>` when it is a system message or an effort prefix
    /// leads. V4 marks none, and hands over after a system message that ends the conversation
    /// or precedes an assistant turn.
    pub system_turns: bool,
}

/// What the renderer resolved for this request.
pub struct Encoding<'a> {
    pub thinking: bool,
    pub drop_thinking: bool,
    /// Written before the first message when thinking is on.
    pub effort_prefix: &'a str,
}

pub fn encode(dialect: &Dialect, messages: Vec<Value>, enc: &Encoding<'_>) -> Result<String, TemplateError> {
    let mut messages = merge_tool_results(messages);
    sort_tool_results(&mut messages);
    let drop = enc.drop_thinking && !messages.iter().any(|m| truthy(m.get("tools")));
    if enc.thinking && drop {
        messages = drop_earlier_reasoning(dialect, messages);
    }
    let ctx = Context {
        dialect,
        messages: &messages,
        thinking: enc.thinking,
        drop,
        last_user: last_user(dialect, &messages),
    };
    let mut prompt = String::from(BOS);
    for index in 0..messages.len() {
        ctx.render(&mut prompt, index, enc.effort_prefix)?;
    }
    Ok(prompt)
}

/// `merge_tool_messages`: a tool result becomes a `tool_result` block of a user turn, and a
/// user turn right after a merged one joins it.
fn merge_tool_results(messages: Vec<Value>) -> Vec<Value> {
    let mut merged: Vec<Value> = Vec::with_capacity(messages.len());
    for msg in messages {
        let block = match msg["role"].as_str() {
            Some("tool") => serde_json::json!({
                "type": "tool_result",
                "tool_use_id": msg.get("tool_call_id").cloned().unwrap_or(Value::from("")),
                "content": msg.get("content").cloned().unwrap_or(Value::from("")),
            }),
            Some("user") => {
                serde_json::json!({"type": "text", "text": msg.get("content").cloned().unwrap_or(Value::from(""))})
            }
            _ => {
                merged.push(msg);
                continue;
            }
        };
        let joins = merged.last().is_some_and(|m| m["role"] == "user" && m.get("content_blocks").is_some());
        if let Some(blocks) = merged.last_mut().filter(|_| joins).and_then(|m| m["content_blocks"].as_array_mut()) {
            blocks.push(block);
        } else if msg["role"] == "tool" {
            merged.push(serde_json::json!({"role": "user", "content_blocks": [block]}));
        } else {
            let mut msg = msg;
            msg["content_blocks"] = Value::Array(vec![block]);
            merged.push(msg);
        }
    }
    merged
}

/// `sort_tool_results_by_call_order`: a user turn's tool results in the order of the last
/// assistant turn's calls (unknown ids first, in their own order).
fn sort_tool_results(messages: &mut [Value]) {
    let mut order: Map<String, Value> = Map::new();
    for msg in messages.iter_mut() {
        if msg["role"] == "assistant" && truthy(msg.get("tool_calls")) {
            order = Map::new();
            for (i, call) in msg["tool_calls"].as_array().into_iter().flatten().enumerate() {
                let id = call.get("id").filter(|v| truthy(Some(v))).or_else(|| call["function"].get("id"));
                if let Some(id) = id.and_then(Value::as_str).filter(|id| !id.is_empty()) {
                    order.insert(id.to_string(), Value::from(i));
                }
            }
        } else if msg["role"] == "user" && !order.is_empty() {
            let Some(blocks) = msg.get_mut("content_blocks").and_then(Value::as_array_mut) else { continue };
            let slots: Vec<usize> = (0..blocks.len()).filter(|&i| blocks[i]["type"] == "tool_result").collect();
            if slots.len() < 2 {
                continue;
            }
            let mut results: Vec<Value> = slots.iter().map(|&i| blocks[i].clone()).collect();
            results.sort_by_key(|b| order.get(text(b, "tool_use_id")).and_then(Value::as_u64).unwrap_or(0));
            for (slot, result) in slots.into_iter().zip(results) {
                blocks[slot] = result;
            }
        }
    }
}

/// The last turn that counts as the user's (`None` where the encoder has -1).
fn last_user(dialect: &Dialect, messages: &[Value]) -> Option<usize> {
    messages.iter().enumerate().rposition(|(i, m)| {
        m["role"] == "user" || m["role"] == "developer" || (dialect.system_turns && m["role"] == "system" && i > 0)
    })
}

/// `_drop_thinking_messages`: before the last user turn, assistant turns lose their reasoning
/// and anything but user, system and tool turns is dropped.
fn drop_earlier_reasoning(dialect: &Dialect, messages: Vec<Value>) -> Vec<Value> {
    let last = last_user(dialect, &messages);
    let mut out = Vec::with_capacity(messages.len());
    for (i, mut m) in messages.into_iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        if matches!(role, "user" | "system" | "tool") || last.is_none_or(|u| i >= u) {
            out.push(m);
        } else if role == "assistant" {
            if let Some(o) = m.as_object_mut() {
                o.remove(dialect.reasoning_key);
            }
            out.push(m);
        }
    }
    out
}

struct Context<'a> {
    dialect: &'a Dialect,
    messages: &'a [Value],
    thinking: bool,
    drop: bool,
    last_user: Option<usize>,
}

impl Context<'_> {
    fn render(&self, prompt: &mut String, index: usize, effort_prefix: &str) -> Result<(), TemplateError> {
        let msg = &self.messages[index];
        let role = msg["role"].as_str().unwrap_or("");
        let effort = if index == 0 && self.thinking { effort_prefix } else { "" };
        if self.dialect.system_turns && index == 0 && (!effort.is_empty() || role == "system") {
            prompt.push_str(SYSTEM);
        }
        prompt.push_str(effort);
        match role {
            "system" => {
                if self.dialect.system_turns && index > 0 {
                    prompt.push_str(SYSTEM);
                }
                prompt.push_str(text(msg, "content"));
                self.push_tools(prompt, msg)?;
            }
            "developer" => {
                if text(msg, "content").is_empty() {
                    return Err(TemplateError::Prompt(PromptError::EmptyDeveloper { index }));
                }
                prompt.push_str(USER);
                prompt.push_str(text(msg, "content"));
                self.push_tools(prompt, msg)?;
            }
            "user" => {
                prompt.push_str(USER);
                push_user_content(prompt, msg);
            }
            "assistant" => self.render_assistant(prompt, index, msg)?,
            other => return Err(TemplateError::Prompt(PromptError::Role(other.to_string()))),
        }
        self.hand_over(prompt, index, role);
        Ok(())
    }

    fn push_tools(&self, prompt: &mut String, msg: &Value) -> Result<(), TemplateError> {
        let Some(tools) = msg.get("tools").and_then(Value::as_array).filter(|t| !t.is_empty()) else {
            return Ok(());
        };
        prompt.push_str("\n\n");
        prompt.push_str(&tools_section(&self.dialect.tags, &dsml::tool_schemas(tools)?));
        Ok(())
    }

    fn render_assistant(&self, prompt: &mut String, index: usize, msg: &Value) -> Result<(), TemplateError> {
        if self.thinking && (!self.drop || self.last_user.is_none_or(|u| index > u)) {
            prompt.push_str(text(msg, self.dialect.reasoning_key));
            prompt.push_str(THINK_END);
        }
        prompt.push_str(text(msg, "content"));
        if let Some(calls) = msg.get("tool_calls").and_then(Value::as_array).filter(|c| !c.is_empty()) {
            dsml::push_calls(prompt, &self.dialect.tags, calls)?;
        }
        if msg.get("wo_eos").and_then(Value::as_bool) != Some(true) {
            prompt.push_str(EOS);
        }
        Ok(())
    }

    /// The assistant's header after a turn that hands over to it (the last message, or one
    /// followed by an assistant turn).
    fn hand_over(&self, prompt: &mut String, index: usize, role: &str) {
        let next = self.messages.get(index + 1).map(|m| m["role"].as_str().unwrap_or(""));
        if next.is_some_and(|r| r != "assistant") {
            return;
        }
        let system_hands_over = if self.dialect.system_turns { index > 0 } else { true };
        if role == "user" || role == "developer" || (role == "system" && system_hands_over) {
            prompt.push_str(ASSISTANT);
            let open = self.thinking && (!self.drop || self.last_user.is_none_or(|u| index >= u));
            prompt.push_str(if open { THINK_START } else { THINK_END });
        }
    }
}

/// A user turn: its blocks joined by a blank line (a tool result in `<tool_result>`), or its
/// content.
fn push_user_content(prompt: &mut String, msg: &Value) {
    let Some(blocks) = msg.get("content_blocks").and_then(Value::as_array).filter(|b| !b.is_empty()) else {
        prompt.push_str(text(msg, "content"));
        return;
    };
    for (i, block) in blocks.iter().enumerate() {
        if i > 0 {
            prompt.push_str("\n\n");
        }
        match block["type"].as_str() {
            Some("text") => prompt.push_str(text(block, "text")),
            Some("tool_result") => {
                prompt.push_str("<tool_result>");
                prompt.push_str(text(block, "content"));
                prompt.push_str("</tool_result>");
            }
            other => prompt.push_str(&format!("[Unsupported {}]", other.unwrap_or("None"))),
        }
    }
}

/// `TOOLS_TEMPLATE` with the dialect's tags.
fn tools_section(tags: &dsml::Tags, schemas: &str) -> String {
    let (block, invoke, parameter) = (tags.block, tags.invoke, tags.parameter);
    format!(
        "## Tools

You have access to a set of tools to help answer the user's question. You can invoke tools by writing a \"<｜DSML｜{block}>\" block like the following:

<｜DSML｜{block}>
<｜DSML｜{invoke} name=\"$TOOL_NAME\">
<｜DSML｜{parameter} name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜{parameter}>
...
</｜DSML｜{invoke}>
<｜DSML｜{invoke} name=\"$TOOL_NAME2\">
...
</｜DSML｜{invoke}>
</｜DSML｜{block}>

String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.

If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside <think>...</think> BEFORE any tool calls or final response.

Otherwise, output directly after </think> with tool calls or final response.

### Available Tool Schemas

{schemas}

You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.
"
    )
}
