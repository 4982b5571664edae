//! The output parse stage: reasoning split, then tool-call extraction, per choice.
//!
//! Text flows decoded delta → reasoning parser → (reasoning, content) → tool-call parser →
//! (content, calls). gpt-oss's Harmony output is read from the token ids instead, by channel
//! (`shardgate_parsers::harmony`). The stage gives every call its id on its first delta and
//! keeps the whole result. Plain text (completions) has no parse stage.

use super::constraint::ForcedTool;
use crate::error::ApiError;
use openai_harmony::HarmonyEncoding;
use shardgate_parsers::harmony::{HarmonyDelta, HarmonyStream};
use shardgate_parsers::reasoning::{create_reasoning_parser, ReasoningParser};
use shardgate_parsers::tool::forced::{NamedCall, RequiredCalls};
use shardgate_parsers::tool::{create_tool_parser, tool_call_id, ToolParser, ToolSpec};

/// What a request asks of the parse stage.
#[derive(Debug, Clone, Default)]
pub struct ParseSpec {
    pub reasoning_parser: Option<&'static str>,
    /// Set only when the request has tools and may call them.
    pub tool_parser: Option<&'static str>,
    pub tools: Vec<ToolSpec>,
    /// Thinking is on for this request: the reasoning parser starts in reasoning.
    pub force_reasoning_start: bool,
    /// Off: reasoning text stays in the content; no reasoning parser runs, so the text stays
    /// whole and in order (markers included), as SGLang and SMG answer.
    pub separate_reasoning: bool,
    /// For tool-call ids (Kimi formats count calls across the conversation).
    pub model_name: String,
    pub prior_tool_calls: usize,
    /// The request forced a call: the output is constrained JSON, read instead of the model's
    /// own call syntax (Harmony's is constrained only around the call, and read by channel).
    pub forced: Option<ForcedTool>,
    /// A forced call may be several calls (read only with `forced`).
    pub parallel_tool_calls: bool,
    /// The model speaks Harmony: its output is parsed by channel, from the token ids (the
    /// text parsers above are not used).
    pub harmony: Option<HarmonyEncoding>,
}

impl ParseSpec {
    pub fn is_active(&self) -> bool {
        self.reasoning_parser.is_some() || self.tool_parser.is_some() || self.forced.is_some() || self.harmony.is_some()
    }
}

/// One piece of a call as the API sends it: the first piece carries id and name.
#[derive(Debug, Clone, PartialEq)]
pub struct CallDelta {
    pub index: usize,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: String,
}

/// What one step of the stage produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedDelta {
    pub content: String,
    pub reasoning: String,
    pub calls: Vec<CallDelta>,
}

impl ParsedDelta {
    pub fn is_empty(&self) -> bool {
        self.content.is_empty() && self.reasoning.is_empty() && self.calls.is_empty()
    }

    /// Plain text, for choices without a parse stage.
    pub fn text(content: String) -> Self {
        ParsedDelta { content, ..Default::default() }
    }
}

/// A whole call, for non-streamed responses.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// The accumulated parse result of a choice.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    pub content: String,
    pub reasoning: String,
    pub calls: Vec<ToolCall>,
}

pub struct OutputParser {
    reasoning: Option<Box<dyn ReasoningParser>>,
    tool: Option<Box<dyn ToolParser>>,
    /// Harmony's channels, read from token ids; the text parsers are then unused.
    harmony: Option<HarmonyStream>,
    separate_reasoning: bool,
    model_name: String,
    first_call_number: usize,
    pub parsed: Parsed,
}

impl OutputParser {
    pub fn new(spec: &ParseSpec) -> Result<Self, ApiError> {
        if let Some(encoding) = &spec.harmony {
            return Ok(OutputParser {
                reasoning: None,
                tool: None,
                harmony: Some(HarmonyStream::new(encoding).map_err(ApiError::internal)?),
                separate_reasoning: spec.separate_reasoning,
                model_name: spec.model_name.clone(),
                first_call_number: spec.prior_tool_calls,
                parsed: Parsed::default(),
            });
        }
        let reasoning = match spec.reasoning_parser.filter(|_| spec.separate_reasoning) {
            Some(name) => Some(
                create_reasoning_parser(name, spec.force_reasoning_start)
                    .map_err(|e| ApiError::internal(e.to_string()))?,
            ),
            None => None,
        };
        let tool: Option<Box<dyn ToolParser>> = match (&spec.forced, spec.tool_parser) {
            (Some(ForcedTool::Named(name)), _) => Some(Box::new(NamedCall::new(name))),
            (Some(ForcedTool::Required), _) => Some(Box::new(RequiredCalls::new())),
            (None, Some(name)) => {
                Some(create_tool_parser(name, &spec.tools).map_err(|e| ApiError::internal(e.to_string()))?)
            }
            (None, None) => None,
        };
        Ok(OutputParser {
            reasoning,
            tool,
            harmony: None,
            separate_reasoning: spec.separate_reasoning,
            model_name: spec.model_name.clone(),
            first_call_number: spec.prior_tool_calls,
            parsed: Parsed::default(),
        })
    }

    pub fn has_calls(&self) -> bool {
        !self.parsed.calls.is_empty()
    }

