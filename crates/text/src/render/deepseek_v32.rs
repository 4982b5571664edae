//! DeepSeek-V3.2: a port of the checkpoint's `encoding/encoding_dsv32.py` (the copy vLLM
//! ships as `vllm/tokenizers/deepseek_v32_encoding.py`), with the serving rules around it.
//!
//! Rules:
//! - Thinking: `thinking` (or `enable_thinking`), off by default. On: the last user turn is
//!   followed by `<think>`, every other turn (and a tool-result block before the last user
//!   turn) by `</think>`.
//! - Tools: the request's tools are attached to the leading system or developer message, or
//!   to an empty system message put first when the conversation starts otherwise; they are
//!   written as one JSON schema per line under `## Tools`.
//! - Earlier reasoning is dropped (assistant turns before the last user turn lose it) when
//!   thinking is on and the conversation ends with a user turn, as vLLM's wrapper asks. The
//!   encoder also drops developer messages before that turn and then fails on the shorter
//!   list, so such a conversation is refused, as vLLM refuses it.
//! - `continue_final_message`: the final assistant message is written without its end of
//!   sentence (the encoder's `prefix`), so the model continues it; without tool calls only
//!   its content is written.
//! - Roles: system, developer (a user turn that quotes it), user, assistant, tool (results
//!   gathered in one `<function_results>` block per assistant turn). Any other role, an empty
//!   developer message, a tool result without a call, and (thinking on) an assistant turn
//!   after the last user turn with neither reasoning nor tool calls are refused, as the
//!   encoder refuses them.
//! - `add_generation_prompt` has no effect: the encoder always ends a user turn with the
//!   assistant's header.

use serde_json::Value;

use super::thinking::{ThinkingKey, Toggle};
use super::{dsml, text, truthy, variables};
use crate::error::{PromptError, TemplateError};
use crate::template::RenderInput;

pub const TOGGLE: Toggle =
    Toggle { key: ThinkingKey::Thinking, alias: Some(ThinkingKey::EnableThinking), default_on: false };
pub const ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];

const BOS: &str = "<｜begin▁of▁sentence｜>";
const EOS: &str = "<｜end▁of▁sentence｜>";
const USER: &str = "<｜User｜>";
const ASSISTANT: &str = "<｜Assistant｜>";
const THINK_START: &str = "<think>";
const THINK_END: &str = "</think>";

const TOOLS_HEAD: &str = "## Tools
You have access to a set of tools you can use to answer the user's question.
You can invoke functions by writing a \"<｜DSML｜function_calls>\" block like the following as part of your reply to the user:
<｜DSML｜function_calls>
<｜DSML｜invoke name=\"$FUNCTION_NAME\">
<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>
...
</｜DSML｜invoke>
<｜DSML｜invoke name=\"$FUNCTION_NAME2\">
...
</｜DSML｜invoke>
</｜DSML｜function_calls>
String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects should use JSON format. The \"string\" attribute should be set to \"true\" for string type parameters and \"false\" for other types (numbers, booleans, arrays, objects).
If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking block. Here is an example:
<｜DSML｜function_calls>
...
</｜DSML｜function_calls>
<function_results>
...
</function_results>
<think>...thinking about results</think>
Here are the functions available in JSONSchema format:
<functions>
";
const TOOLS_TAIL: &str = "\n</functions>\n";

pub fn render(input: &RenderInput<'_>) -> Result<String, TemplateError> {
    let thinking = TOGGLE.is_on(&variables(input.extra));
    let mut messages = input.messages.as_array().cloned().unwrap_or_default();
    if let Some(tools) = input.tools.filter(|t| truthy(Some(t))) {
        attach_tools(&mut messages, tools);
    }
    if input.continue_final_message {
        if let Some(last) = messages.last_mut().filter(|m| m["role"] == "assistant") {
            last["prefix"] = Value::Bool(true);
        }
    }
    let drop = thinking && messages.last().is_some_and(|m| m["role"] == "user");
    if drop {
        messages = drop_earlier_reasoning(messages)?;
    }
    let last_user = last_user_index(&messages);
    let mut prompt = String::from(BOS);
    for index in 0..messages.len() {
        render_message(&mut prompt, index, &messages, thinking, last_user)?;
    }
    Ok(prompt)
}

/// Onto the leading system or developer message, or a new empty system message first.
fn attach_tools(messages: &mut Vec<Value>, tools: &Value) {
    let leads = messages.first().is_some_and(|m| m["role"] == "system" || m["role"] == "developer");
    if !leads {
        messages.insert(0, serde_json::json!({"role": "system"}));
    }
    messages[0]["tools"] = tools.clone();
}

/// The last user or developer turn (`None` where the encoder has -1).
fn last_user_index(messages: &[Value]) -> Option<usize> {
    messages.iter().rposition(|m| m["role"] == "user" || m["role"] == "developer")
}

