//! Constrained decoding: what a request asks the output to match, and the schema that forces a
//! tool call. The engine enforces the constraint token by token (xgrammar); the gateway only
//! builds it and, for forced calls, reads the JSON that comes back (`parsers::tool::forced`).
//!
//! Sources (at most one per request; SMG's "Combining with Structured Output"):
//! `response_format` (`json_schema`, `json_object`; `text` adds nothing), vLLM's
//! `structured_outputs` object, the older `guided_json` / `guided_regex` / `guided_choice` /
//! `guided_grammar`, and SMG's `regex` and `ebnf` extensions.

use serde_json::{json, Map, Value};

use crate::api::fields::Fields;
use crate::engine::Constraint;
use crate::error::ApiError;
use shardgate_parsers::tool::ToolSpec;

/// Builds a constraint from a request field's value (the field name for errors).
type Build = fn(&Value, &str) -> Result<Constraint, ApiError>;

fn bad(param: &str, message: impl Into<String>) -> ApiError {
    ApiError::invalid_param(param, message)
}

/// The request's output constraint, if it has one.
pub fn parse(f: &Fields<'_>) -> Result<Option<Constraint>, ApiError> {
    let mut found: Vec<(&'static str, Constraint)> = Vec::new();
    if let Some(rf) = f.get("response_format").filter(|v| !v.is_null()) {
        if let Some(c) = response_format(rf)? {
            found.push(("response_format", c));
        }
    }
    if let Some(so) = f.get("structured_outputs").filter(|v| !v.is_null()) {
        found.push(("structured_outputs", structured_outputs(so)?));
    }
    let legacy: [(&'static str, Build); 6] = [
        ("guided_json", |v, p| json_schema(v, p)),
        ("guided_regex", |v, p| text(v, p).map(Constraint::Regex)),
        ("guided_choice", choice),
        ("guided_grammar", |v, p| text(v, p).map(Constraint::Grammar)),
        ("regex", |v, p| text(v, p).map(Constraint::Regex)),
        ("ebnf", |v, p| text(v, p).map(Constraint::Grammar)),
    ];
    for (name, build) in legacy {
        if let Some(v) = f.get(name).filter(|v| !v.is_null()) {
            found.push((name, build(v, name)?));
        }
    }
    match found.len() {
        0 => Ok(None),
        1 => found.pop().map(|(_, c)| finished(c)).transpose(),
        _ => {
            let names: Vec<&str> = found.iter().map(|(n, _)| *n).collect();
            Err(ApiError::bad_request(format!(
                "only one output constraint may be set per request, got {}",
                names.join(", ")
            ))
            .with_code("invalid_request_parameters"))
        }
    }
}

/// Every constraint leaves through here: one the engine's xgrammar would refuse is answered
/// 400 now instead of failing (or killing) the engine.
fn finished(c: Constraint) -> Result<Constraint, ApiError> {
    super::constraint_check::check(&c)?;
    Ok(c)
}

fn response_format(rf: &Value) -> Result<Option<Constraint>, ApiError> {
    let p = "response_format";
    let kind = rf.get("type").and_then(Value::as_str).ok_or_else(|| bad(p, "response_format needs a 'type'"))?;
    match kind {
        "text" => Ok(None),
        "json_object" => Ok(Some(Constraint::JsonObject)),
        "json_schema" => {
            let schema = rf
                .get("json_schema")
                .and_then(|j| j.get("schema"))
                .ok_or_else(|| bad(p, "response_format 'json_schema' needs 'json_schema.schema'"))?;
            json_schema(schema, "response_format.json_schema.schema").map(Some)
        }
        other => Err(bad(
            p,
            format!("response_format type '{other}' is not supported; use 'text', 'json_object' or 'json_schema'"),
        )),
    }
}

/// vLLM's `structured_outputs`: exactly one of its constraint keys.
fn structured_outputs(so: &Value) -> Result<Constraint, ApiError> {
    let p = "structured_outputs";
    let o = so.as_object().ok_or_else(|| bad(p, "structured_outputs must be an object"))?;
    let mut set: Vec<Constraint> = Vec::new();
    for (key, v) in o.iter().filter(|(_, v)| !v.is_null()) {
        let param = format!("{p}.{key}");
        match key.as_str() {
            "json" => set.push(json_schema(v, &param)?),
            "regex" => set.push(Constraint::Regex(text(v, &param)?)),
            "choice" => set.push(choice(v, &param)?),
            "grammar" => set.push(Constraint::Grammar(text(v, &param)?)),
            "json_object" if v.as_bool() == Some(true) => set.push(Constraint::JsonObject),
            "structural_tag" => set.push(Constraint::StructuralTag(text(v, &param)?)),
            // Options of the constraint; the engine's defaults apply.
            _ => {}
        }
    }
    match set.len() {
        1 => Ok(set.remove(0)),
        0 => {
            Err(bad(p, "structured_outputs must set one of json, regex, choice, grammar, json_object, structural_tag"))
        }
        _ => Err(bad(p, "structured_outputs may set only one kind of constraint")),
    }
}

/// A JSON schema given as an object (or as JSON text), passed on as compact JSON text.
fn json_schema(v: &Value, param: &str) -> Result<Constraint, ApiError> {
    let schema = match v {
        Value::String(s) => {
            serde_json::from_str::<Value>(s).map_err(|e| bad(param, format!("the schema is not valid JSON: {e}")))?
        }
        other => other.clone(),
    };
    if !schema.is_object() && !schema.is_boolean() {
        return Err(bad(param, "a JSON schema must be an object"));
    }
    Ok(Constraint::JsonSchema(schema.to_string()))
}

fn text(v: &Value, param: &str) -> Result<String, ApiError> {
    match v.as_str() {
        Some(s) if !s.is_empty() => Ok(s.to_string()),
        _ => Err(bad(param, format!("'{param}' must be a non-empty string"))),
    }
}

/// A choice list as the EBNF grammar vLLM's front end turns it into for xgrammar (which has no
/// choice constraint of its own): `root ::= "a" | "b"`, with quotes, backslashes and control
/// characters escaped (a raw line break would end the EBNF string).
fn choice(v: &Value, param: &str) -> Result<Constraint, ApiError> {
    let items = v.as_array().filter(|a| !a.is_empty()).ok_or_else(|| bad(param, "a choice needs a non-empty list"))?;
    let mut grammar = String::from("root ::= ");
    for (i, item) in items.iter().enumerate() {
        let option = item.as_str().ok_or_else(|| bad(param, "choices must be strings"))?;
        if i > 0 {
            grammar.push_str(" | ");
        }
        grammar.push('"');
        for ch in option.chars() {
            match ch {
                '"' | '\\' => {
                    grammar.push('\\');
                    grammar.push(ch);
                }
                '\n' => grammar.push_str("\\n"),
                '\r' => grammar.push_str("\\r"),
                '\t' => grammar.push_str("\\t"),
                '\0'..='\x1f' | '\x7f' => grammar.push_str(&format!("\\u{:04x}", ch as u32)),
                _ => grammar.push(ch),
            }
        }
        grammar.push('"');
    }
    Ok(Constraint::Grammar(grammar))
}

/// How a forced `tool_choice` constrains the output.
#[derive(Debug, Clone, PartialEq)]
pub enum ForcedTool {
    /// One call of this function: the output is its arguments object.
    Named(String),
    /// At least one call: the output is `[{"name", "parameters"}, …]`.
    Required,
}

/// The JSON schema that forces the call(s), as vLLM builds it (so both gateways constrain the
/// engine the same way): a named function constrains its `parameters` (an empty object schema
/// when it has none); `required` an array of `{name, parameters}` alternatives, at most one
/// item when `parallel_tool_calls` is false, with the tools' `$defs` merged (a name defined
/// twice differently is refused). Tools' parameter schemas are checked like any other schema.
pub fn tool_schema(forced: &ForcedTool, tools: &[ToolSpec], parallel_tool_calls: bool) -> Result<Constraint, ApiError> {
    finished(Constraint::JsonSchema(tool_schema_text(forced, tools, parallel_tool_calls)?))
}

fn tool_schema_text(forced: &ForcedTool, tools: &[ToolSpec], parallel_tool_calls: bool) -> Result<String, ApiError> {
    let params_of = |t: &ToolSpec| match &t.parameters {
        Some(p) if p.as_object().is_some_and(|o| !o.is_empty()) => p.clone(),
        _ => json!({"type": "object", "properties": {}}),
    };
    match forced {
        ForcedTool::Named(name) => {
            let tool = tools
                .iter()
                .find(|t| &t.name == name)
                .ok_or_else(|| bad("tool_choice", format!("Tool '{name}' has not been passed in `tools`.")))?;
            Ok(params_of(tool).to_string())
        }
        ForcedTool::Required => {
            let mut defs = Map::new();
            let mut alternatives = Vec::with_capacity(tools.len());
            for t in tools {
                let mut params = params_of(t);
                if let Some(Value::Object(own)) = params.as_object_mut().and_then(|p| p.remove("$defs")) {
                    for (k, v) in own {
                        match defs.get(&k) {
                            Some(existing) if existing != &v => {
                                return Err(bad(
                                    "tools",
                                    format!("Tool definition '{k}' has multiple schemas, which is not supported."),
                                )
                                .with_code("invalid_tool_configuration"))
                            }
                            _ => {
                                defs.insert(k, v);
                            }
                        }
                    }
                }
                alternatives.push(json!({
                    "properties": {"name": {"type": "string", "enum": [t.name]}, "parameters": params},
                    "required": ["name", "parameters"],
                }));
            }
            let mut schema =
                json!({"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": alternatives}});
            if !parallel_tool_calls {
                schema["maxItems"] = json!(1);
            }
            if !defs.is_empty() {
                schema["$defs"] = Value::Object(defs);
            }
            Ok(schema.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(body: Value) -> Result<Option<Constraint>, ApiError> {
        parse(&Fields::new(&body))
    }

    #[test]
    fn request_constraints() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let cases: Vec<(Value, Result<Option<Constraint>, &str>)> = vec![
            (json!({}), Ok(None)),
            (json!({"response_format": {"type": "text"}}), Ok(None)),
            (json!({"response_format": {"type": "json_object"}}), Ok(Some(Constraint::JsonObject))),
            (
                json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}),
                Ok(Some(Constraint::JsonSchema(schema.to_string()))),
            ),
            (json!({"response_format": {"type": "json_schema"}}), Err("response_format")),
            (json!({"response_format": {"type": "yaml"}}), Err("response_format")),
            (json!({"structured_outputs": {"regex": "[ab]{3}"}}), Ok(Some(Constraint::Regex("[ab]{3}".into())))),
            (
                json!({"structured_outputs": {"choice": ["yes", "no \"q\" \\"]}}),
                Ok(Some(Constraint::Grammar(r#"root ::= "yes" | "no \"q\" \\""#.into()))),
            ),
            (
                json!({"structured_outputs": {"json": "{\"type\":\"object\"}"}}),
                Ok(Some(Constraint::JsonSchema("{\"type\":\"object\"}".into()))),
            ),
            (json!({"structured_outputs": {"regex": "a", "grammar": "b"}}), Err("structured_outputs")),
            (json!({"structured_outputs": {}}), Err("structured_outputs")),
            (json!({"structured_outputs": {"choice": []}}), Err("structured_outputs.choice")),
            (
                json!({"guided_json": {"type": "object"}}),
                Ok(Some(Constraint::JsonSchema("{\"type\":\"object\"}".into()))),
            ),
            (json!({"ebnf": "root ::= \"a\""}), Ok(Some(Constraint::Grammar("root ::= \"a\"".into())))),
            (json!({"regex": ""}), Err("regex")),
            (json!({"guided_json": "not json"}), Err("guided_json")),
        ];
        for (body, want) in cases {
            let got = parsed(body.clone());
            match want {
                Ok(c) => assert_eq!(got.as_ref().ok(), Some(&c), "{body}: {got:?}"),
                Err(param) => {
                    let e = got.expect_err(&body.to_string());
                    assert_eq!(e.status, 400);
                    assert_eq!(e.param.as_deref(), Some(param), "{body}: {e:?}");
                }
            }
        }
        // What the engine's xgrammar refuses never leaves: 400 with vLLM's text, no param.
        let refused: [(Value, &str); 9] = [
            (json!({"structured_outputs": {"regex": "(((("}}), "Failed to transform regex into a grammar"),
            (json!({"guided_regex": "a)"}), "Failed to transform regex into a grammar"),
            (json!({"structured_outputs": {"grammar": "root ::= ((("}}), "Invalid grammar specification."),
            (json!({"ebnf": "root ::= missing"}), "Invalid grammar specification."),
            (json!({"structured_outputs": {"structural_tag": "not json"}}), "Invalid structural tag specification."),
            (json!({"guided_json": {"type": "foo"}}), "Unsupported type \"foo\""),
            (json!({"structured_outputs": {"json": {"$ref": "#/$defs/nope"}}}), "Cannot find field"),
            (
                json!({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object", "properties": {"a": {"type": "x"}}}}}}),
                "Failed to transform json schema into a grammar",
            ),
            (json!({"structured_outputs": {"json": false}}), "Schema 'false'"),
        ];
        for (body, want) in refused {
            let e = parsed(body.clone()).expect_err(&body.to_string());
            assert_eq!((e.status, e.param.as_deref()), (400, None), "{body}");
            assert!(e.message.contains(want), "{body}: {}", e.message);
        }
        let raw = parsed(json!({"structured_outputs": {"choice": ["a\nb\u{1}"]}})).unwrap();
        assert_eq!(raw, Some(Constraint::Grammar(r#"root ::= "a\nb\u0001""#.into())));
        let two = parsed(json!({"response_format": {"type": "json_object"}, "regex": "a"})).unwrap_err();
        assert_eq!(two.code, Some("invalid_request_parameters"));
    }

    fn tool(name: &str, parameters: Option<Value>) -> ToolSpec {
        ToolSpec { name: name.into(), parameters }
    }

    /// The forced-call schema as JSON (the test's own input: always a schema).
    fn tool_schema(forced: &ForcedTool, tools: &[ToolSpec], parallel: bool) -> Result<String, ApiError> {
        match super::tool_schema(forced, tools, parallel)? {
            Constraint::JsonSchema(s) => Ok(s),
            other => panic!("not a schema: {other:?}"),
        }
    }

    #[test]
    fn forced_tool_schemas_match_vllms() {
        let weather = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
        let tools = vec![tool("get_weather", Some(weather.clone())), tool("ping", None)];
        let named: Value =
            serde_json::from_str(&tool_schema(&ForcedTool::Named("get_weather".into()), &tools, true).unwrap())
                .unwrap();
        assert_eq!(named, weather);
        let empty: Value =
            serde_json::from_str(&tool_schema(&ForcedTool::Named("ping".into()), &tools, true).unwrap()).unwrap();
        assert_eq!(empty, json!({"type": "object", "properties": {}}));
        assert!(tool_schema(&ForcedTool::Named("nope".into()), &tools, true).is_err());
        let required: Value =
            serde_json::from_str(&tool_schema(&ForcedTool::Required, &tools, false).unwrap()).unwrap();
        assert_eq!(required["type"], "array");
        assert_eq!(required["minItems"], 1);
        assert_eq!(required["maxItems"], 1);
        assert_eq!(required["items"]["anyOf"][0]["properties"]["name"]["enum"][0], "get_weather");
        assert_eq!(
            required["items"]["anyOf"][1]["properties"]["parameters"],
            json!({"type": "object", "properties": {}})
        );
        let with_defs = |d: Value| tool("t", Some(json!({"type": "object", "$defs": d})));
        let same = vec![with_defs(json!({"A": {"type": "string"}})), with_defs(json!({"A": {"type": "string"}}))];
        let merged: Value = serde_json::from_str(&tool_schema(&ForcedTool::Required, &same, true).unwrap()).unwrap();
        assert_eq!(merged["$defs"], json!({"A": {"type": "string"}}));
        let clash = vec![with_defs(json!({"A": {"type": "string"}})), with_defs(json!({"A": {"type": "integer"}}))];
        assert_eq!(
            tool_schema(&ForcedTool::Required, &clash, true).unwrap_err().code,
            Some("invalid_tool_configuration")
        );
        let broken = vec![tool("t", Some(json!({"type": "object", "properties": {"a": {"type": "nope"}}})))];
        for forced in [ForcedTool::Named("t".into()), ForcedTool::Required] {
            let e = tool_schema(&forced, &broken, true).unwrap_err();
            assert!(e.message.contains("Unsupported type \"nope\""), "{forced:?}: {}", e.message);
        }
    }
}
