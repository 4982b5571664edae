//! `tools` and `tool_choice`.
//!
//! A tool is `{"name", "description", "input_schema"}`; the template sees it as a chat tool,
//! `{"type":"function","function":{"name","description","parameters": input_schema}}` (a
//! schema without `type` gets `"type": "object"`, as vLLM gives it). Anthropic's server tools
//! (`web_search_…`, `bash_…`) run on Anthropic's side and are refused here.
//!
//! `tool_choice`: `auto` (the default with tools), `any` (at least one call: chat's
//! `required`), `tool` with `name` (that call), `none`. `disable_parallel_tool_use: true`
//! means one call at most: a forced call is constrained to one (the parse stage's
//! `parallel_tool_calls` off), and with `auto` only the first call the model makes is answered
//! (`format`). vLLM ignores the flag.

use serde_json::{Map, Value};

use super::invalid::other_api;
use crate::api::chat_prompt::ToolChoice;
use crate::api::fields::Fields;
use crate::error::ApiError;
use shardgate_parsers::tool::ToolSpec;

/// The request's tools, for the parse stage and for the template.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tools {
    pub specs: Vec<ToolSpec>,
    /// `[{"type":"function","function":{…}}]`, none without tools.
    pub template: Option<Value>,
}

/// What `tool_choice` says.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub choice: ToolChoice,
    /// `disable_parallel_tool_use`: at most one call.
    pub one_call: bool,
}

/// The request's tools, validated.
pub fn read(f: &Fields<'_>) -> Result<Tools, ApiError> {
    let Some(list) = f.array("tools")? else { return Ok(Tools::default()) };
    let mut specs = Vec::with_capacity(list.len());
    let mut template = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let (spec, shown) = tool(t, &format!("tools.{i}"))?;
        specs.push(spec);
        template.push(shown);
    }
    Ok(Tools { specs, template: Some(Value::Array(template)) })
}

/// One tool: its spec, and how the template sees it.
fn tool(t: &Value, at: &str) -> Result<(ToolSpec, Value), ApiError> {
    let obj = t.as_object().ok_or_else(|| ApiError::invalid_param(at, "Input should be a valid dictionary"))?;
    match obj.get("type").and_then(Value::as_str) {
        None | Some("custom") => {}
        Some("function") if obj.contains_key("function") => {
            return Err(other_api(
                at,
                "Chat Completions",
                "a tool here is {\"name\", \"description\", \"input_schema\"}, with no \"function\" wrapper",
            ))
        }
        Some(other) => {
            return Err(ApiError::invalid_param(
                &format!("{at}.type"),
                format!(
                    "tools of type '{other}' (Anthropic's server tools) are not supported; give a name and an \
                     input_schema"
                ),
            ))
        }
    }
    let name = match obj.get("name") {
        Some(Value::String(n)) if !n.is_empty() => n.clone(),
        Some(Value::String(_)) => return Err(ApiError::invalid_param(&format!("{at}.name"), "must not be empty")),
        Some(_) => return Err(ApiError::invalid_param(&format!("{at}.name"), "Input should be a valid string")),
        None => return Err(ApiError::invalid_param(&format!("{at}.name"), "Field required")),
    };
    let mut schema = match obj.get("input_schema") {
        Some(Value::Object(s)) => s.clone(),
        Some(_) => {
            return Err(ApiError::invalid_param(&format!("{at}.input_schema"), "Input should be a valid dictionary"))
        }
        None => return Err(ApiError::invalid_param(&format!("{at}.input_schema"), "Field required")),
    };
    schema.entry("type").or_insert_with(|| Value::from("object"));
    let mut function = Map::new();
    function.insert("name".into(), Value::String(name.clone()));
    match obj.get("description") {
        None | Some(Value::Null) => {}
        Some(Value::String(d)) => {
            function.insert("description".into(), Value::String(d.clone()));
        }
        Some(_) => return Err(ApiError::invalid_param(&format!("{at}.description"), "Input should be a valid string")),
    }
    function.insert("parameters".into(), Value::Object(schema.clone()));
    let mut shown = Map::new();
    shown.insert("type".into(), Value::from("function"));
    shown.insert("function".into(), Value::Object(function));
    Ok((ToolSpec { name, parameters: Some(Value::Object(schema)) }, Value::Object(shown)))
}

