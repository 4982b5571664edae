//! Reasoning controls → chat template variables (SMG's "Thinking and Reasoning Effort").
//!
//! `thinking.type` (`enabled`/`disabled`) sets the preference; without it a `reasoning_effort`
//! of `none` or `minimal` means off and any other effort means on. The preference is written
//! under the key the template actually reads: `enable_thinking` (Qwen3, GLM, Nemotron),
//! `thinking` (DeepSeek, Kimi) or `thinking_mode` = `"enabled"`/`"disabled"` (MiniMax-M3). A
//! value the client passed for that key in `chat_template_kwargs` wins. The reasoning parser
//! follows the same decision: thinking on starts it in reasoning mode.

use serde_json::{Map, Value};

use crate::api::fields::Fields;
use crate::error::ApiError;

/// The variable a template reads to switch thinking on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThinkingKey {
    EnableThinking,
    Thinking,
    ThinkingMode,
}

impl ThinkingKey {
    pub fn name(self) -> &'static str {
        match self {
            ThinkingKey::EnableThinking => "enable_thinking",
            ThinkingKey::Thinking => "thinking",
            ThinkingKey::ThinkingMode => "thinking_mode",
        }
    }

    fn value(self, on: bool) -> Value {
        match self {
            ThinkingKey::ThinkingMode => Value::String(if on { "enabled" } else { "disabled" }.into()),
            _ => Value::Bool(on),
        }
    }

    fn is_on(self, v: &Value) -> bool {
        match (self, v) {
            (ThinkingKey::ThinkingMode, Value::String(s)) => s == "enabled",
            (_, Value::Bool(b)) => *b,
            (_, Value::String(s)) => s == "enabled" || s == "true",
            _ => false,
        }
    }
}

/// Which thinking key a template reads, if any (most specific first).
pub fn template_key(source: &str) -> Option<ThinkingKey> {
    if source.contains("enable_thinking") {
        Some(ThinkingKey::EnableThinking)
    } else if source.contains("thinking_mode") {
        Some(ThinkingKey::ThinkingMode)
    } else if has_word(source, "thinking") {
        Some(ThinkingKey::Thinking)
    } else {
        None
    }
}

/// `thinking` as a variable name, not inside `enable_thinking` or `thinking_budget`.
fn has_word(source: &str, word: &str) -> bool {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    source.match_indices(word).any(|(i, _)| {
        let before = source[..i].chars().next_back();
        let after = source[i + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// The request's thinking preference: `Some(true/false)` or no opinion.
pub fn preference(f: &Fields<'_>) -> Result<Option<bool>, ApiError> {
    if let Some(t) = f.object("thinking")? {
        match t.get("type").and_then(Value::as_str) {
            Some("enabled") => return Ok(Some(true)),
            Some("disabled") => return Ok(Some(false)),
            Some(other) => {
                return Err(ApiError::invalid_param(
                    "thinking.type",
                    format!("'thinking.type' must be 'enabled' or 'disabled', got '{other}'"),
                ))
            }
            None => {}
        }
    }
    Ok(effort(f)?.map(|e| !matches!(e.as_str(), "none" | "minimal")))
}

/// `thinking.effort` takes precedence over `reasoning_effort`.
pub fn effort(f: &Fields<'_>) -> Result<Option<String>, ApiError> {
    if let Some(e) = f.object("thinking")?.and_then(|t| t.get("effort")).and_then(Value::as_str) {
        return Ok(Some(e.to_string()));
    }
    Ok(f.str("reasoning_effort")?.map(str::to_string))
}

/// Adds the template variables the reasoning controls imply to `kwargs` (the client's
/// `chat_template_kwargs`, which win), and returns whether thinking is on.
pub fn apply(f: &Fields<'_>, template_source: &str, kwargs: &mut Map<String, Value>) -> Result<bool, ApiError> {
    if let Some(e) = effort(f)? {
        kwargs.entry("reasoning_effort").or_insert(Value::String(e));
    }
    for passthrough in ["tool_choice", "response_format"] {
        if let Some(v) = f.get(passthrough) {
            kwargs.entry(passthrough).or_insert(v.clone());
        }
    }
    let Some(key) = template_key(template_source) else { return Ok(false) };
    if let Some(on) = preference(f)? {
        kwargs.entry(key.name()).or_insert(key.value(on));
    }
    Ok(kwargs.get(key.name()).is_some_and(|v| key.is_on(v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(body: Value, template: &str) -> (bool, Map<String, Value>) {
        let f = Fields::new(&body);
        let mut kwargs = f.object("chat_template_kwargs").unwrap().cloned().unwrap_or_default();
        let on = apply(&f, template, &mut kwargs).unwrap();
        (on, kwargs)
    }

    #[test]
    fn the_preference_lands_under_the_templates_key() {
        let qwen = "{% if enable_thinking is defined and enable_thinking is false %}";
        let deepseek = "{% if thinking %}<think>{% endif %}";
        let minimax = "{% if thinking_mode == 'enabled' %}";
        let cases = [
            (json!({"thinking": {"type": "enabled"}}), qwen, true, Some(("enable_thinking", json!(true)))),
            (json!({"reasoning_effort": "none"}), qwen, false, Some(("enable_thinking", json!(false)))),
            (json!({"reasoning_effort": "high"}), deepseek, true, Some(("thinking", json!(true)))),
            (json!({"thinking": {"type": "disabled"}}), minimax, false, Some(("thinking_mode", json!("disabled")))),
            // The client's own value for the key wins.
            (
                json!({"reasoning_effort": "high", "chat_template_kwargs": {"enable_thinking": false}}),
                qwen,
                false,
                Some(("enable_thinking", json!(false))),
            ),
            // No preference: nothing written, thinking not forced.
            (json!({}), qwen, false, None),
            // A template without a toggle.
            (json!({"thinking": {"type": "enabled"}}), "{{ messages }}", false, None),
        ];
        for (body, template, on, written) in cases {
            let (got_on, kwargs) = run(body.clone(), template);
            assert_eq!(got_on, on, "{body}");
            match written {
                Some((k, v)) => assert_eq!(kwargs.get(k), Some(&v), "{body}"),
                None => assert!(!kwargs.contains_key("enable_thinking") && !kwargs.contains_key("thinking")),
            }
        }
    }

    #[test]
    fn effort_and_tool_choice_are_passed_through() {
        let (_, kwargs) =
            run(json!({"thinking": {"effort": "low"}, "reasoning_effort": "high", "tool_choice": "auto"}), "");
        assert_eq!(kwargs["reasoning_effort"], "low");
        assert_eq!(kwargs["tool_choice"], "auto");
    }

    #[test]
    fn thinking_as_a_word() {
        assert!(has_word("{% if thinking %}", "thinking"));
        assert!(!has_word("{{ thinking_budget }}", "thinking"));
        assert_eq!(template_key("{{ thinking_budget }}"), None);
    }
}
