//! Whether the engine can compile a constraint, decided before it is sent. A real vLLM engine
//! core handed a regex, grammar, schema or structural tag that xgrammar refuses fails the
//! request or dies (its front end compiles them first and answers 400; the gateway replaces
//! that front end). The checks follow xgrammar's own readers (the gateway tells the engine to
//! use xgrammar) and err towards accepting: what they cannot judge goes to the engine as before.
//! Every check is linear in the input, with depth bounded by `limits`.

mod ebnf;
mod lark;
mod regex;
mod schema;
mod tag;

pub use lark::is_lark;
use serde_json::Value;

use crate::engine::Constraint;
use crate::limits;

/// Why a constraint was refused: each kind is one of vLLM's answers for the same input (with its
/// xgrammar backend; `api::invalid` words them), `detail` says what was wrong.
#[derive(Debug, Clone, PartialEq)]
pub enum Invalid {
    RegexNul,
    Regex(String),
    Grammar(String),
    SchemaJson(String),
    Schema(String),
    TooDeep,
    TagEmpty,
    Tag(String),
}

impl Invalid {
    /// What was wrong, for the log (adapters word the refusal as their API does).
    pub fn detail(&self) -> &str {
        match self {
            Invalid::Regex(d) | Invalid::Grammar(d) | Invalid::SchemaJson(d) | Invalid::Schema(d) | Invalid::Tag(d) => {
                d
            }
            Invalid::RegexNul => "NUL in regex",
            Invalid::TooDeep => "nested too deeply",
            Invalid::TagEmpty => "empty structural tag",
        }
    }
}

/// Checks a constraint as the engine's xgrammar would read it.
pub fn check(c: &Constraint) -> Result<(), Invalid> {
    match c {
        Constraint::JsonObject => Ok(()),
        Constraint::Regex(r) if r.contains('\0') => Err(Invalid::RegexNul),
        Constraint::Regex(r) => regex::check(r).map_err(Invalid::Regex),
        Constraint::Grammar(g) if lark::is_lark(g) => lark::check(g).map_err(Invalid::Grammar),
        Constraint::Grammar(g) => ebnf::check(g).map_err(Invalid::Grammar),
        Constraint::JsonSchema(s) => {
            let schema = parse_bounded(s, limits::constraint_json_nesting_max).map_err(|e| match e {
                Parsed::TooDeep => Invalid::TooDeep,
                Parsed::Bad(e) => Invalid::SchemaJson(e),
            })?;
            schema::check(&schema).map_err(Invalid::Schema)
        }
        Constraint::StructuralTag(t) if t.trim().is_empty() => Err(Invalid::TagEmpty),
        Constraint::StructuralTag(t) => {
            let limit = limits::constraint_json_nesting_max + limits::constraint_tag_wrapper_nesting_max;
            let tag = parse_bounded(t, limit).map_err(|e| match e {
                Parsed::TooDeep => Invalid::TooDeep,
                Parsed::Bad(e) => Invalid::Tag(e),
            })?;
            tag::check(&tag).map_err(Invalid::Tag)
        }
    }
}

enum Parsed {
    TooDeep,
    Bad(String),
}

/// JSON text nested at most `limit` objects/arrays deep, measured on the text before parsing
/// (so nothing recursive ever sees a deeper document).
fn parse_bounded(text: &str, limit: usize) -> Result<Value, Parsed> {
    if nesting(text) > limit {
        return Err(Parsed::TooDeep);
    }
    serde_json::from_str(text).map_err(|e| Parsed::Bad(e.to_string()))
}

/// The deepest object/array nesting of JSON text (brackets inside strings do not count).
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_told_apart() {
        let deep = format!("{}{}", "{\"a\":".repeat(65), "1".to_string() + &"}".repeat(65));
        let cases: Vec<(Constraint, Option<&str>)> = vec![
            (Constraint::JsonObject, None),
            (Constraint::Regex("[ab]+".into()), None),
            (Constraint::Regex("((((".into()), Some("Regex(\"Regex parsing error")),
            (Constraint::Regex("a\0".into()), Some("RegexNul")),
            (Constraint::Grammar("root ::= \"a\"".into()), None),
            (Constraint::Grammar("root ::= (((".into()), Some("Grammar(")),
            (Constraint::Grammar("start: \"a\"".into()), None),
            (Constraint::Grammar("((((".into()), Some("Grammar(")),
            (Constraint::JsonSchema("{\"type\":\"object\"}".into()), None),
            (Constraint::JsonSchema("{\"type\":\"foo\"}".into()), Some("Schema(\"Unsupported type")),
            (Constraint::JsonSchema("{\"$ref\":\"#/$defs/x\"}".into()), Some("Cannot find field $defs")),
            (Constraint::JsonSchema(deep), Some("TooDeep")),
            (Constraint::StructuralTag("not json".into()), Some("Tag(")),
            (Constraint::StructuralTag(" ".into()), Some("TagEmpty")),
        ];
        for (c, want) in cases {
            match (check(&c), want) {
                (Ok(()), None) => {}
                (Err(e), Some(w)) => {
                    assert!(format!("{e:?}").contains(w), "{c:?}: {e:?}");
                    assert!(!e.detail().is_empty(), "{c:?}");
                }
                (got, _) => panic!("{c:?}: {got:?}"),
            }
        }
    }

    #[test]
    fn nesting_ignores_brackets_in_strings() {
        assert_eq!(nesting(r#"{"a": "[[[[{{", "b": [1, {"c": "\"]"}]}"#), 3);
        assert_eq!(nesting("1"), 0);
    }
}