/// `tool_choice`; `auto` with tools and `none` without when absent.
pub fn read_choice(f: &Fields<'_>, tools: &[ToolSpec]) -> Result<Choice, ApiError> {
    let default = if tools.is_empty() { ToolChoice::None } else { ToolChoice::Auto };
    let o = match f.get("tool_choice") {
        None => return Ok(Choice { choice: default, one_call: false }),
        Some(Value::Object(o)) => o,
        Some(Value::String(s)) => {
            return Err(other_api(
                "tool_choice",
                "Chat Completions",
                &format!(
                    "'{s}' is a string; here it is an object: {{\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}}"
                ),
            ))
        }
        Some(_) => return Err(ApiError::invalid_param("tool_choice", "Input should be a valid dictionary")),
    };
    let choice = match o.get("type") {
        Some(Value::String(t)) => match t.as_str() {
            "auto" => ToolChoice::Auto,
            "any" => ToolChoice::Required,
            "none" => ToolChoice::None,
            "tool" => match o.get("name") {
                Some(Value::String(name)) => ToolChoice::Named(name.clone()),
                Some(_) => return Err(ApiError::invalid_param("tool_choice.name", "Input should be a valid string")),
                None => return Err(ApiError::invalid_param("tool_choice.name", "Field required")),
            },
            other => {
                return Err(ApiError::invalid_param(
                    "tool_choice.type",
                    format!(
                        "Input tag '{other}' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'"
                    ),
                ))
            }
        },
        Some(_) => return Err(ApiError::invalid_param("tool_choice.type", "Input should be a valid string")),
        None => return Err(ApiError::invalid_param("tool_choice.type", "Field required")),
    };
    let one_call = match o.get("disable_parallel_tool_use") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(ApiError::invalid_param(
                "tool_choice.disable_parallel_tool_use",
                "Input should be a valid boolean",
            ))
        }
    };
    if choice != ToolChoice::None && tools.is_empty() {
        return Err(ApiError::invalid_param("tool_choice", "a tool_choice other than 'none' needs `tools`"));
    }
    if let ToolChoice::Named(name) = &choice {
        if !tools.iter().any(|t| &t.name == name) {
            return Err(ApiError::invalid_param(
                "tool_choice.name",
                format!("tool_choice names '{name}', which is not one of `tools`"),
            ));
        }
    }
    Ok(Choice { choice, one_call })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn weather() -> Value {
        json!({"name": "get_weather", "description": "Weather for a city",
               "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}})
    }

    fn choice(body: Value) -> Result<Choice, (u16, Option<String>)> {
        let f = Fields::new(&body);
        let tools = read(&f).expect("tools");
        read_choice(&f, &tools.specs).map_err(|e| (e.status, e.param))
    }

    #[test]
    fn tools_reach_the_template_as_chat_tools() {
        let body =
            json!({"tools": [weather(), {"name": "ping", "input_schema": {}, "cache_control": {"type": "ephemeral"}}]});
        let tools = read(&Fields::new(&body)).expect("tools");
        assert_eq!(
            tools.template,
            Some(json!([
                {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
                {"type": "function", "function": {"name": "ping", "parameters": {"type": "object"}}}
            ]))
        );
        assert_eq!(tools.specs[1], ToolSpec { name: "ping".into(), parameters: Some(json!({"type": "object"})) });
        assert_eq!(read(&Fields::new(&json!({}))).expect("none"), Tools::default());
    }

    #[test]
    fn malformed_tools_name_their_field() {
        let cases = [
            (json!({"tools": "x"}), "tools"),
            (json!({"tools": [1]}), "tools.0"),
            (json!({"tools": [weather(), {"input_schema": {}}]}), "tools.1.name"),
            (json!({"tools": [{"name": "", "input_schema": {}}]}), "tools.0.name"),
            (json!({"tools": [{"name": "f"}]}), "tools.0.input_schema"),
            (json!({"tools": [{"name": "f", "input_schema": "object"}]}), "tools.0.input_schema"),
            (json!({"tools": [{"name": "f", "input_schema": {}, "description": 1}]}), "tools.0.description"),
            (json!({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}), "tools.0.type"),
            (json!({"tools": [{"type": "function", "function": {"name": "f"}}]}), "tools.0"),
        ];
        for (body, param) in cases {
            let e = read(&Fields::new(&body)).expect_err(&body.to_string());
            assert_eq!((e.status, e.param.as_deref()), (400, Some(param)), "{body}: {}", e.message);
        }
    }

    #[test]
    fn tool_choice_table() {
        let tools = json!([weather()]);
        let one = |choice: ToolChoice, one_call: bool| Ok(Choice { choice, one_call });
        let bad = |param: &str| Err((400, Some(param.to_string())));
        let cases = [
            (json!({"tools": tools}), one(ToolChoice::Auto, false)),
            (json!({}), one(ToolChoice::None, false)),
            (json!({"tools": tools, "tool_choice": {"type": "auto"}}), one(ToolChoice::Auto, false)),
            (
                json!({"tools": tools, "tool_choice": {"type": "auto", "disable_parallel_tool_use": true}}),
                one(ToolChoice::Auto, true),
            ),
            (json!({"tools": tools, "tool_choice": {"type": "any"}}), one(ToolChoice::Required, false)),
            (
                json!({"tools": tools,
                       "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true}}),
                one(ToolChoice::Named("get_weather".into()), true),
            ),
            (json!({"tools": tools, "tool_choice": {"type": "none"}}), one(ToolChoice::None, false)),
            (json!({"tool_choice": {"type": "none"}}), one(ToolChoice::None, false)),
            (json!({"tools": tools, "tool_choice": {"type": "tool", "name": "nope"}}), bad("tool_choice.name")),
            (json!({"tools": tools, "tool_choice": {"type": "tool"}}), bad("tool_choice.name")),
            (json!({"tool_choice": {"type": "auto"}}), bad("tool_choice")),
            (json!({"tool_choice": {"type": "any"}}), bad("tool_choice")),
            (json!({"tools": tools, "tool_choice": "required"}), bad("tool_choice")),
            (json!({"tools": tools, "tool_choice": {"type": "sometimes"}}), bad("tool_choice.type")),
            (json!({"tools": tools, "tool_choice": {}}), bad("tool_choice.type")),
            (
                json!({"tools": tools, "tool_choice": {"type": "any", "disable_parallel_tool_use": "yes"}}),
                bad("tool_choice.disable_parallel_tool_use"),
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(choice(body.clone()), expected, "{body}");
        }
    }
}
