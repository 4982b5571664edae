//! `thinking` → the chat template's thinking switch, and whether the reasoning parser starts
//! in reasoning.
//!
//! `{"type": "enabled", "budget_tokens": N}` (or Anthropic's newer `adaptive`) turns it on,
//! `{"type": "disabled"}` off; without `thinking` the renderer's own default holds (or SMG's
//! DeepSeek profile's, `render::profile`). The renderer's switch takes the choice under the
//! name it reads. The budget is
//! checked to be a positive integer below `max_tokens` (as Anthropic and vLLM refuse one that
//! is not) and not otherwise enforced: nothing in the engine can end a thinking block at a
//! token count, and vLLM's Anthropic endpoint ignores it too (Anthropic also asks for at least
//! 1,024; clients sized for Anthropic pass either way).

use serde_json::{Map, Value};

use crate::api::fields::Fields;
use crate::error::ApiError;
use shardgate_text::render::{profile, Renderer};

/// The template variables `thinking` implies, and whether thinking is on.
pub fn template_variables(
    f: &Fields<'_>,
    renderer: &Renderer,
    model_name: &str,
) -> Result<(Map<String, Value>, bool), ApiError> {
    let preference = preference(f)?.or_else(|| profile::default_preference(model_name));
    let mut variables = Map::new();
    let Some(toggle) = renderer.toggle() else { return Ok((variables, false)) };
    toggle.write(preference, &mut variables);
    let on = renderer.thinking_on(&variables);
    Ok((variables, on))
}

/// On, off, or no opinion.
fn preference(f: &Fields<'_>) -> Result<Option<bool>, ApiError> {
    let Some(t) = f.object("thinking")? else { return Ok(None) };
    match t.get("type") {
        Some(Value::String(kind)) => match kind.as_str() {
            "enabled" => {
                check_budget(t.get("budget_tokens"), f.get("max_tokens").and_then(Value::as_f64))?;
                Ok(Some(true))
            }
            "adaptive" => Ok(Some(true)),
            "disabled" => Ok(Some(false)),
            other => Err(ApiError::invalid_param(
                "thinking.type",
                format!(
                    "Input tag '{other}' does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'"
                ),
            )),
        },
        Some(_) => Err(ApiError::invalid_param("thinking.type", "Input should be a valid string")),
        None => Err(ApiError::invalid_param("thinking.type", "Field required")),
    }
}

/// A positive integer, below `max_tokens` when the request has one (`count_tokens` has none).
fn check_budget(budget: Option<&Value>, max_tokens: Option<f64>) -> Result<(), ApiError> {
    let below_max = match (budget.and_then(Value::as_f64), max_tokens) {
        (Some(b), Some(max)) => b < max,
        _ => true,
    };
    if !below_max {
        return Err(ApiError::invalid_param("thinking.budget_tokens", "must be less than max_tokens"));
    }
    let positive = match budget {
        None | Some(Value::Null) => true,
        Some(Value::Number(n)) => {
            n.as_i64().map_or_else(|| n.as_f64().is_some_and(|f| f.fract() == 0.0 && f >= 1.0), |i| i >= 1)
        }
        Some(_) => false,
    };
    if positive {
        Ok(())
    } else {
        Err(ApiError::invalid_param("thinking.budget_tokens", "must be a positive integer"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const QWEN: &str = "{% if enable_thinking is defined and enable_thinking is false %}{% endif %}";

    fn run(body: &Value, template: &str) -> Result<(Map<String, Value>, bool), ApiError> {
        template_variables(&Fields::new(body), &Renderer::jinja(template.to_string()).unwrap(), "m")
    }

    #[test]
    fn thinking_sets_the_templates_switch() {
        let cases = [
            (json!({"thinking": {"type": "enabled", "budget_tokens": 2048}}), QWEN, true, Some(json!(true))),
            (
                json!({"max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 2048}}),
                QWEN,
                true,
                Some(json!(true)),
            ),
            (json!({"thinking": {"type": "adaptive"}}), QWEN, true, Some(json!(true))),
            (json!({"thinking": {"type": "disabled"}}), QWEN, false, Some(json!(false))),
            (json!({}), QWEN, false, None),
            // A template without a switch: nothing to set, the parser starts in text.
            (json!({"thinking": {"type": "enabled", "budget_tokens": 2048}}), "{{ messages }}", false, None),
        ];
        for (body, template, on, written) in cases {
            let (variables, got) = run(&body, template).expect("valid");
            assert_eq!(got, on, "{body}");
            assert_eq!(variables.get("enable_thinking"), written.as_ref(), "{body}");
        }
    }

    #[test]
    fn bad_thinking_is_refused_naming_the_field() {
        let cases = [
            (json!({"thinking": "on"}), "thinking"),
            (json!({"thinking": {}}), "thinking.type"),
            (json!({"thinking": {"type": "sometimes"}}), "thinking.type"),
            (json!({"thinking": {"type": "enabled", "budget_tokens": 0}}), "thinking.budget_tokens"),
            (json!({"thinking": {"type": "enabled", "budget_tokens": 1.5}}), "thinking.budget_tokens"),
            (json!({"thinking": {"type": "enabled", "budget_tokens": "2048"}}), "thinking.budget_tokens"),
            (json!({"max_tokens": 24, "thinking": {"type": "enabled", "budget_tokens": 24}}), "thinking.budget_tokens"),
        ];
        for (body, param) in cases {
            // Refused whatever the template, as Anthropic refuses it.
            let e = run(&body, "{{ messages }}").expect_err(&body.to_string());
            assert_eq!((e.status, e.param.as_deref()), (400, Some(param)), "{body}");
        }
        let small = json!({"thinking": {"type": "enabled", "budget_tokens": 16}});
        assert!(run(&small, QWEN).is_ok(), "any positive budget is taken");
    }
}
