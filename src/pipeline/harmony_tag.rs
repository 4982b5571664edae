//! The constraints of a gpt-oss (Harmony) request: a forced tool call, and a requested output
//! format (`response_format`, `structured_outputs`).
//!
//! A JSON schema (or any grammar) over the whole output would make the model write bare JSON
//! where Harmony wants channels, so both become an xgrammar structural tag that leaves
//! Harmony's framing to the model and pins only the part the request asks for, the tags vLLM
//! builds for gpt-oss (`get_harmony_structural_tag`, `_adjust_output_format`). The prompt ends
//! in `<|start|>assistant`; from there the output is:
//!
//! 1. optionally an `analysis` message (free text, then `<|end|><|start|>assistant`);
//! 2. for a forced call, optionally a recipient-less `commentary` message (a preamble), framed
//!    the same way; then exactly one call header of a forced tool (`required`: any declared
//!    tool; a named function: that one), in either order Harmony allows
//!    (` to=functions.NAME<|channel|>C` or `<|channel|>C to=functions.NAME`), on any of the
//!    `commentary`, `analysis` and `final` channels, with ` json` or ` <|constrain|>json`, then
//!    `<|message|>`, and the arguments, JSON valid under the tool's `parameters` (any JSON
//!    without them): every tool's arguments are held to its schema (vLLM's
//!    `--tool-strict-level parameter`; shardgate has no per-tool `strict`);
//! 3. for an output format, the `final` message holding it: `<|channel|>final json<|message|>`
//!    or `final <|constrain|>json` for a JSON schema or object, `<|channel|>final<|message|>`
//!    for a regex, a grammar (a choice list arrives as one) or a structural tag's format (the
//!    older `structures` form as the triggered tags vLLM turns it into);
//! 4. `<|end|>`, or nothing: the stop token (`<|call|>`, `<|return|>`) follows, and xgrammar
//!    may not name a stop token inside a constraint.
//!
//! The tags are written in xgrammar's own serialization (every field, defaults included), so
//! they are byte for byte what vLLM sends (`crates/text/tests/goldens/harmony_tags.json`);
//! a client's structural tag format goes in as the client wrote it (xgrammar fills its
//! defaults).

use serde_json::{json, Value};

use super::constraint::{check, ForcedTool};
use super::constraint_check::{is_lark, Invalid as Unreadable};
use super::invalid::{Field, Invalid, Problem};
use crate::engine::Constraint;
use shardgate_parsers::tool::ToolSpec;

const CHANNELS: [&str; 3] = ["commentary", "analysis", "final"];
const CONSTRAINS: [&str; 2] = [" json", " <|constrain|>json"];

/// The constraint that forces the call, its tools' parameter schemas checked like any other
/// schema (xgrammar reads them only inside the tag).
pub fn tool_constraint(forced: &ForcedTool, tools: &[ToolSpec]) -> Result<Constraint, Invalid> {
    for params in tools.iter().filter_map(|t| t.parameters.as_ref()) {
        check(&Constraint::JsonSchema(params.to_string()))?;
    }
    let tag = Constraint::StructuralTag(tool_tag(forced, tools)?);
    check(&tag)?;
    Ok(tag)
}

/// The structural tag (JSON text) that forces the call.
fn tool_tag(forced: &ForcedTool, tools: &[ToolSpec]) -> Result<String, Invalid> {
    let callable: Vec<&ToolSpec> = match forced {
        ForcedTool::Required => tools.iter().collect(),
        ForcedTool::Named(name) => {
            let tool = tools
                .iter()
                .find(|t| &t.name == name)
                .ok_or_else(|| Invalid::new(Field::ToolChoice, Problem::UnknownTool(name.clone())))?;
            vec![tool]
        }
    };
    let mut calls = Vec::new();
    for tool in callable {
        let arguments = json_schema(tool.parameters.clone().unwrap_or(Value::Bool(true)));
        let name = &tool.name;
        let heads: [fn(&str, &str, &str) -> String; 2] = [
            |n: &str, ch: &str, c: &str| format!(" to=functions.{n}<|channel|>{ch}{c}<|message|>"),
            |n: &str, ch: &str, c: &str| format!("<|channel|>{ch} to=functions.{n}{c}<|message|>"),
        ];
        for head in heads {
            for constrain in CONSTRAINS {
                for channel in CHANNELS {
                    calls.push(json!({"type": "tag", "begin": head(name, channel, constrain),
                                      "content": arguments, "end": ["<|end|>", ""]}));
                }
            }
        }
    }
    let elements =
        [optional_message("analysis"), optional_message("commentary"), json!({"type": "or", "elements": calls})];
    Ok(json!({"type": "structural_tag", "format": {"type": "sequence", "elements": elements}}).to_string())
}

/// The constraint that holds a requested output format to the `final` message.
pub fn output_constraint(requested: &Constraint) -> Result<Constraint, Invalid> {
    check(requested)?;
    let refuse = |why: Unreadable| {
        tracing::info!("constraint refused before the engine: {}", why.detail());
        Invalid::new(Field::Constraint, Problem::Unsatisfiable(why))
    };
    let final_message = |constrain: &str, content: Value| {
        json!({"type": "tag", "begin": format!("<|channel|>final{constrain}<|message|>"), "content": content,
               "end": ["<|end|>", ""]})
    };
    let json_final = |schema: Value| {
        let content = json_schema(schema);
        json!({"type": "or", "elements": CONSTRAINS.map(|c| final_message(c, content.clone()))})
    };
    let answer = match requested {
        Constraint::JsonSchema(s) => {
            json_final(serde_json::from_str(s).map_err(|e| refuse(Unreadable::SchemaJson(e.to_string())))?)
        }
        Constraint::JsonObject => json_final(json!({"type": "object"})),
        Constraint::Regex(pattern) => final_message("", json!({"type": "regex", "pattern": pattern})),
        // A structural tag's grammar is EBNF only (vLLM converts Lark; shardgate does not).
        Constraint::Grammar(grammar) if is_lark(grammar) => {
            return Err(refuse(Unreadable::Grammar("a Harmony model's output takes an EBNF grammar, not Lark".into())))
        }
        Constraint::Grammar(grammar) => final_message("", json!({"type": "grammar", "grammar": grammar})),
        Constraint::StructuralTag(t) => {
            let tag: Value = serde_json::from_str(t).map_err(|e| refuse(Unreadable::Tag(e.to_string())))?;
            final_message("", tag_format(&tag))
        }
    };
    let elements = [optional_message("analysis"), answer];
    let tag = Constraint::StructuralTag(
        json!({"type": "structural_tag", "format": {"type": "sequence", "elements": elements}}).to_string(),
    );
    check(&tag)?;
    Ok(tag)
}

