//! The constraint that forces a gpt-oss (Harmony) model to call a tool.
//!
//! A JSON schema over the whole output would make the model write bare JSON where Harmony
//! wants channels, so the constraint is an xgrammar structural tag that leaves Harmony's
//! framing to the model and pins only what a call needs, the tag vLLM builds for gpt-oss
//! (`get_harmony_structural_tag`), with every tool's arguments held to its schema (vLLM's
//! `--tool-strict-level parameter`; shardgate has no per-tool `strict`). The prompt ends in
//! `<|start|>assistant`; from there the output is:
//!
//! 1. optionally an `analysis` message (free text, then `<|end|><|start|>assistant`);
//! 2. optionally a recipient-less `commentary` message (a preamble), framed the same way;
//! 3. exactly one call header of a forced tool (`required`: any declared tool; a named
//!    function: that one), in either order Harmony allows (` to=functions.NAME<|channel|>C`
//!    or `<|channel|>C to=functions.NAME`), on any of the `commentary`, `analysis` and `final`
//!    channels, with ` json` or ` <|constrain|>json`, then `<|message|>`;
//! 4. the arguments, JSON valid under the tool's `parameters` (any JSON without them);
//! 5. `<|end|>`, or nothing: the stop token `<|call|>` follows, and xgrammar may not name a
//!    stop token inside a constraint.
//!
//! The tag is written in xgrammar's own serialization (every field, defaults included), so it
//! is byte for byte what vLLM sends (`crates/text/tests/goldens/harmony_tool_tags.json`).

use serde_json::{json, Value};

use super::constraint::{check, ForcedTool};
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
        let arguments = json!({"type": "json_schema", "json_schema": tool.parameters.clone().unwrap_or(Value::Bool(true)),
                               "style": "json", "any_order": false, "max_whitespace_cnt": null, "excludes": []});
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
    let message = |channel: &str| {
        json!({"type": "optional", "content": {"type": "sequence", "elements": [
            {"type": "tag", "begin": format!("<|channel|>{channel}<|message|>"),
             "content": {"type": "any_text", "excludes": [], "max_tokens": null, "max_chars": null}, "end": "<|end|>"},
            {"type": "const_string", "value": "<|start|>assistant"}]}})
    };
    let elements = [message("analysis"), message("commentary"), json!({"type": "or", "elements": calls})];
    Ok(json!({"type": "structural_tag", "format": {"type": "sequence", "elements": elements}}).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every golden case: vLLM's tag for its tools and `tool_choice`.
    #[test]
    fn tags_match_vllms() {
        let golden: Value =
            serde_json::from_str(include_str!("../../crates/text/tests/goldens/harmony_tool_tags.json")).unwrap();
        let cases = golden["cases"].as_array().unwrap();
        assert!(cases.len() >= 8, "{} cases", cases.len());
        for case in cases {
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
