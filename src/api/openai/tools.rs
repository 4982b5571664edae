//! The chat request's `tools` and `tool_choice`.

use serde_json::Value;

use crate::api::chat_prompt::ToolChoice;
use crate::api::fields::Fields;
use crate::error::ApiError;
use shardgate_parsers::tool::ToolSpec;

/// The request's function tools, validated.
pub fn parse_tools(f: &Fields<'_>) -> Result<Vec<ToolSpec>, ApiError> {
    let Some(list) = f.array("tools")? else { return Ok(Vec::new()) };
    let mut out = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let param = format!("tools.[{i}]");
        let kind = t.get("type").and_then(Value::as_str).unwrap_or("function");
        if kind != "function" {
            return Err(ApiError::invalid_param(
                &param,
                format!("tools of type '{kind}' are not supported; use 'function'"),
            ));
        }
        let function = t
            .get("function")
            .and_then(Value::as_object)
            .ok_or_else(|| ApiError::invalid_param(&param, "a tool needs a 'function' object"))?;
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ApiError::invalid_param(&param, "a tool function needs a non-empty 'name'"))?;
        let parameters = function.get("parameters").filter(|p| !p.is_null()).cloned();
        if parameters.as_ref().is_some_and(|p| !p.is_object()) {
            return Err(ApiError::invalid_param(&param, "'parameters' must be a JSON Schema object"));
        }
        out.push(ToolSpec { name: name.to_string(), parameters });
    }
    Ok(out)
}

/// `tool_choice`; the default is `auto` with tools and `none` without (as OpenAI).
pub fn parse_tool_choice(f: &Fields<'_>, tools: &[ToolSpec]) -> Result<ToolChoice, ApiError> {
    let choice = match f.get("tool_choice") {
        None => {
            if tools.is_empty() {
                ToolChoice::None
            } else {
                ToolChoice::Auto
            }
        }
        Some(Value::String(s)) => match s.as_str() {
            "none" => ToolChoice::None,
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            other => {
                return Err(ApiError::invalid_param(
                    "tool_choice",
                    format!("'tool_choice' must be 'none', 'auto', 'required' or a named function, got '{other}'"),
                ))
            }
        },
        Some(Value::Object(o)) => {
            let name = o.get("function").and_then(|fun| fun.get("name")).and_then(Value::as_str);
            match (o.get("type").and_then(Value::as_str), name) {
                (Some("function"), Some(name)) => ToolChoice::Named(name.to_string()),
                (Some("allowed_tools"), _) => {
                    let mode = o.get("allowed_tools").and_then(|a| a.get("mode")).and_then(Value::as_str);
                    if mode == Some("required") {
                        ToolChoice::Required
                    } else {
                        ToolChoice::Auto
                    }
                }
                _ => return Err(ApiError::invalid_param("tool_choice", "unrecognised 'tool_choice' object")),
            }
        }
        Some(_) => return Err(ApiError::invalid_param("tool_choice", "'tool_choice' must be a string or an object")),
    };
    if choice != ToolChoice::None && tools.is_empty() {
        return Err(ApiError::invalid_param("tool_choice", "'tool_choice' needs 'tools'"));
    }
    if let ToolChoice::Named(name) = &choice {
        if !tools.iter().any(|t| &t.name == name) {
            return Err(ApiError::invalid_param(
                "tool_choice",
                format!("tool_choice names '{name}', which is not in 'tools'"),
            ));
        }
    }
    Ok(choice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Value {
        json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])
    }

    #[test]
    fn tool_choice_forms() {
        let cases = [
            (json!({"tools": tools()}), Ok(ToolChoice::Auto)),
            (json!({}), Ok(ToolChoice::None)),
            (json!({"tools": tools(), "tool_choice": "none"}), Ok(ToolChoice::None)),
            (json!({"tools": tools(), "tool_choice": "required"}), Ok(ToolChoice::Required)),
            (json!({"tools": tools(), "tool_choice": {"type": "function", "function": {"name": "nope"}}}), Err(400)),
            (json!({"tool_choice": "auto"}), Err(400)),
            (json!({"tools": tools(), "tool_choice": "sometimes"}), Err(400)),
        ];
        for (body, expected) in cases {
            let f = Fields::new(&body);
            let t = parse_tools(&f).unwrap();
            assert_eq!(parse_tool_choice(&f, &t).map_err(|e| e.status), expected, "{body}");
        }
    }

    #[test]
    fn malformed_tools_are_400() {
        for body in
            [json!({"tools": [{"type": "custom"}]}), json!({"tools": [{"function": {}}]}), json!({"tools": "x"})]
        {
            assert_eq!(parse_tools(&Fields::new(&body)).unwrap_err().status, 400, "{body}");
        }
    }
}