/// `drop_thinking_messages`: before the last user turn, assistant turns lose their reasoning.
/// Any other message there (a developer message) would be dropped, which the encoder cannot
/// render past.
fn drop_earlier_reasoning(mut messages: Vec<Value>) -> Result<Vec<Value>, TemplateError> {
    let last_user = last_user_index(&messages);
    for (index, m) in messages.iter_mut().enumerate() {
        let role = m["role"].as_str().unwrap_or("").to_string();
        if matches!(role.as_str(), "user" | "system" | "tool") || last_user.is_none_or(|u| index >= u) {
            continue;
        }
        match m.as_object_mut() {
            Some(o) if role == "assistant" => {
                o.remove("reasoning");
            }
            _ => return Err(TemplateError::Prompt(PromptError::DroppedBeforeLastUser { index })),
        }
    }
    Ok(messages)
}

/// `<think>` after the last user turn in thinking mode, `</think>` after any other.
fn think_mark(prompt: &mut String, at_last_user: bool, thinking: bool) {
    prompt.push_str(if at_last_user && thinking { THINK_START } else { THINK_END });
}

fn render_message(
    prompt: &mut String,
    index: usize,
    messages: &[Value],
    thinking: bool,
    last_user: Option<usize>,
) -> Result<(), TemplateError> {
    let msg = &messages[index];
    let role = msg["role"].as_str().unwrap_or("");
    let content = text(msg, "content");
    match role {
        "system" => {
            prompt.push_str(content);
            push_tools(prompt, msg)?;
        }
        "developer" => {
            if content.is_empty() {
                return Err(TemplateError::Prompt(PromptError::EmptyDeveloper { index }));
            }
            prompt.push_str(USER);
            push_tools(prompt, msg)?;
            prompt.push_str("\n\n# The user's message is: ");
            prompt.push_str(content);
            prompt.push_str(ASSISTANT);
            think_mark(prompt, last_user == Some(index), thinking);
        }
        "user" => {
            prompt.push_str(USER);
            prompt.push_str(content);
            prompt.push_str(ASSISTANT);
            think_mark(prompt, last_user == Some(index), thinking);
        }
        "tool" => render_tool_result(prompt, index, messages, thinking, last_user)?,
        "assistant" => render_assistant(prompt, index, msg, thinking, last_user)?,
        other => return Err(TemplateError::Prompt(PromptError::Role(other.to_string()))),
    }
    Ok(())
}

/// `\n\n## Tools ...` when the message carries tools.
fn push_tools(prompt: &mut String, msg: &Value) -> Result<(), TemplateError> {
    let Some(tools) = msg.get("tools").and_then(Value::as_array).filter(|t| !t.is_empty()) else { return Ok(()) };
    prompt.push_str("\n\n");
    prompt.push_str(TOOLS_HEAD);
    prompt.push_str(&dsml::tool_schemas(tools)?);
    prompt.push_str(TOOLS_TAIL);
    Ok(())
}

/// One result of the calls of the assistant turn before it: the first opens
/// `<function_results>`, the one answering the last call closes it.
fn render_tool_result(
    prompt: &mut String,
    index: usize,
    messages: &[Value],
    thinking: bool,
    last_user: Option<usize>,
) -> Result<(), TemplateError> {
    let refused = || TemplateError::Prompt(PromptError::ToolResultWithoutCall { index });
    let assistant = messages[..index].iter().rposition(|m| m["role"] != "tool").ok_or_else(refused)?;
    let calls = messages[assistant]
        .get("tool_calls")
        .and_then(Value::as_array)
        .filter(|_| messages[assistant]["role"] == "assistant")
        .map_or(0, Vec::len);
    let order = index - assistant;
    if calls < order {
        return Err(refused());
    }
    if order == 1 {
        prompt.push_str("\n\n<function_results>");
    }
    prompt.push_str("\n<result>");
    prompt.push_str(text(&messages[index], "content"));
    prompt.push_str("</result>");
    if order == calls {
        prompt.push_str("\n</function_results>\n\n");
        think_mark(prompt, last_user.is_none_or(|u| index >= u), thinking);
    }
    Ok(())
}

fn render_assistant(
    prompt: &mut String,
    index: usize,
    msg: &Value,
    thinking: bool,
    last_user: Option<usize>,
) -> Result<(), TemplateError> {
    let calls = msg.get("tool_calls").and_then(Value::as_array).filter(|c| !c.is_empty());
    let content = text(msg, "content");
    let thought = thinking && last_user.is_none_or(|u| index > u);
    if thought && !truthy(msg.get("reasoning")) && calls.is_none() {
        return Err(TemplateError::Prompt(PromptError::AssistantWithoutReasoning { index }));
    }
    // A continued turn is only its content: the encoder writes no thought and no end for it.
    if calls.is_none() && msg.get("prefix").and_then(Value::as_bool) == Some(true) {
        prompt.push_str(content);
        return Ok(());
    }
    if thought {
        prompt.push_str(text(msg, "reasoning"));
        prompt.push_str(THINK_END);
    }
    prompt.push_str(content);
    if let Some(calls) = calls {
        dsml::push_calls(prompt, &dsml::V32, calls)?;
    }
    prompt.push_str(EOS);
    Ok(())
}
