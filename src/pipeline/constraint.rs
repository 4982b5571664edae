//! Constraints the pipeline builds and checks: the JSON schema that forces a tool call, and
//! the check every constraint passes before it may leave (the engine's xgrammar would refuse
//! it, `constraint_check`). Which request fields ask for a constraint is the API adapter's
//! business; the engine enforces it token by token, and the gateway reads the JSON of a forced
//! call back (`parsers::tool::forced`).

use serde_json::{json, Map, Value};

use super::invalid::{Field, Invalid, Problem};
use crate::engine::Constraint;
use shardgate_parsers::tool::ToolSpec;

/// Every constraint leaves through here: one the engine's xgrammar would refuse is answered
/// 400 now instead of failing (or killing) the engine.
pub fn check(c: &Constraint) -> Result<(), Invalid> {
    super::constraint_check::check(c).map_err(|e| {
        tracing::info!("constraint refused before the engine: {}", e.detail());
        Invalid::new(Field::Constraint, Problem::Unsatisfiable(e))
    })
}

/// How a forced tool call constrains the output.
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
pub fn tool_schema(forced: &ForcedTool, tools: &[ToolSpec], parallel_tool_calls: bool) -> Result<Constraint, Invalid> {
    let schema = Constraint::JsonSchema(tool_schema_text(forced, tools, parallel_tool_calls)?);
    check(&schema)?;
    Ok(schema)
}

fn tool_schema_text(forced: &ForcedTool, tools: &[ToolSpec], parallel_tool_calls: bool) -> Result<String, Invalid> {
    let params_of = |t: &ToolSpec| match &t.parameters {
        Some(p) if p.as_object().is_some_and(|o| !o.is_empty()) => p.clone(),
        _ => json!({"type": "object", "properties": {}}),
    };
    match forced {
        ForcedTool::Named(name) => {
            let tool = tools
                .iter()
                .find(|t| &t.name == name)
                .ok_or_else(|| Invalid::new(Field::ToolChoice, Problem::UnknownTool(name.clone())))?;
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
                                return Err(Invalid::new(Field::Tools, Problem::ConflictingDefs(k)))
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

    fn tool(name: &str, parameters: Option<Value>) -> ToolSpec {
        ToolSpec { name: name.into(), parameters }
    }

    /// The forced-call schema as JSON (the test's own input: always a schema).
    fn tool_schema(forced: &ForcedTool, tools: &[ToolSpec], parallel: bool) -> Result<String, Invalid> {
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
        assert_eq!(
            tool_schema(&ForcedTool::Named("nope".into()), &tools, true).unwrap_err(),
            Invalid::new(Field::ToolChoice, Problem::UnknownTool("nope".into()))
        );
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
            tool_schema(&ForcedTool::Required, &clash, true).unwrap_err(),
            Invalid::new(Field::Tools, Problem::ConflictingDefs("A".into()))
        );
        let broken = vec![tool("t", Some(json!({"type": "object", "properties": {"a": {"type": "nope"}}})))];
        for forced in [ForcedTool::Named("t".into()), ForcedTool::Required] {
            let e = tool_schema(&forced, &broken, true).unwrap_err();
            assert_eq!(e.field, Field::Constraint, "{forced:?}");
            assert!(
                matches!(&e.problem, Problem::Unsatisfiable(u) if u.detail().contains("Unsupported type \"nope\"")),
                "{e:?}"
            );
        }
    }
}