/// A client's structural tag as a format: its `format`, or the older `structures` form as
/// triggered tags.
fn tag_format(tag: &Value) -> Value {
    let Some(structures) = tag.get("structures").and_then(Value::as_array) else {
        return tag.get("format").cloned().unwrap_or(Value::Null);
    };
    let tags: Vec<Value> = structures
        .iter()
        .map(|s| json!({"type": "tag", "begin": s["begin"], "content": json_schema(s["schema"].clone()), "end": s["end"]}))
        .collect();
    json!({"type": "triggered_tags", "triggers": tag["triggers"], "tags": tags, "at_least_one": false,
           "stop_after_first": false, "excludes": []})
}

fn json_schema(schema: Value) -> Value {
    json!({"type": "json_schema", "json_schema": schema, "style": "json", "any_order": false,
           "max_whitespace_cnt": null, "excludes": []})
}

/// A message on `channel` the model may write first: free text, then the next header.
fn optional_message(channel: &str) -> Value {
    json!({"type": "optional", "content": {"type": "sequence", "elements": [
        {"type": "tag", "begin": format!("<|channel|>{channel}<|message|>"),
         "content": {"type": "any_text", "excludes": [], "max_tokens": null, "max_chars": null}, "end": "<|end|>"},
        {"type": "const_string", "value": "<|start|>assistant"}]}})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every golden case: vLLM's tag for its tools and `tool_choice`.
    #[test]
    fn tags_match_vllms() {
        let golden: Value =
            serde_json::from_str(include_str!("../../crates/text/tests/goldens/harmony_tags.json")).unwrap();
        let cases = golden["cases"].as_array().unwrap();
        assert!(cases.len() >= 8, "{} cases", cases.len());
        for case in cases.iter().filter(|c| c.get("tools").is_some()) {
            let tools: Vec<ToolSpec> = case["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| ToolSpec {
                    name: t["function"]["name"].as_str().unwrap().into(),
                    parameters: t["function"].get("parameters").cloned(),
                })
                .collect();
            let forced = match &case["tool_choice"] {
                Value::String(s) if s == "required" => ForcedTool::Required,
                named => ForcedTool::Named(named["function"]["name"].as_str().unwrap().into()),
            };
            let ours: Value = serde_json::from_str(&tool_tag(&forced, &tools).unwrap()).unwrap();
            assert_eq!(ours, case["tag"], "{}", case["name"]);
        }
    }

    /// Every golden output format: vLLM's tag holding it to the final message.
    #[test]
    fn output_formats_match_vllms() {
        let golden: Value =
            serde_json::from_str(include_str!("../../crates/text/tests/goldens/harmony_tags.json")).unwrap();
        let cases: Vec<&Value> =
            golden["cases"].as_array().unwrap().iter().filter(|c| c.get("structured_outputs").is_some()).collect();
        assert_eq!(cases.len(), 6);
        for case in cases {
            let (kind, value) = case["structured_outputs"].as_object().unwrap().iter().next().unwrap();
            let text = || value.as_str().unwrap().to_string();
            let requested = match kind.as_str() {
                "json" => Constraint::JsonSchema(value.to_string()),
                "json_object" => Constraint::JsonObject,
                "regex" => Constraint::Regex(text()),
                "grammar" => Constraint::Grammar(text()),
                _ => Constraint::StructuralTag(text()),
            };
            let Ok(Constraint::StructuralTag(ours)) = output_constraint(&requested) else { panic!("{}", case["name"]) };
            assert_eq!(serde_json::from_str::<Value>(&ours).unwrap(), case["tag"], "{}", case["name"]);
        }
        let lark = Constraint::Grammar("start: \"a\"".into());
        assert_eq!(output_constraint(&lark).unwrap_err().field, Field::Constraint);
    }

    /// What the engine could not take is refused before it leaves.
    #[test]
    fn unknown_tools_and_broken_schemas_are_refused() {
        let ping = ToolSpec { name: "ping".into(), parameters: None };
        let broken = ToolSpec {
            name: "t".into(),
            parameters: Some(json!({"type": "object", "properties": {"a": {"type": "nope"}}})),
        };
        let unknown = tool_constraint(&ForcedTool::Named("nope".into()), std::slice::from_ref(&ping)).unwrap_err();
        assert_eq!(unknown, Invalid::new(Field::ToolChoice, Problem::UnknownTool("nope".into())));
        for forced in [ForcedTool::Named("t".into()), ForcedTool::Required] {
            let e = tool_constraint(&forced, &[ping.clone(), broken.clone()]).unwrap_err();
            assert_eq!(e.field, Field::Constraint, "{forced:?}");
        }
        assert!(matches!(tool_constraint(&ForcedTool::Required, &[ping]), Ok(Constraint::StructuralTag(_))));
    }
}
