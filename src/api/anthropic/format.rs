//! Messages responses from the pipeline's events: Anthropic's named SSE events, or one
//! `message` body.
//!
//! A stream is `message_start` (the message without content, and the prompt's token count:
//! the pipeline's usage comes only at the end, so the count is given when the format is made),
//! one `ping`, then block after block, each a `content_block_start`, its deltas and a
//! `content_block_stop`; then `message_delta` (the stop reason and the usage) and
//! `message_stop`, and no `[DONE]`. A block closes when the output changes kind (thinking →
//! text → tool call k → tool call k + 1), a thinking block with a `signature_delta` last;
//! indexes count from 0. A body has the same blocks: thinking, text, tool calls.
//!
//! Choices this API leaves open, decided here:
//! - the thinking `signature` is empty (it is Anthropic's proof that its own model wrote the
//!   thinking; nothing here can sign, and this gateway reads none back);
//! - a tool call's id is the parse stage's, `call_…` written `toolu_…` (model-specific ids
//!   such as Kimi's `functions.f:0` stay as they are: the template reads them back);
//! - a tool call's `input` is its arguments as JSON; arguments the model left unparsable are
//!   passed as the raw string (a stream carries them as `partial_json` all the same, which
//!   the Anthropic SDK refuses to parse), so nothing the model wrote is lost silently;
//! - an answer without any output still has one (empty) text block, so `content[0]` exists,
//!   as in vLLM's answers;
//! - `input_tokens` is the whole prompt, `cache_read_input_tokens` the part of it the engine
//!   had cached (as vLLM reports them; Anthropic counts the two apart);
//! - with `disable_parallel_tool_use`, only the first call is answered.

use crate::engine::{FinishReason, StopReason};
use crate::error::{ApiError, Envelope};
use crate::pipeline::choice::Finish;
use crate::pipeline::events::{Collected, Delta, Event, Usage};
use crate::pipeline::parse::CallDelta;

use super::invalid::named;
use crate::api::sink::{Format, SseOut};
use shardgate_util::json::{push_int, push_str};

/// Renders Messages responses and events.
pub struct MessagesFormat {
    id: String,
    model: String,
    /// The prompt's token count, for `message_start`.
    input_tokens: u64,
    /// `disable_parallel_tool_use`: calls after the first are not answered.
    one_call: bool,
    /// The block being streamed.
    open: Option<Block>,
    /// Blocks started so far: the next block's index.
    started: u32,
    /// Each streamed call's id and name, by call index (a call whose block closed and whose
    /// arguments go on opens a block again under them).
    calls: Vec<(String, String)>,
    stop: Stop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Thinking,
    Text,
    /// A tool call, by its index among the choice's calls.
    Tool(usize),
}

/// `stop_reason` and `stop_sequence`.
#[derive(Debug, Clone, Default, PartialEq)]
struct Stop {
    reason: Option<&'static str>,
    sequence: Option<String>,
}

impl Stop {
    /// Ended in tool calls: `tool_use`; at a stop string: `stop_sequence` and the string; at
    /// EOS or a stop token: `end_turn`; at the token limit: `max_tokens`. An aborted or failed
    /// choice has none of Anthropic's reasons.
    fn of(finish: Option<&Finish>, tool_calls: bool) -> Stop {
        let reason = |r| Stop { reason: Some(r), sequence: None };
        if tool_calls {
            return reason("tool_use");
        }
        let Some(finish) = finish else { return reason("end_turn") };
        match (finish.reason, &finish.stop_reason) {
            (FinishReason::Stop, Some(StopReason::Text(s))) => {
                Stop { reason: Some("stop_sequence"), sequence: Some(s.clone()) }
            }
            (FinishReason::Stop | FinishReason::Repetition, _) => reason("end_turn"),
            (FinishReason::Length, _) => reason("max_tokens"),
            (FinishReason::Abort | FinishReason::Error, _) => Stop::default(),
        }
    }

    /// `"stop_reason":…,"stop_sequence":…` (no braces).
    fn push(&self, out: &mut String) {
        out.push_str("\"stop_reason\":");
        match self.reason {
            Some(r) => push_str(out, r),
            None => out.push_str("null"),
        }
        out.push_str(",\"stop_sequence\":");
        match &self.sequence {
            Some(s) => push_str(out, s),
            None => out.push_str("null"),
        }
    }
}

impl MessagesFormat {
    /// `input_tokens`: the prompt's token count; `one_call`: `disable_parallel_tool_use`.
    pub fn new(id: String, model: String, input_tokens: u64, one_call: bool) -> Self {
        MessagesFormat {
            id,
            model,
            input_tokens,
            one_call,
            open: None,
            started: 0,
            calls: Vec::new(),
            stop: Stop::default(),
        }
    }

