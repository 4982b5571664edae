//! The thinking switch a renderer reads, and the one decision "is thinking on" that both the
//! prompt and the reasoning parser follow.
//!
//! Jinja templates read the switch under different names: `enable_thinking` (Qwen3, GLM,
//! Nemotron), `thinking` (DeepSeek, Kimi) or `thinking_mode` = `"enabled"`/`"disabled"`
//! (MiniMax-M3); which one is found in the template's source, and such a template is on only
//! when the variable says so. A native renderer declares its key, the aliases it also reads
//! (DeepSeek-V4.1 reads vLLM's `enable_thinking`) and its default.

use serde_json::{Map, Value};

/// The variable a renderer reads to switch thinking on or off.
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

    /// How this key spells on and off.
    pub fn value(self, on: bool) -> Value {
        match self {
            ThinkingKey::ThinkingMode => Value::String(if on { "enabled" } else { "disabled" }.into()),
            _ => Value::Bool(on),
        }
    }

    /// Python truthiness for booleans, and the words templates compare strings with.
    fn is_on(self, v: &Value) -> bool {
        match (self, v) {
            (ThinkingKey::ThinkingMode, Value::String(s)) => s == "enabled",
            (_, Value::Bool(b)) => *b,
            (_, Value::String(s)) => s == "enabled" || s == "true",
            _ => false,
        }
    }
}

/// A renderer's thinking switch: the key a preference is written under, the keys read in
/// order, and what holds when none is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Toggle {
    pub key: ThinkingKey,
    /// Read after `key` when it is unset.
    pub alias: Option<ThinkingKey>,
    pub default_on: bool,
}

impl Toggle {
    pub const fn new(key: ThinkingKey, default_on: bool) -> Self {
        Toggle { key, alias: None, default_on }
    }

    /// The switch as `variables` set it (the key, then its alias), if they set it.
    pub fn setting(&self, variables: &Map<String, Value>) -> Option<bool> {
        let set = |k: ThinkingKey| variables.get(k.name()).filter(|v| !v.is_null()).map(|v| k.is_on(v));
        set(self.key).or_else(|| self.alias.and_then(set))
    }

    /// The setting, else the default.
    pub fn is_on(&self, variables: &Map<String, Value>) -> bool {
        self.setting(variables).unwrap_or(self.default_on)
    }

    /// Writes `preference` under the key unless the variables already set the switch (the
    /// client's own `chat_template_kwargs` win).
    pub fn write(&self, preference: Option<bool>, variables: &mut Map<String, Value>) {
        if let Some(on) = preference.filter(|_| self.setting(variables).is_none()) {
            variables.insert(self.key.name().into(), self.key.value(on));
        }
    }
}

/// Which switch a Jinja template reads, if any (most specific first). A template's switch is
/// on only when set: its own default lives in its text, where the parser cannot see it.
pub fn template_toggle(source: &str) -> Option<Toggle> {
    let key = if source.contains("enable_thinking") {
        ThinkingKey::EnableThinking
    } else if source.contains("thinking_mode") {
        ThinkingKey::ThinkingMode
    } else if has_word(source, "thinking") {
        ThinkingKey::Thinking
    } else {
        return None;
    };
    Some(Toggle::new(key, false))
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
            let toggle = template_toggle(template).expect("a toggle");
            let mut variables = given.as_object().cloned().unwrap_or_default();
            toggle.write(preference, &mut variables);
            assert_eq!(toggle.is_on(&variables), on, "{template} {preference:?}");
            match written {
                Some((k, v)) => assert_eq!(variables.get(k), Some(&v), "{template}"),
                None => assert!(variables.is_empty(), "{variables:?}"),
            }
        }
        assert_eq!(template_toggle("{{ messages }}"), None, "a template without a toggle");
    }

    #[test]
    fn native_toggles_read_their_alias_and_default() {
        let v41 = Toggle { key: ThinkingKey::Thinking, alias: Some(ThinkingKey::EnableThinking), default_on: true };
        let cases = [
            (json!({}), None, true),
            (json!({}), Some(false), false),
            (json!({"enable_thinking": false}), None, false),
            // The alias set by the client is the client's word: the preference does not override it.
            (json!({"enable_thinking": false}), Some(true), false),
            (json!({"thinking": true, "enable_thinking": false}), None, true),
            (json!({"thinking": null}), None, true),
        ];
        for (given, preference, on) in cases {
            let mut variables = given.as_object().cloned().unwrap_or_default();
            v41.write(preference, &mut variables);
            assert_eq!(v41.is_on(&variables), on, "{given} {preference:?}");
        }
    }

    #[test]
    fn thinking_as_a_word() {
        assert!(has_word("{% if thinking %}", "thinking"));
        assert!(!has_word("{{ thinking_budget }}", "thinking"));
        assert_eq!(template_toggle("{{ thinking_budget }}"), None);
    }
}
