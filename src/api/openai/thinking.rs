//! The chat request's reasoning controls → chat template variables (SMG's "Thinking and
//! Reasoning Effort").
//!
//! `thinking.type` (`enabled`/`disabled`) sets the preference; without it a `reasoning_effort`
//! of `none` or `minimal` means off and any other effort means on. The effort itself
//! (`thinking.effort` first) and `tool_choice` / `response_format` reach the template as
//! variables of those names. `pipeline::thinking` writes the preference under the key the
//! template reads. A variable the client set in `chat_template_kwargs` wins.

use serde_json::{Map, Value};

use crate::api::fields::Fields;
use crate::error::ApiError;
use crate::pipeline::thinking;

/// The request's thinking preference: `Some(true/false)` or no opinion.
fn preference(f: &Fields<'_>) -> Result<Option<bool>, ApiError> {
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
    Ok(effort(f)?.as_deref().map(effort_thinks))
}

/// Whether an effort means thinking: `none` and `minimal` mean off, any other effort on.
pub fn effort_thinks(effort: &str) -> bool {
    !matches!(effort, "none" | "minimal")
}

/// `thinking.effort` takes precedence over `reasoning_effort`.
fn effort(f: &Fields<'_>) -> Result<Option<String>, ApiError> {
    if let Some(e) = f.object("thinking")?.and_then(|t| t.get("effort")).and_then(Value::as_str) {
        return Ok(Some(e.to_string()));
    }
    Ok(f.str("reasoning_effort")?.map(str::to_string))
}

/// The template variables: the client's `chat_template_kwargs` and what the reasoning controls
/// imply; and whether thinking is on.
pub fn template_variables(f: &Fields<'_>, template_source: &str) -> Result<(Map<String, Value>, bool), ApiError> {
    let passthrough = ["tool_choice", "response_format"].map(|name| (name, f.get(name)));
    variables(f.object("chat_template_kwargs")?, effort(f)?, &passthrough, template_source, || preference(f))
}

/// The template variables of any API's reasoning controls, however it spells them: the
/// client's own `kwargs` (which win), the `effort`, request values passed through under their
/// names, and the thinking preference under the key the template reads. `preference` is asked
/// only when the template has such a key (elsewhere a bad value changes nothing). Returns the
/// variables and whether thinking is on.
pub fn variables(
    kwargs: Option<&Map<String, Value>>,
    effort: Option<String>,
    passthrough: &[(&str, Option<&Value>)],
    template_source: &str,
    preference: impl FnOnce() -> Result<Option<bool>, ApiError>,
) -> Result<(Map<String, Value>, bool), ApiError> {
    let mut variables = kwargs.cloned().unwrap_or_default();
    if let Some(e) = effort {
        variables.entry("reasoning_effort").or_insert(Value::String(e));
    }
    for (name, value) in passthrough {
        if let Some(v) = value {
            variables.entry(*name).or_insert((*v).clone());
        }
    }
    let Some(key) = thinking::template_key(template_source) else { return Ok((variables, false)) };
    let on = thinking::apply(key, preference()?, &mut variables);
    Ok((variables, on))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(body: Value, template: &str) -> (bool, Map<String, Value>) {
        let (variables, on) = template_variables(&Fields::new(&body), template).unwrap();
        (on, variables)
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
    fn a_bad_thinking_type_is_refused_only_where_the_template_has_a_toggle() {
        let body = json!({"thinking": {"type": "sometimes"}});
        let e = template_variables(&Fields::new(&body), "{{ enable_thinking }}").unwrap_err();
        assert_eq!(e.param.as_deref(), Some("thinking.type"));
        assert!(template_variables(&Fields::new(&body), "{{ messages }}").is_ok());
    }
}
