//! Whether a structural tag has a shape xgrammar reads: JSON; either the older form vLLM
//! unpacks itself (`structures` of `{begin, schema, end}` with string `begin`/`end` and a
//! schema xgrammar takes, plus a list of string `triggers`) or xgrammar's own
//! (`{"type": "structural_tag", "format": {...}}`, `type` optional, `format` an object whose
//! `type`, when given, names a format xgrammar knows). Deeper format fields are left to xgrammar.

use serde_json::Value;

/// The format kinds of xgrammar's structural tags.
const FORMATS: [&str; 21] = [
    "const_string",
    "json_schema",
    "any_text",
    "sequence",
    "or",
    "tag",
    "triggered_tags",
    "tags_with_separator",
    "optional",
    "plus",
    "star",
    "repeat",
    "qwen_xml_parameter",
    "grammar",
    "regex",
    "token",
    "exclude_token",
    "any_tokens",
    "token_triggered_tags",
    "dispatch",
    "token_dispatch",
];

/// Checks a parsed structural tag (bounded in depth by the caller).
pub fn check(tag: &Value) -> Result<(), String> {
    let o = tag.as_object().ok_or("Structural tag must be an object")?;
    if let Some(structures) = o.get("structures") {
        let structures = structures.as_array().ok_or("structures must be a list")?;
        let triggers = o.get("triggers").and_then(Value::as_array).ok_or("triggers must be a list")?;
        if !triggers.iter().all(Value::is_string) {
            return Err("triggers must be strings".into());
        }
        for s in structures {
            let begin_end = ["begin", "end"].iter().all(|k| s.get(k).is_some_and(Value::is_string));
            let schema = s.get("schema").ok_or("a structure needs begin, schema and end")?;
            if !begin_end {
                return Err("a structure needs string begin and end".into());
            }
            super::schema::check(schema)?;
        }
        return Ok(());
    }
    if o.get("type").is_some_and(|t| t.as_str() != Some("structural_tag")) {
        return Err("Structural tag's type must be a string \"structural_tag\"".into());
    }
    let format = o.get("format").ok_or("Structural tag must have a format field")?;
    let format = format.as_object().ok_or("Format must be an object")?;
    match format.get("type") {
        None => Ok(()),
        Some(Value::String(t)) if FORMATS.contains(&t.as_str()) => Ok(()),
        Some(Value::String(t)) => Err(format!("Format type not recognized: {t}")),
        Some(_) => Err("Format's type must be a string".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::check;
    use serde_json::json;

    #[test]
    fn structural_tag_shapes() {
        let ok = [
            json!({"type": "structural_tag", "format": {"type": "const_string", "value": "x"}}),
            json!({"format": {"type": "tag", "begin": "<a>", "content": {"type": "any_text"}, "end": "</a>"}}),
            json!({"structures": [{"begin": "<f>", "schema": {"type": "object"}, "end": "</f>"}], "triggers": ["<f"]}),
        ];
        for t in ok {
            assert_eq!(check(&t), Ok(()), "{t}");
        }
        let bad = [
            json!([1]),
            json!({}),
            json!({"type": "other", "format": {}}),
            json!({"format": "x"}),
            json!({"format": {"type": "nope"}}),
            json!({"structures": [{"begin": "<f>", "end": "</f>"}], "triggers": ["<f"]}),
            json!({"structures": [{"begin": "<f>", "schema": {"type": "bad"}, "end": "</f>"}], "triggers": []}),
            json!({"structures": []}),
        ];
        for t in bad {
            assert!(check(&t).is_err(), "{t}");
        }
    }
}