    /// `{"id":…,"type":"message","role":"assistant","model":…,"content":[` (open).
    fn message_open(&self, out: &mut String) {
        out.push_str("{\"id\":");
        push_str(out, &self.id);
        out.push_str(",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
        push_str(out, &self.model);
        out.push_str(",\"content\":[");
    }

    fn message_start(&self) -> String {
        let mut s = String::with_capacity(320);
        s.push_str("{\"type\":\"message_start\",\"message\":");
        self.message_open(&mut s);
        s.push_str("],");
        Stop::default().push(&mut s);
        s.push_str(",\"usage\":");
        push_usage(&mut s, &Usage { prompt_tokens: self.input_tokens, completion_tokens: 0, cached_tokens: 0 });
        s.push_str("}}");
        s
    }

    /// Closes the open block and starts `block`, whose `content_block` is `content_block`.
    fn start_block(&mut self, block: Block, content_block: &str, out: &mut SseOut) {
        self.close_block(out);
        let mut s = String::with_capacity(64 + content_block.len());
        s.push_str("{\"type\":\"content_block_start\",\"index\":");
        push_int(&mut s, self.started);
        s.push_str(",\"content_block\":");
        s.push_str(content_block);
        s.push('}');
        out.push_named("content_block_start", s);
        self.open = Some(block);
        self.started += 1;
    }

    /// The open block's `content_block_stop`, after a thinking block's `signature_delta`.
    fn close_block(&mut self, out: &mut SseOut) {
        let Some(block) = self.open.take() else { return };
        if block == Block::Thinking {
            self.block_delta("signature_delta", "signature", "", out);
        }
        let mut s = String::with_capacity(48);
        s.push_str("{\"type\":\"content_block_stop\",\"index\":");
        push_int(&mut s, self.started - 1);
        s.push('}');
        out.push_named("content_block_stop", s);
    }

    /// A `content_block_delta` of the open block: `{"type": kind, field: text}`.
    fn block_delta(&self, kind: &str, field: &str, text: &str, out: &mut SseOut) {
        let mut s = String::with_capacity(96 + text.len());
        s.push_str("{\"type\":\"content_block_delta\",\"index\":");
        push_int(&mut s, self.started - 1);
        s.push_str(",\"delta\":{\"type\":\"");
        s.push_str(kind);
        s.push_str("\",\"");
        s.push_str(field);
        s.push_str("\":");
        push_str(&mut s, text);
        s.push_str("}}");
        out.push_named("content_block_delta", s);
    }

    /// Reasoning, then text, then tool-call pieces, each in its block.
    fn stream_delta(&mut self, d: &Delta, out: &mut SseOut) {
        let output = &d.output;
        if !output.reasoning.is_empty() {
            if self.open != Some(Block::Thinking) {
                self.start_block(Block::Thinking, "{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}", out);
            }
            self.block_delta("thinking_delta", "thinking", &output.reasoning, out);
        }
        if !output.content.is_empty() {
            if self.open != Some(Block::Text) {
                self.start_block(Block::Text, "{\"type\":\"text\",\"text\":\"\"}", out);
            }
            self.block_delta("text_delta", "text", &output.content, out);
        }
        let one_call = self.one_call;
        for call in output.calls.iter().filter(|c| !one_call || c.index == 0) {
            if self.open != Some(Block::Tool(call.index)) {
                let start = self.tool_use_start(call);
                self.start_block(Block::Tool(call.index), &start, out);
            }
            if !call.arguments.is_empty() {
                self.block_delta("input_json_delta", "partial_json", &call.arguments, out);
            }
        }
    }

    /// A call's `content_block`: `{"type":"tool_use","id","name","input":{}}`.
    fn tool_use_start(&mut self, call: &CallDelta) -> String {
        if call.index >= self.calls.len() {
            let id = call.id.as_deref().map(tool_use_id).unwrap_or_default();
            self.calls.resize(call.index + 1, (String::new(), String::new()));
            self.calls[call.index] = (id, call.name.clone().unwrap_or_default());
        }
        let (id, name) = &self.calls[call.index];
        let mut s = String::with_capacity(64 + id.len() + name.len());
        s.push_str("{\"type\":\"tool_use\",\"id\":");
        push_str(&mut s, id);
        s.push_str(",\"name\":");
        push_str(&mut s, name);
        s.push_str(",\"input\":{}}");
        s
    }

    /// The choice ended: its last block closes (an answer with none gets an empty text
    /// block), and its stop reason waits for the usage.
    fn stream_finished(&mut self, finish: &Finish, tool_calls: bool, out: &mut SseOut) {
        if self.started == 0 {
            self.start_block(Block::Text, "{\"type\":\"text\",\"text\":\"\"}", out);
        }
        self.close_block(out);
        self.stop = Stop::of(Some(finish), tool_calls);
    }

    fn stream_end(&self, usage: &Usage, out: &mut SseOut) {
        let mut s = String::with_capacity(224);
        s.push_str("{\"type\":\"message_delta\",\"delta\":{");
        self.stop.push(&mut s);
        s.push_str("},\"usage\":");
        push_usage(&mut s, usage);
        s.push('}');
        out.push_named("message_delta", s);
        out.push_named("message_stop", "{\"type\":\"message_stop\"}".to_string());
    }
}

/// `{"input_tokens","output_tokens","cache_read_input_tokens","cache_creation_input_tokens"}`
/// (nothing is written to a cache on request: creation is always 0).
fn push_usage(out: &mut String, u: &Usage) {
    out.push_str("{\"input_tokens\":");
    push_int(out, u.prompt_tokens);
    out.push_str(",\"output_tokens\":");
    push_int(out, u.completion_tokens);
    out.push_str(",\"cache_read_input_tokens\":");
    push_int(out, u.cached_tokens);
    out.push_str(",\"cache_creation_input_tokens\":0}");
}

/// Anthropic's id prefix on the parse stage's call ids.
fn tool_use_id(call_id: &str) -> String {
    match call_id.strip_prefix("call_") {
        Some(rest) => format!("toolu_{rest}"),
        None => call_id.to_string(),
    }
}

/// A call's arguments as `input`: the JSON itself, `{}` for none, or the raw text as a string
/// when it is not JSON.
fn push_input(out: &mut String, arguments: &str) {
    let arguments = arguments.trim();
    if arguments.is_empty() {
        out.push_str("{}");
    } else if serde_json::from_str::<serde::de::IgnoredAny>(arguments).is_ok() {
        out.push_str(arguments);
    } else {
        push_str(out, arguments);
    }
}

/// A body's content blocks: thinking, text, tool calls; one empty text block for none.
fn push_blocks(out: &mut String, c: &Collected, one_call: bool) {
    let mut blocks = 0;
    let mut next = |out: &mut String| {
        if blocks > 0 {
            out.push(',');
        }
        blocks += 1;
    };
    if !c.reasoning.is_empty() {
        next(out);
        out.push_str("{\"type\":\"thinking\",\"thinking\":");
        push_str(out, &c.reasoning);
        out.push_str(",\"signature\":\"\"}");
    }
    if !c.content.is_empty() {
        next(out);
        out.push_str("{\"type\":\"text\",\"text\":");
        push_str(out, &c.content);
        out.push('}');
    }
    for call in c.calls.iter().take(if one_call { 1 } else { usize::MAX }) {
        next(out);
        out.push_str("{\"type\":\"tool_use\",\"id\":");
        push_str(out, &tool_use_id(&call.id));
        out.push_str(",\"name\":");
        push_str(out, &call.name);
        out.push_str(",\"input\":");
        push_input(out, &call.arguments);
        out.push('}');
    }
    if blocks == 0 {
        out.push_str("{\"type\":\"text\",\"text\":\"\"}");
    }
}

impl Format for MessagesFormat {
    fn stream(&mut self, event: &Event, out: &mut SseOut) {
        match event {
            Event::Start { .. } => {
                out.push_named("message_start", self.message_start());
                out.push_named("ping", "{\"type\":\"ping\"}".to_string());
            }
            Event::PromptLogprobs { .. } => {}
            Event::Delta(d) => self.stream_delta(d, out),
            Event::Finished(f) => self.stream_finished(&f.finish, f.tool_calls, out),
            Event::Usage(u) => self.stream_end(u, out),
        }
    }

    fn end_stream(&mut self, _out: &mut SseOut) {}

    fn body(&mut self, choices: &[Collected], usage: &Usage) -> String {
        let empty = Collected::default();
        let c = choices.first().unwrap_or(&empty);
        let mut s = String::with_capacity(320 + c.content.len() + c.reasoning.len());
        self.message_open(&mut s);
        push_blocks(&mut s, c, self.one_call);
        s.push_str("],");
        Stop::of(c.finish.as_ref(), c.tool_calls).push(&mut s);
        s.push_str(",\"usage\":");
        push_usage(&mut s, usage);
        s.push('}');
        s
    }

    fn client_error(&self, e: &ApiError) -> ApiError {
        named(e.clone())
    }

    fn stream_error(&mut self, e: &ApiError, out: &mut SseOut) {
        out.push_named("error", e.to_json_in(Envelope::Anthropic));
    }
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
