//! A Responses request's `tools` (flat function tools: `{"type":"function","name",
//! "description","parameters","strict"}`) and `tool_choice`. The template sees the tools in
//! chat's nested shape, as vLLM converts them (`convert_tool_responses_to_completions_format`:
//! `description` and `parameters` present, null when not given; `strict` only when given), so
//! the prompt is the one `vllm serve` renders. MCP tools are `mcp_tools`'s; other hosted tools
//! (`web_search`, `file_search`, ...) are refused: nothing here runs them.

use serde_json::{Map, Value};

use crate::api::chat_prompt::ToolChoice;
use crate::api::fields::Fields;
use crate::error::ApiError;
use shardgate_parsers::tool::ToolSpec;

/// The request's function tools.
#[derive(Debug, Clone, PartialEq)]
pub struct Tools {
    pub specs: Vec<ToolSpec>,
    /// As the template sees them (`[{"type":"function","function":{...}}]`).
    pub template: Value,
}

fn bad(param: &str, message: impl Into<String>) -> ApiError {
    ApiError::invalid_param(param, message)
}

pub fn read(f: &Fields<'_>) -> Result<Tools, ApiError> {
    let Some(list) = f.array("tools")? else {
        return Ok(Tools { specs: Vec::new(), template: Value::Array(Vec::new()) });
    };
    let mut specs = Vec::with_capacity(list.len());
    let mut template = Vec::with_capacity(list.len());
    for (i, tool) in list.iter().enumerate() {
        let at = format!("tools[{i}]");
        let t = tool.as_object().ok_or_else(|| bad(&at, "each tool must be an object"))?;
        match t.get("type").and_then(Value::as_str) {
            Some("function") => {}
            // Read by `mcp_tools`.
            Some("mcp") => continue,
            Some(other) => {
                return Err(bad(
                    &format!("{at}.type"),
                    format!("tools of type '{other}' are not supported yet; only 'function' tools are"),
                ))
            }
            None => return Err(bad(&format!("{at}.type"), "each tool needs a string 'type'")),
        }
        let name = t
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| bad(&format!("{at}.name"), "a function tool needs a non-empty string 'name'"))?;
        let parameters = t.get("parameters").filter(|p| !p.is_null());
        if parameters.is_some_and(|p| !p.is_object()) {
            return Err(bad(&format!("{at}.parameters"), "'parameters' must be a JSON Schema object"));
        }
        let description = t.get("description").filter(|d| !d.is_null());
        if description.is_some_and(|d| !d.is_string()) {
            return Err(bad(&format!("{at}.description"), "'description' must be a string"));
        }
        let strict = t.get("strict").filter(|s| !s.is_null());
        if strict.is_some_and(|s| !s.is_boolean()) {
            return Err(bad(&format!("{at}.strict"), "'strict' must be a boolean"));
        }
        let mut function = Map::new();
        function.insert("name".into(), Value::from(name));
        function.insert("description".into(), description.cloned().unwrap_or(Value::Null));
        function.insert("parameters".into(), parameters.cloned().unwrap_or(Value::Null));
        if let Some(s) = strict {
            function.insert("strict".into(), s.clone());
        }
        let mut nested = Map::new();
        nested.insert("type".into(), Value::from("function"));
        nested.insert("function".into(), Value::Object(function));
        template.push(Value::Object(nested));
        specs.push(ToolSpec { name: name.to_string(), parameters: parameters.cloned() });
    }
    Ok(Tools { specs, template: Value::Array(template) })
}

