//! Typing argument values from the tool's JSON schema.
//!
//! XML-style formats write every argument as text; the declared schema says
//! whether `42` means the number or the string. Properties declared inside
//! `oneOf` / `anyOf` / `allOf` branches are found too.

use serde_json::{Map, Value};

use super::py_literal;
use crate::limits;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueType {
    String,
    Integer,
    Number,
    Boolean,
    Object,
    Array,
    Null,
    Unknown,
}

/// The schema of property `key` of an object schema.
pub(crate) fn property<'a>(schema: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    property_at_depth(schema?, key, 0)
}

fn property_at_depth<'a>(schema: &'a Value, key: &str, depth: usize) -> Option<&'a Value> {
    if let Some(found) = schema.get("properties").and_then(|p| p.get(key)) {
        return Some(found);
    }
    if depth >= limits::schema_composition_depth_max {
        return None;
    }
    ["oneOf", "anyOf", "allOf"]
        .iter()
        .filter_map(|keyword| schema.get(keyword).and_then(Value::as_array))
        .flatten()
        .find_map(|branch| property_at_depth(branch, key, depth + 1))
}

/// The schema of the elements of an array schema.
pub(crate) fn items(schema: Option<&Value>) -> Option<&Value> {
    schema?.get("items")
}

/// The declared type of a schema: its `type` (the first non-null one of a
/// list), else the first typed `oneOf`/`anyOf`/`allOf` branch, else what an
/// `enum`, `properties` or `items` implies.
pub(crate) fn value_type(schema: Option<&Value>) -> ValueType {
    schema.map_or(ValueType::Unknown, |s| value_type_at_depth(s, 0))
}

fn value_type_at_depth(schema: &Value, depth: usize) -> ValueType {
    match schema.get("type") {
        Some(Value::String(name)) => return type_named(name),
        Some(Value::Array(names)) => {
            let named = names.iter().filter_map(Value::as_str).map(type_named);
            let mut non_null = named.clone().filter(|t| *t != ValueType::Null);
            return non_null.next().or_else(|| named.clone().next()).unwrap_or(ValueType::Unknown);
        }
        _ => {}
    }
    if depth < limits::schema_composition_depth_max {
        let branch_type = ["oneOf", "anyOf", "allOf"]
            .iter()
            .filter_map(|keyword| schema.get(keyword).and_then(Value::as_array))
            .flatten()
            .map(|branch| value_type_at_depth(branch, depth + 1))
            .find(|t| !matches!(t, ValueType::Unknown | ValueType::Null));
        if let Some(found) = branch_type {
            return found;
        }
    }
    if let Some(Value::Array(values)) = schema.get("enum") {
        if values.iter().all(Value::is_string) && !values.is_empty() {
            return ValueType::String;
        }
    }
    if schema.get("properties").is_some() {
        return ValueType::Object;
    }
    if schema.get("items").is_some() {
        return ValueType::Array;
    }
    ValueType::Unknown
}

fn type_named(name: &str) -> ValueType {
    match name {
        "string" => ValueType::String,
        "integer" => ValueType::Integer,
        "number" => ValueType::Number,
        "boolean" => ValueType::Boolean,
        "object" => ValueType::Object,
        "array" => ValueType::Array,
        "null" => ValueType::Null,
        _ => ValueType::Unknown,
    }
}

/// Converts argument text to the declared type. Text that does not fit the
/// type is inferred instead ([`infer`]), so nothing the model wrote is lost.
pub(crate) fn convert(text: &str, ty: ValueType) -> Value {
    let trimmed = text.trim();
    let converted = match ty {
        ValueType::String => return Value::String(text.to_string()),
        ValueType::Integer => integer(trimmed),
        ValueType::Number => number(trimmed),
        ValueType::Boolean => match trimmed {
            "true" | "True" => Some(Value::Bool(true)),
            "false" | "False" => Some(Value::Bool(false)),
            _ => None,
        },
        ValueType::Object | ValueType::Array if trimmed.is_empty() => {
            Some(if ty == ValueType::Object { Value::Object(Map::new()) } else { Value::Array(Vec::new()) })
        }
        ValueType::Object | ValueType::Array => {
            serde_json::from_str::<Value>(trimmed).ok().or_else(|| py_literal::parse_value(trimmed).ok())
        }
        ValueType::Null => matches!(trimmed, "null" | "None").then_some(Value::Null),
        ValueType::Unknown => None,
    };
    converted.unwrap_or_else(|| infer(text))
}

/// The value text most plausibly means without a schema: JSON (numbers,
/// booleans, null, objects, arrays, quoted strings), Python's `True` /
/// `False` / `None`, else the text itself as a string.
pub(crate) fn infer(text: &str) -> Value {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Value::String(text.to_string());
    }
    if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        return value;
    }
    match trimmed {
        "True" => Value::Bool(true),
        "False" => Value::Bool(false),
        "None" => Value::Null,
        _ => Value::String(text.to_string()),
    }
}

fn integer(text: &str) -> Option<Value> {
    if let Ok(n) = text.parse::<i64>() {
        return Some(Value::from(n));
    }
    if let Ok(n) = text.parse::<u64>() {
        return Some(Value::from(n));
    }
    // `5.0` is an integer written as a float.
    let float = text.parse::<f64>().ok()?;
    (float.fract() == 0.0 && float.abs() < 9.0e15).then(|| Value::from(float as i64))
}

fn number(text: &str) -> Option<Value> {
    if let Ok(value @ Value::Number(_)) = serde_json::from_str::<Value>(text) {
        return Some(value);
    }
    let float = text.parse::<f64>().ok()?;
    serde_json::Number::from_f64(float).map(Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conversion_table() {
        let cases: &[(&str, ValueType, Value)] = &[
            ("42", ValueType::String, json!("42")),
            ("42", ValueType::Integer, json!(42)),
            (" 5.0 ", ValueType::Integer, json!(5)),
            ("4.5", ValueType::Integer, json!(4.5)),
            ("4.5", ValueType::Number, json!(4.5)),
            ("True", ValueType::Boolean, json!(true)),
            ("", ValueType::Array, json!([])),
            ("  ", ValueType::Object, json!({})),
            ("{'a': 1}", ValueType::Object, json!({"a": 1})),
            ("[1, 2]", ValueType::Array, json!([1, 2])),
            ("None", ValueType::Null, Value::Null),
            ("hello", ValueType::Integer, json!("hello")),
            ("hello world", ValueType::Unknown, json!("hello world")),
            ("[1,2]", ValueType::Unknown, json!([1, 2])),
            ("False", ValueType::Unknown, json!(false)),
        ];
        for (text, ty, want) in cases {
            assert_eq!(&convert(text, *ty), want, "{text:?} as {ty:?}");
        }
    }

    #[test]
    fn composition_is_resolved() {
        let schema = json!({
            "type": "object",
            "anyOf": [
                {"properties": {"a": {"type": "integer"}}},
                {"oneOf": [{"properties": {"b": {"type": ["null", "array"]}}}]}
            ]
        });
        assert_eq!(value_type(property(Some(&schema), "a")), ValueType::Integer);
        assert_eq!(value_type(property(Some(&schema), "b")), ValueType::Array);
        assert_eq!(value_type(property(Some(&schema), "c")), ValueType::Unknown);
    }
}
