//! DeepSeek-V4: a port of the checkpoint's `encoding/encoding_dsv4.py` (vLLM's copy:
//! `vllm/tokenizers/deepseek_v4_encoding.py`; the shared encoder is `dsv4.rs`), for both effort
//! revisions (`detect::V4Revision`).
//!
//! Rules:
//! - Thinking: `thinking` (or `enable_thinking`), off by default; a native effort value (below)
//!   in the variables turns it on when the switch is unset. SMG's DeepSeek profile (flash/pro
//!   model names) turns it on unless the request turns it off.
//! - Effort (`reasoning_effort`, read only with thinking on): the original checkpoints know
//!   `high` (no text, the default) and `max` (the "Absolute maximum" prompt); the 0731 refresh
//!   knows `low` (no text, the default), `high` (that same prompt) and `max` (the "Beyond
//!   maximum" prompt). Any other value is the default. The prompt leads the first message.
//! - Tools: the request's tools are declared in the first system message wherever it is, or
//!   in an empty system message put first.
//! - `drop_thinking` (a variable, default true): earlier reasoning is dropped (`dsv4.rs`).
//! - `continue_final_message`: the final assistant message is written without its end of
//!   sentence, so the model continues it.
//! - Roles: system, developer (a user turn), user, assistant, tool (merged into user turns);
//!   any other role and an empty developer message are refused. Text content parts are
//!   joined by a blank line (vLLM hands this encoder the parts).
//! - `add_generation_prompt` has no effect: the encoder always hands the last user turn over
//!   to the assistant.

use serde_json::{Map, Value};

use super::detect::V4Revision;
use super::dsv4::{self, Dialect, Encoding};
use super::thinking::{ThinkingKey, Toggle};
use super::{dsml, variables};
use crate::error::TemplateError;
use crate::template::RenderInput;

pub const TOGGLE: Toggle =
    Toggle { key: ThinkingKey::Thinking, alias: Some(ThinkingKey::EnableThinking), default_on: false };

const DIALECT: Dialect = Dialect {
    tags: dsml::Tags { block: "tool_calls", invoke: "invoke", parameter: "parameter" },
    reasoning_key: "reasoning",
    system_turns: false,
};

const ABSOLUTE_MAXIMUM: &str = "Reasoning Effort: Absolute maximum with no shortcuts permitted.\nYou MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\nExplicitly write out your entire deliberation process, documenting every intermediate step, considered alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";
const BEYOND_MAXIMUM: &str = "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\nYou MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: exhaustively decompose the problem into its most fundamental components, trace every causal chain to its root, and resolve the underlying cause rather than any surface symptom.\nDo not stop reasoning until you have independently verified the solution from multiple angles and are certain that no assumption remains unchecked and no error remains undiscovered.\n\n";

/// A revision's native effort values and their prompts (the default's is empty).
fn efforts(revision: V4Revision) -> &'static [(&'static str, &'static str)] {
    match revision {
        V4Revision::Original => &[("high", ""), ("max", ABSOLUTE_MAXIMUM)],
        V4Revision::R0731 => &[("low", ""), ("high", ABSOLUTE_MAXIMUM), ("max", BEYOND_MAXIMUM)],
    }
}

/// The prompt of the variables' effort, when it is native to the revision.
fn native_effort(revision: V4Revision, variables: &Map<String, Value>) -> Option<&'static str> {
    let effort = variables.get("reasoning_effort").and_then(Value::as_str)?;
    efforts(revision).iter().find(|(name, _)| *name == effort).map(|(_, prompt)| *prompt)
}

pub fn thinking_on(revision: V4Revision, variables: &Map<String, Value>) -> bool {
    TOGGLE.setting(variables).unwrap_or_else(|| native_effort(revision, variables).is_some())
}

pub fn render(revision: V4Revision, input: &RenderInput<'_>) -> Result<String, TemplateError> {
    let variables = variables(input.extra);
    let thinking = thinking_on(revision, &variables);
    let effort_prefix = native_effort(revision, &variables).unwrap_or("");
    let drop_thinking = variables.get("drop_thinking").and_then(Value::as_bool).unwrap_or(true);
    let messages = prepare(input);
    dsv4::encode(&DIALECT, messages, &Encoding { thinking, drop_thinking, effort_prefix })
}

/// The messages with the request's tools in the first system message and the continued
/// turn marked (V4 and V4.1 alike).
pub fn prepare(input: &RenderInput<'_>) -> Vec<Value> {
    let mut messages = input.messages.as_array().cloned().unwrap_or_default();
    if let Some(tools) = input.tools.and_then(Value::as_array).filter(|t| !t.is_empty()) {
        let at = messages.iter().position(|m| m["role"] == "system").unwrap_or_else(|| {
            messages.insert(0, serde_json::json!({"role": "system", "content": ""}));
            0
        });
        messages[at]["tools"] = Value::Array(tools.clone());
    }
    if input.continue_final_message {
        if let Some(last) = messages.last_mut().filter(|m| m["role"] == "assistant") {
            last["wo_eos"] = Value::Bool(true);
        }
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_native_effort_turns_thinking_on_unless_the_switch_says_otherwise() {
        let cases = [
            (V4Revision::Original, json!({}), false),
            (V4Revision::Original, json!({"reasoning_effort": "max"}), true),
            (V4Revision::Original, json!({"reasoning_effort": "low"}), false),
            (V4Revision::R0731, json!({"reasoning_effort": "low"}), true),
            (V4Revision::R0731, json!({"reasoning_effort": "max", "thinking": false}), false),
            (V4Revision::R0731, json!({"enable_thinking": true}), true),
        ];
        for (revision, variables, on) in cases {
            assert_eq!(thinking_on(revision, variables.as_object().unwrap()), on, "{revision:?} {variables}");
        }
    }
}
