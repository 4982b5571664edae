//! The request fields that constrain the output, read into the pipeline's `Constraint`
//! (at most one per request; SMG's "Combining with Structured Output"): `response_format`
//! (`json_schema`, `json_object`; `text` adds nothing), vLLM's `structured_outputs` object, the
//! older `guided_json` / `guided_regex` / `guided_choice` / `guided_grammar`, and SMG's `regex`
//! and `ebnf` extensions. A malformed field is refused naming it.

use serde_json::Value;

use crate::api::fields::Fields;
use crate::engine::Constraint;
use crate::error::ApiError;

/// Builds a constraint from a request field's value (the field name for errors).
type Build = fn(&Value, &str) -> Result<Constraint, ApiError>;

fn bad(param: &str, message: impl Into<String>) -> ApiError {
    ApiError::invalid_param(param, message)
}

/// The request's output constraint, if it has one (whether the engine can compile it is the
/// pipeline's check).
pub fn parse(f: &Fields<'_>) -> Result<Option<Constraint>, ApiError> {
    let mut found: Vec<(&'static str, Constraint)> = Vec::new();
    if let Some(rf) = f.get("response_format").filter(|v| !v.is_null()) {
        if let Some(c) = output_format(rf, "response_format", &["json_schema", "schema"])? {
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
        1 => Ok(found.pop().map(|(_, c)| c)),
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

/// An output format object by its `type`: `text` (no constraint), `json_object`, or
/// `json_schema` with its schema at `schema_path` inside the object. Chat's `response_format`
/// (`json_schema.schema`) and Responses' `text.format` (`schema`) differ only there; `param`
/// names the object.
pub fn output_format(format: &Value, param: &str, schema_path: &[&str]) -> Result<Option<Constraint>, ApiError> {
    let kind =
        format.get("type").and_then(Value::as_str).ok_or_else(|| bad(param, format!("{param} needs a 'type'")))?;
    match kind {
        "text" => Ok(None),
        "json_object" => Ok(Some(Constraint::JsonObject)),
        "json_schema" => {
            let path = schema_path.join(".");
            let schema = schema_path
                .iter()
                .try_fold(format, |v, key| v.get(key))
                .filter(|v| !v.is_null())
                .ok_or_else(|| bad(param, format!("{param} 'json_schema' needs '{path}'")))?;
            json_schema(schema, &format!("{param}.{path}")).map(Some)
        }
        other => Err(bad(
            param,
            format!("{param} type '{other}' is not supported; use 'text', 'json_object' or 'json_schema'"),
        )),
    }
}

/// vLLM's `structured_outputs`: exactly one of its constraint keys.
pub fn structured_outputs(so: &Value) -> Result<Constraint, ApiError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::invalid::Names;
    use serde_json::json;

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
            let c = parsed(body.clone()).expect("well-formed").expect("a constraint");
            let e = crate::pipeline::constraint::check(&c).map_err(|e| Names::COMPLETIONS.invalid(e)).unwrap_err();
            assert_eq!((e.status, e.param.as_deref()), (400, None), "{body}");
            assert!(e.message.contains(want), "{body}: {}", e.message);
        }
        let raw = parsed(json!({"structured_outputs": {"choice": ["a\nb\u{1}"]}})).unwrap();
        assert_eq!(raw, Some(Constraint::Grammar(r#"root ::= "a\nb\u0001""#.into())));
        let two = parsed(json!({"response_format": {"type": "json_object"}, "regex": "a"})).unwrap_err();
        assert_eq!(two.code, Some("invalid_request_parameters"));
    }
}
