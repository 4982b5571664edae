//! Test support for every API's `Format`: a choice's events as the pipeline hands them out for
//! an output split into any pieces, so that each API can check that what its streaming client
//! accumulates equals its one-shot body at every split point.

use crate::engine::FinishReason;
use crate::pipeline::choice::{Finish, TokenLogprob};
use crate::pipeline::events::{Delta, Event, Finished, Usage};
use crate::pipeline::parse::{OutputParser, ParseSpec, ParsedDelta};
use shardgate_parsers::tool::ToolSpec;

/// Reasoning, text and a tool call in Qwen's syntax (`qwen_spec` parses it).
pub const QWEN_TEXT: &str =
    "<think>plan \"a\"\n</think>Hello, wörld 🎉 <tool_call>\n{\"name\": \"get_weather\", \"arguments\": \
                    {\"city\": \"Paris\"}}\n</tool_call>";

/// Qwen3's reasoning and tool-call parsers, with one tool, `get_weather`.
pub fn qwen_spec() -> ParseSpec {
    ParseSpec {
        reasoning_parser: Some("qwen3"),
        tool_parser: Some("qwen"),
        tools: vec![ToolSpec { name: "get_weather".into(), parameters: None }],
        separate_reasoning: true,
        model_name: "m".into(),
        ..Default::default()
    }
}

/// One choice's events: `Start`, a `Delta` per piece (through the parse stage when `spec` is
/// given, which closes with the last piece; plain text with one logprob row per piece
/// otherwise), `Finished` (`Stop`), then `usage`.
pub fn choice_events(pieces: &[&str], spec: Option<&ParseSpec>, usage: Usage) -> Vec<Event> {
    let mut parser = spec.map(|s| OutputParser::new(s).expect("parsers exist"));
    let mut out = vec![Event::Start { choice: 0 }];
    for (k, piece) in pieces.iter().enumerate() {
        let mut output = match &mut parser {
            Some(p) => p.push(piece),
            None => ParsedDelta::text(piece.to_string()),
        };
        if let (Some(p), true) = (&mut parser, k + 1 == pieces.len()) {
            let tail = p.finish();
            output.content.push_str(&tail.content);
            output.reasoning.push_str(&tail.reasoning);
            output.calls.extend(tail.calls);
        }
        // One logprob row per piece, so that rows travel with text.
        let row = TokenLogprob {
            token: piece.to_string(),
            logprob: Some(-0.5),
            alternatives: vec![(piece.to_string(), -0.5)],
        };
        let logprobs = if parser.is_some() { Vec::new() } else { vec![row] };
        if !output.is_empty() || !logprobs.is_empty() {
            out.push(Event::Delta(Delta { choice: 0, output, logprobs, usage: None }));
        }
    }
    let tool_calls = parser.as_ref().is_some_and(OutputParser::ends_in_tool_calls);
    let finish = Finish { reason: FinishReason::Stop, stop_reason: None };
    out.push(Event::Finished(Finished { choice: 0, finish, tool_calls, usage: None }));
    out.push(Event::Usage(usage));
    out
}
