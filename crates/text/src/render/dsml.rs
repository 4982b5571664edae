//! DSML, the markup DeepSeek's encoders write tool calls and tool declarations in, shared by
//! the V3.2, V4 and V4.1 renderers. The versions differ only in tag names (V4.1 puts a space
//! before each) and in the block's name.

use serde_json::{Map, Value};

use super::{py_json, text};
use crate::error::TemplateError;

/// One version's DSML tag names.
pub struct Tags {
    /// The block around a turn's calls: `function_calls`, `tool_calls`, ` calls`.
    pub block: &'static str,
    pub invoke: &'static str,
    pub parameter: &'static str,
}

pub const V32: Tags = Tags { block: "function_calls", invoke: "invoke", parameter: "parameter" };

/// `\n\n<｜DSML｜block>\n` + one invoke per call + `\n</｜DSML｜block>`.
pub fn push_calls(prompt: &mut String, tags: &Tags, calls: &[Value]) -> Result<(), TemplateError> {
    prompt.push_str(&format!("\n\n<｜DSML｜{}>\n", tags.block));
    for (i, call) in calls.iter().enumerate() {
        if i > 0 {
            prompt.push('\n');
        }
        push_invoke(prompt, tags, &call["function"])?;
    }
    prompt.push_str(&format!("\n</｜DSML｜{}>", tags.block));
    Ok(())
}

/// An invoke with one parameter line per argument: strings as they are, anything else as JSON.
fn push_invoke(prompt: &mut String, tags: &Tags, function: &Value) -> Result<(), TemplateError> {
    prompt.push_str(&format!("<｜DSML｜{} name=\"{}\">\n", tags.invoke, text(function, "name")));
    let arguments = arguments(function.get("arguments"));
    for (i, (key, value)) in arguments.iter().enumerate() {
        if i > 0 {
            prompt.push('\n');
        }
        let (is_str, value) = match value {
            Value::String(s) => ("true", s.clone()),
            other => ("false", py_json(other)?),
        };
        let parameter = tags.parameter;
        prompt.push_str(&format!(
            "<｜DSML｜{parameter} name=\"{key}\" string=\"{is_str}\">{value}</｜DSML｜{parameter}>"
        ));
    }
    prompt.push_str(&format!("\n</｜DSML｜{}>", tags.invoke));
    Ok(())
}

/// A call's arguments as the encoders read them: an object as it is; a string parsed as JSON
/// (twice, for a double-encoded one), and anything that is then still not an object kept
/// whole as one `arguments` parameter (V4.1's reading of arguments as written; the API layer
/// hands the other versions objects).
fn arguments(given: Option<&Value>) -> Map<String, Value> {
    let mut value = given.cloned().unwrap_or(Value::Null);
    for _ in 0..2 {
        match &value {
            Value::String(s) => match serde_json::from_str::<Value>(s) {
                Ok(parsed) => value = parsed,
                Err(_) => break,
            },
            _ => break,
        }
    }
    match value {
        Value::Object(map) => map,
        _ if given.is_none_or(Value::is_null) => Map::new(),
        _ => Map::from_iter([("arguments".to_string(), given.cloned().unwrap_or(Value::Null))]),
    }
}

/// The tool schemas, one compact JSON per line, as every version lists them.
pub fn tool_schemas(tools: &[Value]) -> Result<String, TemplateError> {
    let schemas =
        tools.iter().map(|t| py_json(t.get("function").unwrap_or(&Value::Null))).collect::<Result<Vec<_>, _>>()?;
    Ok(schemas.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_as_the_encoders_read_them() {
        let cases = [
            (json!({"a": 1}), json!({"a": 1})),
            (json!("{\"a\": 1}"), json!({"a": 1})),
            (json!("\"{\\\"a\\\": 1}\""), json!({"a": 1})),
            (json!("not json"), json!({"arguments": "not json"})),
            (json!("[1, 2]"), json!({"arguments": "[1, 2]"})),
            (json!(null), json!({})),
        ];
        for (given, want) in cases {
            assert_eq!(Value::Object(arguments(Some(&given))), want, "{given}");
        }
    }

    #[test]
    fn a_call_block() {
        let calls = [json!({"function": {"name": "f", "arguments": {"s": "x", "n": [1, true]}}})];
        let mut out = String::new();
        push_calls(&mut out, &V32, &calls).unwrap();
        assert_eq!(
            out,
            "\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n\
             <｜DSML｜parameter name=\"s\" string=\"true\">x</｜DSML｜parameter>\n\
             <｜DSML｜parameter name=\"n\" string=\"false\">[1, true]</｜DSML｜parameter>\n\
             </｜DSML｜invoke>\n</｜DSML｜function_calls>"
        );
    }
}
