//! gpt-oss: the conversation as Harmony messages, rendered to token ids by the official
//! `openai-harmony` crate, the way vLLM builds them (`vllm/entrypoints/openai/parser/
//! harmony_utils.py`, `_make_request_with_harmony` in `vllm/renderers/online_renderer.py`).
//!
//! Rules:
//! - The system message: Harmony's defaults (model identity, knowledge cutoff, the
//!   analysis/commentary/final channels), today's date (UTC) as the conversation start, and the
//!   `reasoning_effort` when given: `low`, `medium` or `high`; any other value (`none`,
//!   `minimal`, ...) is refused, as vLLM refuses it. Unset, Harmony's default (medium) holds.
//! - A leading system or developer message is the developer message's instructions; the
//!   request's tools are its `functions` namespace. Without either there is no developer
//!   message. A later system or developer message is a developer message of its own.
//! - An assistant turn: with tool calls, its content (a preamble, `commentary`), then its
//!   reasoning (`analysis`), then one `commentary` message per call to `functions.NAME`, of
//!   content type `json`, holding the arguments as the client wrote them; without calls, its
//!   reasoning (`analysis`) then its content (`final`) when non-empty.
//! - A tool result comes from `functions.NAME` (the name of the call its `tool_call_id`
//!   answers) to the assistant, on `commentary`. A user message is as it is.
//! - History: `analysis` messages before the last `final` assistant message are dropped (the
//!   reasoning that led to an answer goes once the answer is given).
//! - The prompt ends by opening the assistant's turn; with `continue_final_message` it ends
//!   inside the final assistant message instead (rendered without its `<|end|>`), which the
//!   model continues.
//! - Text content parts are joined as they are; any role beyond the API's is refused.
//! - The model's stop tokens `<|return|>` and `<|call|>` are sent as stop token ids
//!   (`ModelAssets::extra_eos_token_ids`).

use std::collections::HashMap;

use openai_harmony::chat::{
    Author, Conversation, DeveloperContent, Message, ReasoningEffort, Role, SystemContent, ToolDescription,
};
use openai_harmony::HarmonyEncoding;
use serde_json::Value;

use super::{text, variables};
use crate::error::{PromptError, TemplateError};
use crate::template::RenderInput;

pub const ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];

/// The prompt's token ids; `start_date` is the conversation's (`YYYY-MM-DD`).
pub fn render(
    encoding: &HarmonyEncoding,
    input: &RenderInput<'_>,
    start_date: &str,
) -> Result<Vec<u32>, TemplateError> {
    let effort = effort(variables(input.extra).get("reasoning_effort"))?;
    let conversation = input.messages.as_array().map(Vec::as_slice).unwrap_or_default();
    let (instructions, conversation) = match conversation.split_first() {
        Some((first, rest)) if first["role"] == "system" || first["role"] == "developer" => {
            (Some(text(first, "content")), rest)
        }
        _ => (None, conversation),
    };
    let mut system = SystemContent::new().with_conversation_start_date(start_date);
    if let Some(effort) = effort {
        system = system.with_reasoning_effort(effort);
    }
    let mut messages = vec![Message::from_role_and_content(Role::System, system)];
    let tools = input.tools.and_then(Value::as_array).filter(|t| !t.is_empty());
    if instructions.is_some_and(|i| !i.is_empty()) || tools.is_some() {
        messages.push(developer_message(instructions, tools));
    }
    let names = call_names(conversation);
    for msg in conversation {
        messages.extend(harmony_messages(msg, &names)?);
    }
    let messages = drop_answered_analysis(messages);
    let rendered = if input.continue_final_message && messages.last().is_some_and(|m| m.author.role == Role::Assistant)
    {
        encoding.render_conversation(&Conversation::from_messages(messages), None).map(|mut ids| {
            // The final message's `<|end|>`: without it the model continues the message.
            ids.pop();
            ids
        })
    } else {
        // No render config: the crate's own analysis dropping stays off (done above, vLLM's way).
        encoding.render_conversation_for_completion(&Conversation::from_messages(messages), Role::Assistant, None)
    };
    rendered.map_err(|e| TemplateError::Render(format!("{e:#}")))
}

