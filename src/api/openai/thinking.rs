//! The chat request's reasoning controls → chat template variables (SMG's "Thinking and
//! Reasoning Effort").
//!
//! `thinking.type` (`enabled`/`disabled`) sets the preference; without it a `reasoning_effort`
//! of `none` or `minimal` means off and any other effort means on. The effort itself
//! (`thinking.effort` first) and `tool_choice` / `response_format` reach the template as
//! variables of those names. The renderer's thinking switch (`render::thinking::Toggle`) takes
//! the preference under the key it reads; a request stating none gets SMG's DeepSeek profile's
//! (`render::profile`). A variable the client set in `chat_template_kwargs` wins.

use serde_json::{Map, Value};

use crate::api::fields::Fields;
use crate::error::ApiError;
use shardgate_text::render::{profile, Renderer};

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
pub fn template_variables(
    f: &Fields<'_>,
    renderer: &Renderer,
    model_name: &str,
) -> Result<(Map<String, Value>, bool), ApiError> {
    let passthrough = ["tool_choice", "response_format"].map(|name| (name, f.get(name)));
    let reasoning = Reasoning { effort: effort(f)?, renderer, model_name };
    variables(f.object("chat_template_kwargs")?, reasoning, &passthrough, || preference(f))
}

/// A request's reasoning effort and what decides how thinking is switched: the renderer (its
/// switch) and the model name (the DeepSeek profile).
pub struct Reasoning<'a> {
    pub effort: Option<String>,
    pub renderer: &'a Renderer,
    pub model_name: &'a str,
}

/// The template variables of any API's reasoning controls, however it spells them: the
/// client's own `kwargs` (which win), the `effort`, request values passed through under their
/// names, and the thinking preference under the key the renderer reads (the profile's when
/// the request states none). `preference` is asked only when the renderer has such a key
/// (elsewhere a bad value changes nothing). Returns the variables and whether thinking is on.
pub fn variables(
    kwargs: Option<&Map<String, Value>>,
    reasoning: Reasoning<'_>,
    passthrough: &[(&str, Option<&Value>)],
    preference: impl FnOnce() -> Result<Option<bool>, ApiError>,
) -> Result<(Map<String, Value>, bool), ApiError> {
    let Reasoning { effort, renderer, model_name } = reasoning;
    let mut variables = kwargs.cloned().unwrap_or_default();
    if let Some(e) = effort {
        variables.entry("reasoning_effort").or_insert(Value::String(e));
    }
    for (name, value) in passthrough {
        if let Some(v) = value {
            variables.entry(*name).or_insert((*v).clone());
        }
    }
    let Some(toggle) = renderer.toggle() else { return Ok((variables, false)) };
    toggle.write(preference()?.or_else(|| profile::default_preference(model_name)), &mut variables);
    let on = renderer.thinking_on(&variables);
    Ok((variables, on))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn jinja(template: &str) -> Renderer {
        Renderer::jinja(template.to_string()).unwrap()
    }

    fn run(body: Value, template: &str) -> (bool, Map<String, Value>) {
        let (variables, on) = template_variables(&Fields::new(&body), &jinja(template), "m").unwrap();
        (on, variables)
    }

    #[test]
    fn the_preference_lands_under_the_templates_key() {
        let qwen = "{% if enable_thinking is defined and enable_thinking is false %}{% endif %}";
        let deepseek = "{% if thinking %}<think>{% endif %}";
        let minimax = "{% if thinking_mode == 'enabled' %}{% endif %}";
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
        let e = template_variables(&Fields::new(&body), &jinja("{{ enable_thinking }}"), "m").unwrap_err();
        assert_eq!(e.param.as_deref(), Some("thinking.type"));
        assert!(template_variables(&Fields::new(&body), &jinja("{{ messages }}"), "m").is_ok());
    }

    /// A native renderer's switch and default, and the DeepSeek profile's default on top.
    #[test]
    fn native_defaults_and_the_deepseek_profile() {
        let v32 = Renderer::DeepseekV32;
        let cases = [
            (json!({}), "deepseek-v3.2", false, None),
            (json!({}), "deepseek-ai/DeepSeek-V4-Flash", true, Some(json!(true))),
            (json!({"reasoning_effort": "none"}), "deepseek-ai/DeepSeek-V4-Flash", false, Some(json!(false))),
            (json!({"chat_template_kwargs": {"enable_thinking": true}}), "deepseek-v3.2", true, None),
            (json!({"thinking": {"type": "enabled"}}), "deepseek-v3.2", true, Some(json!(true))),
        ];
        for (body, model, on, written) in cases {
            let (variables, got) = template_variables(&Fields::new(&body), &v32, model).unwrap();
            assert_eq!(got, on, "{body} {model}");
            assert_eq!(variables.get("thinking"), written.as_ref(), "{body} {model}");
        }
    }
}