/// `tool_choice`: `auto` (the default), `none`, `required`, `{"type":"function","name"}`, or
/// `{"type":"allowed_tools","mode"}`. Without tools, `auto` and `none` both mean no calls.
pub fn choice(f: &Fields<'_>, tools: &[ToolSpec]) -> Result<ToolChoice, ApiError> {
    let choice = match f.get("tool_choice") {
        None => ToolChoice::Auto,
        Some(Value::String(s)) => match s.as_str() {
            "none" => ToolChoice::None,
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            other => {
                return Err(bad(
                    "tool_choice",
                    format!("'tool_choice' must be 'none', 'auto', 'required' or a function, got '{other}'"),
                ))
            }
        },
        Some(Value::Object(o)) => match o.get("type").and_then(Value::as_str) {
            Some("function") => match o.get("name").and_then(Value::as_str) {
                Some(name) => ToolChoice::Named(name.to_string()),
                None => return Err(bad("tool_choice.name", "a function 'tool_choice' needs a string 'name'")),
            },
            Some("allowed_tools") => match o.get("mode").and_then(Value::as_str) {
                Some("required") => ToolChoice::Required,
                _ => ToolChoice::Auto,
            },
            Some(other) => {
                return Err(bad("tool_choice.type", format!("a 'tool_choice' of type '{other}' is not supported")))
            }
            None => return Err(bad("tool_choice.type", "a 'tool_choice' object needs a string 'type'")),
        },
        Some(_) => return Err(bad("tool_choice", "'tool_choice' must be a string or an object")),
    };
    match &choice {
        ToolChoice::Named(name) if !tools.iter().any(|t| &t.name == name) => {
            Err(bad("tool_choice", format!("tool_choice names '{name}', which is not in 'tools'")))
        }
        ToolChoice::Required if tools.is_empty() => Err(bad("tool_choice", "'tool_choice' 'required' needs 'tools'")),
        _ if tools.is_empty() => Ok(ToolChoice::None),
        _ => Ok(choice),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn weather() -> Value {
        json!({"type": "function", "name": "get_weather", "description": "Weather by city",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": true})
    }

    #[test]
    fn flat_tools_reach_the_template_in_chats_shape() {
        let body = json!({"tools": [weather(), {"type": "function", "name": "now"}]});
        let tools = read(&Fields::new(&body)).unwrap();
        assert_eq!(tools.specs.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["get_weather", "now"]);
        assert_eq!(tools.specs[1].parameters, None);
        assert_eq!(
            tools.template,
            json!([
                {"type": "function", "function": {"name": "get_weather", "description": "Weather by city",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": true}},
                {"type": "function", "function": {"name": "now", "description": null, "parameters": null}}
            ])
        );
        // vLLM's key order: the template's `tojson` prints it.
        let keys: Vec<&String> = tools.template[1]["function"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["name", "description", "parameters"]);
    }

    #[test]
    fn bad_tools_are_refused_naming_the_field() {
        let cases = [
            (json!({"tools": "x"}), "tools"),
            (json!({"tools": [weather(), {"type": "web_search"}]}), "tools[1].type"),
            (json!({"tools": [{"name": "f"}]}), "tools[0].type"),
            (json!({"tools": [{"type": "function"}]}), "tools[0].name"),
            (json!({"tools": [{"type": "function", "function": {"name": "f"}}]}), "tools[0].name"),
            (json!({"tools": [{"type": "function", "name": "f", "parameters": "{}"}]}), "tools[0].parameters"),
            (json!({"tools": [{"type": "function", "name": "f", "strict": "yes"}]}), "tools[0].strict"),
            (json!({"tools": [5]}), "tools[0]"),
        ];
        for (body, param) in cases {
            let e = read(&Fields::new(&body)).expect_err(&body.to_string());
            assert_eq!((e.status, e.param.as_deref()), (400, Some(param)), "{body}: {}", e.message);
        }
    }

    #[test]
    fn tool_choice_forms() {
        let with_tools = |choice: Value| json!({"tools": [weather()], "tool_choice": choice});
        let cases = [
            (json!({"tools": [weather()]}), Ok(ToolChoice::Auto)),
            (json!({}), Ok(ToolChoice::None)),
            (json!({"tool_choice": "auto"}), Ok(ToolChoice::None)),
            (with_tools(json!("none")), Ok(ToolChoice::None)),
            (with_tools(json!("required")), Ok(ToolChoice::Required)),
            (
                with_tools(json!({"type": "function", "name": "get_weather"})),
                Ok(ToolChoice::Named("get_weather".into())),
            ),
            (with_tools(json!({"type": "allowed_tools", "mode": "required", "tools": []})), Ok(ToolChoice::Required)),
            (with_tools(json!({"type": "function", "name": "nope"})), Err("tool_choice")),
            (with_tools(json!({"type": "function"})), Err("tool_choice.name")),
            (with_tools(json!({"type": "web_search_preview"})), Err("tool_choice.type")),
            (with_tools(json!("sometimes")), Err("tool_choice")),
            (with_tools(json!(3)), Err("tool_choice")),
            (json!({"tool_choice": "required"}), Err("tool_choice")),
        ];
        for (body, expected) in cases {
            let f = Fields::new(&body);
            let tools = read(&f).unwrap();
            let got = choice(&f, &tools.specs).map_err(|e| e.param.unwrap_or_default());
            assert_eq!(got, expected.map_err(str::to_string), "{body}");
        }
    }
}
