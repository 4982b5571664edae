//! The thinking switch of chat templates. Templates read it under different names:
//! `enable_thinking` (Qwen3, GLM, Nemotron), `thinking` (DeepSeek, Kimi) or `thinking_mode` =
//! `"enabled"`/`"disabled"` (MiniMax-M3). A request's preference (on, off, or none) is written
//! under the name the template actually reads, unless the request set that variable itself.
//! The reasoning parser follows the same decision: thinking on starts it in reasoning mode.

use serde_json::{Map, Value};

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

/// Writes `preference` under `key` in the template variables (a value already there, the
/// request's own, wins) and returns whether thinking is on.
pub fn apply(key: ThinkingKey, preference: Option<bool>, variables: &mut Map<String, Value>) -> bool {
    if let Some(on) = preference {
        variables.entry(key.name()).or_insert(key.value(on));
    }
    variables.get(key.name()).is_some_and(|v| key.is_on(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_preference_lands_under_the_templates_key() {
        let qwen = "{% if enable_thinking is defined and enable_thinking is false %}";
        let deepseek = "{% if thinking %}<think>{% endif %}";
        let minimax = "{% if thinking_mode == 'enabled' %}";
        let cases = [
            (qwen, Some(true), json!({}), true, Some(("enable_thinking", json!(true)))),
            (qwen, Some(false), json!({}), false, Some(("enable_thinking", json!(false)))),
            (deepseek, Some(true), json!({}), true, Some(("thinking", json!(true)))),
            (minimax, Some(false), json!({}), false, Some(("thinking_mode", json!("disabled")))),
            // The request's own value for the key wins.
            (qwen, Some(true), json!({"enable_thinking": false}), false, Some(("enable_thinking", json!(false)))),
            (minimax, None, json!({"thinking_mode": "enabled"}), true, Some(("thinking_mode", json!("enabled")))),
            // No preference: nothing written, thinking not forced.
            (qwen, None, json!({}), false, None),
        ];
        for (template, preference, given, on, written) in cases {
            let key = template_key(template).expect("a toggle");
            let mut variables = given.as_object().cloned().unwrap_or_default();
            assert_eq!(apply(key, preference, &mut variables), on, "{template} {preference:?}");
            match written {
                Some((k, v)) => assert_eq!(variables.get(k), Some(&v), "{template}"),
                None => assert!(variables.is_empty(), "{variables:?}"),
            }
        }
        assert_eq!(template_key("{{ messages }}"), None, "a template without a toggle");
    }

    #[test]
    fn thinking_as_a_word() {
        assert!(has_word("{% if thinking %}", "thinking"));
        assert!(!has_word("{{ thinking_budget }}", "thinking"));
        assert_eq!(template_key("{{ thinking_budget }}"), None);
    }
}