/// `low`, `medium`, `high`; unset keeps Harmony's default.
fn effort(value: Option<&Value>) -> Result<Option<ReasoningEffort>, TemplateError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s == "low" => Ok(Some(ReasoningEffort::Low)),
        Some(Value::String(s)) if s == "medium" => Ok(Some(ReasoningEffort::Medium)),
        Some(Value::String(s)) if s == "high" => Ok(Some(ReasoningEffort::High)),
        Some(_) => {
            Err(TemplateError::Prompt(PromptError::Effort { renderer: "Harmony", accepted: "low, medium or high" }))
        }
    }
}

fn developer_message(instructions: Option<&str>, tools: Option<&Vec<Value>>) -> Message {
    let mut content = DeveloperContent::new();
    if let Some(instructions) = instructions {
        content = content.with_instructions(instructions);
    }
    if let Some(tools) = tools {
        let functions = tools
            .iter()
            .map(|tool| {
                let f = &tool["function"];
                let parameters = f.get("parameters").filter(|p| !p.is_null()).cloned();
                ToolDescription::new(text(f, "name"), text(f, "description"), parameters)
            })
            .collect();
        content = content.with_function_tools(functions);
    }
    Message::from_role_and_content(Role::Developer, content)
}

/// Every call id in the conversation and the function it calls (a tool result names it).
fn call_names(conversation: &[Value]) -> HashMap<String, String> {
    conversation
        .iter()
        .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
        .flatten()
        .filter_map(|call| Some((call.get("id")?.as_str()?.to_string(), text(&call["function"], "name").to_string())))
        .collect()
}

fn harmony_messages(msg: &Value, names: &HashMap<String, String>) -> Result<Vec<Message>, TemplateError> {
    let content = text(msg, "content");
    let assistant =
        |body: &str, channel: &str| Message::from_role_and_content(Role::Assistant, body).with_channel(channel);
    let reasoning = text(msg, "reasoning");
    let mut out = Vec::new();
    match msg["role"].as_str().unwrap_or("") {
        "assistant" => match msg.get("tool_calls").and_then(Value::as_array).filter(|c| !c.is_empty()) {
            Some(calls) => {
                if !content.is_empty() {
                    out.push(assistant(content, "commentary"));
                }
                if !reasoning.is_empty() {
                    out.push(assistant(reasoning, "analysis"));
                }
                for call in calls {
                    let function = &call["function"];
                    out.push(
                        assistant(&arguments(function.get("arguments")), "commentary")
                            .with_recipient(format!("functions.{}", text(function, "name")))
                            .with_content_type("json"),
                    );
                }
            }
            None => {
                if !reasoning.is_empty() {
                    out.push(assistant(reasoning, "analysis"));
                }
                if !content.is_empty() {
                    out.push(assistant(content, "final"));
                }
            }
        },
        "tool" => {
            let name = msg.get("tool_call_id").and_then(Value::as_str).and_then(|id| names.get(id));
            let author = Author::new(Role::Tool, format!("functions.{}", name.map_or("", String::as_str)));
            let result = Message::from_author_and_content(author, content).with_channel("commentary");
            out.push(result.with_recipient("assistant"));
        }
        "system" | "developer" => out
            .push(Message::from_role_and_content(Role::Developer, DeveloperContent::new().with_instructions(content))),
        "user" => out.push(Message::from_role_and_content(Role::User, content)),
        other => return Err(TemplateError::Prompt(PromptError::Role(other.to_string()))),
    }
    Ok(out)
}

/// A call's arguments as the client wrote them (an object, from an API that gives objects,
/// as compact JSON).
fn arguments(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// vLLM's `auto_drop_analysis_messages`: the analysis messages before the last `final`
/// assistant message go.
fn drop_answered_analysis(messages: Vec<Message>) -> Vec<Message> {
    let last_final =
        messages.iter().rposition(|m| m.author.role == Role::Assistant && m.channel.as_deref() == Some("final"));
    let Some(last_final) = last_final else { return messages };
    messages
        .into_iter()
        .enumerate()
        .filter(|(i, m)| *i >= last_final || m.channel.as_deref() != Some("analysis"))
        .map(|(_, m)| m)
        .collect()
}