    /// Whether a choice the engine ended normally finishes with `tool_calls`: whenever it made
    /// calls, forced ones included (named, `required`), which is SMG's documented rule and
    /// what agent loops test for (vLLM answers `stop` for a named call).
    pub fn ends_in_tool_calls(&self) -> bool {
        self.has_calls()
    }

    /// Generated token ids, for a stage that reads them (Harmony); text stages read `push`.
    pub fn push_tokens(&mut self, ids: &[u32]) {
        if let Some(h) = &mut self.harmony {
            for &id in ids {
                h.push(id);
            }
        }
    }

    /// The next piece of text; a Harmony stage hands out what its tokens produced instead.
    pub fn push(&mut self, text: &str) -> ParsedDelta {
        if let Some(h) = &mut self.harmony {
            let delta = h.take();
            return self.harmony_delta(delta);
        }
        let (reasoning, content) = match &mut self.reasoning {
            Some(r) => {
                let d = r.push(text);
                (d.reasoning, d.content)
            }
            None => (String::new(), text.to_string()),
        };
        self.after_reasoning(reasoning, content, false)
    }

    /// Ends the stream: releases what every parser held back.
    pub fn finish(&mut self) -> ParsedDelta {
        if let Some(h) = &mut self.harmony {
            h.finish();
            let delta = h.take();
            return self.harmony_delta(delta);
        }
        let (reasoning, content) = match &mut self.reasoning {
            Some(r) => {
                let d = r.finish();
                (d.reasoning, d.content)
            }
            None => (String::new(), String::new()),
        };
        self.after_reasoning(reasoning, content, true)
    }

    fn after_reasoning(&mut self, reasoning: String, content: String, last: bool) -> ParsedDelta {
        let mut out = ParsedDelta { reasoning, ..Default::default() };
        match &mut self.tool {
            Some(t) => {
                let mut d = t.push(&content);
                if last {
                    let tail = t.finish();
                    d.content.push_str(&tail.content);
                    d.calls.extend(tail.calls);
                }
                out.content.push_str(&d.content);
                for call in d.calls {
                    out.calls.push(self.track_call(call.index, call.name, call.arguments));
                }
            }
            None => out.content.push_str(&content),
        }
        self.parsed.content.push_str(&out.content);
        self.parsed.reasoning.push_str(&out.reasoning);
        out
    }

    /// A Harmony step as the stage's delta: calls get their ids; with `separate_reasoning` off
    /// the reasoning stays in the content, as every other parser leaves it.
    fn harmony_delta(&mut self, h: HarmonyDelta) -> ParsedDelta {
        let mut out = ParsedDelta::default();
        if self.separate_reasoning {
            out.reasoning = h.reasoning;
        } else {
            out.content.push_str(&h.reasoning);
        }
        out.content.push_str(&h.content);
        for call in h.calls {
            out.calls.push(self.track_call(call.index, call.name, call.arguments));
        }
        self.parsed.content.push_str(&out.content);
        self.parsed.reasoning.push_str(&out.reasoning);
        out
    }

    /// Records a call piece; the first piece of a call gets the call's id.
    fn track_call(&mut self, index: usize, name: Option<String>, arguments: String) -> CallDelta {
        let mut id = None;
        if index >= self.parsed.calls.len() {
            debug_assert_eq!(index, self.parsed.calls.len(), "tool calls must arrive in index order");
            let fname = name.clone().unwrap_or_default();
            let call_id = tool_call_id(&self.model_name, &fname, self.first_call_number + index);
            self.parsed.calls.push(ToolCall { id: call_id.clone(), name: fname, arguments: String::new() });
            id = Some(call_id);
        }
        if let Some(call) = self.parsed.calls.get_mut(index) {
            call.arguments.push_str(&arguments);
        }
        CallDelta { index, id, name, arguments }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(separate_reasoning: bool) -> ParseSpec {
        ParseSpec {
            reasoning_parser: Some("qwen3"),
            tool_parser: Some("qwen"),
            tools: vec![ToolSpec { name: "f".into(), parameters: None }],
            force_reasoning_start: false,
            separate_reasoning,
            model_name: "qwen3".into(),
            prior_tool_calls: 0,
            forced: None,
            parallel_tool_calls: true,
            harmony: None,
        }
    }

    /// Streamed at every split point: the same result as one piece, pieces in order.
    #[test]
    fn reasoning_kept_in_content_stays_whole_and_in_order() {
        let text = "Hi <think>plan</think>ok <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
        for (separate, content, reasoning) in [(false, "Hi <think>plan</think>ok ", ""), (true, "Hi ok ", "plan")] {
            for split in 0..=text.len() {
                if !text.is_char_boundary(split) {
                    continue;
                }
                let mut p = OutputParser::new(&spec(separate)).unwrap();
                let mut streamed = ParsedDelta::default();
                for piece in [&text[..split], &text[split..]] {
                    let d = p.push(piece);
                    streamed.content.push_str(&d.content);
                    streamed.reasoning.push_str(&d.reasoning);
                }
                let d = p.finish();
                streamed.content.push_str(&d.content);
                streamed.reasoning.push_str(&d.reasoning);
                assert_eq!(streamed.content, content, "separate {separate}, split {split}");
                assert_eq!(streamed.reasoning, reasoning, "separate {separate}, split {split}");
                assert_eq!(p.parsed.content, content);
                assert_eq!(p.parsed.calls.len(), 1, "separate {separate}, split {split}");
            }
        }
    }
}
