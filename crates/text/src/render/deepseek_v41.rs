//! DeepSeek-V4.1: a port of vLLM's `vllm/tokenizers/deepseek_v41_encoding.py` (itself from the
//! checkpoint's `encoding/encoding.py`) and of the serving rules of `deepseek_v41.py`; the
//! encoder it shares with V4 is `dsv4.rs`.
//!
//! Rules:
//! - Thinking: `thinking`, or vLLM's `enable_thinking` alias, on by default; a
//!   `reasoning_effort` of `none` turns it off.
//! - Effort (`reasoning_effort`): `low` (50), `high` (75, the default), `xhigh` (75), `max`
//!   (100), or an integer budget from 1 to 100, written with thinking on as `<｜System｜>Reasoning
//!   Effort: N (range 1-100, ...)` before the first message. Any other value is refused, as
//!   the reference refuses it.
//! - DSML tags carry a leading space (` calls`, ` invoke`, ` parameter`); reasoning is read
//!   from `reasoning_content`; tool-call arguments are read as written (a JSON string, even a
//!   double-encoded one, or an object; anything else becomes one `arguments` parameter).
//! - System messages: a leading one is marked `<｜System｜>`; a later one is a turn of its own,
//!   counts as the last user turn and hands over to the assistant.
//! - Tools, `drop_thinking`, `continue_final_message` (the final assistant message without its
//!   end of sentence, continued natively), roles, text parts joined by a blank line, and
//!   `add_generation_prompt` as for DeepSeek-V4.

use serde_json::{Map, Value};

use super::dsv4::{self, Dialect, Encoding};
use super::thinking::{ThinkingKey, Toggle};
use super::{deepseek_v4, dsml, variables};
use crate::error::{PromptError, TemplateError};
use crate::template::RenderInput;

pub const TOGGLE: Toggle =
    Toggle { key: ThinkingKey::Thinking, alias: Some(ThinkingKey::EnableThinking), default_on: true };

const DIALECT: Dialect = Dialect {
    tags: dsml::Tags { block: " calls", invoke: " invoke", parameter: " parameter" },
    reasoning_key: "reasoning_content",
    system_turns: true,
};

/// The named efforts and their budgets (`REASONING_EFFORT_MAPPINGS`).
const EFFORTS: [(&str, u64); 4] = [("low", 50), ("high", 75), ("xhigh", 75), ("max", 100)];
const DEFAULT_BUDGET: u64 = 75;
const BUDGET_MAX: u64 = 100;

pub fn thinking_on(variables: &Map<String, Value>) -> bool {
    variables.get("reasoning_effort").and_then(Value::as_str) != Some("none") && TOGGLE.is_on(variables)
}

/// The effort's budget: a name, an integer from 1 to 100, or (unset, or `none`) the default.
fn budget(variables: &Map<String, Value>) -> Result<u64, TemplateError> {
    let refused = || TemplateError::Prompt(PromptError::Effort { renderer: "DeepSeek V4.1", accepted: ACCEPTED });
    match variables.get("reasoning_effort") {
        None | Some(Value::Null) => Ok(DEFAULT_BUDGET),
        Some(Value::String(s)) if s == "none" => Ok(DEFAULT_BUDGET),
        Some(Value::String(s)) => EFFORTS.iter().find(|(name, _)| name == s).map(|(_, b)| *b).ok_or_else(refused),
        // Python's `type(effort) is int`: no floats, no booleans.
        Some(Value::Number(n)) => n.as_u64().filter(|b| (1..=BUDGET_MAX).contains(b)).ok_or_else(refused),
        Some(_) => Err(refused()),
    }
}

const ACCEPTED: &str = "low, high, xhigh, max, or an integer within [1, 100]";

pub fn render(input: &RenderInput<'_>) -> Result<String, TemplateError> {
    let variables = variables(input.extra);
    let effort_prefix = format!(
        "Reasoning Effort: {} (range 1-100, the higher the value, the more thorough the reasoning)\n\n",
        budget(&variables)?
    );
    let encoding = Encoding {
        thinking: thinking_on(&variables),
        drop_thinking: variables.get("drop_thinking").and_then(Value::as_bool).unwrap_or(true),
        effort_prefix: &effort_prefix,
    };
    dsv4::encode(&DIALECT, deepseek_v4::prepare(input), &encoding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn efforts() {
        let cases = [
            (json!({}), Some(75)),
            (json!({"reasoning_effort": "low"}), Some(50)),
            (json!({"reasoning_effort": "max"}), Some(100)),
            (json!({"reasoning_effort": 7}), Some(7)),
            (json!({"reasoning_effort": "none"}), Some(75)),
            (json!({"reasoning_effort": "medium"}), None),
            (json!({"reasoning_effort": 0}), None),
            (json!({"reasoning_effort": 101}), None),
            (json!({"reasoning_effort": 1.5}), None),
            (json!({"reasoning_effort": true}), None),
        ];
        for (variables, want) in cases {
            assert_eq!(budget(variables.as_object().unwrap()).ok(), want, "{variables}");
        }
        assert!(!thinking_on(json!({"reasoning_effort": "none"}).as_object().unwrap()));
        assert!(thinking_on(&Map::new()));
    }
}
