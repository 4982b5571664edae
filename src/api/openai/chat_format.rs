//! Chat completion responses from the pipeline's events: `chat.completion.chunk` SSE payloads
//! (a role chunk per choice, then reasoning, content and tool-call deltas, a finish chunk, and
//! a usage chunk when asked), or one `chat.completion` body.

use super::render::{
    finish_reason, push_chat_logprobs, push_done, push_header, push_stop_reason, push_stream_error, push_usage,
};
use crate::api::invalid::Names;
use crate::api::sink::{Format, SseOut};
use crate::error::ApiError;
use crate::pipeline::choice::TokenLogprob;
use crate::pipeline::events::{Collected, Delta, Event, Finished, Usage};
use shardgate_util::json::{push_int, push_str};

/// Renders chat completion responses and chunks.
pub struct ChatFormat {
    id: String,
    created: u64,
    model: String,
    /// `include_usage`: every chunk carries `"usage"` (null until the last), and a streamed
    /// response ends with a usage chunk.
    usage_field: bool,
    /// `top_logprobs` when logprobs were asked for.
    logprobs: Option<usize>,
    /// How this request names its fields in errors.
    names: Names,
}

impl ChatFormat {
    /// `usage_field`: every chunk carries `"usage"`; `logprobs`: the top logprobs asked for.
    pub fn new(
        id: String,
        created: u64,
        model: String,
        usage_field: bool,
        logprobs: Option<usize>,
        names: Names,
    ) -> Self {
        ChatFormat { id, created, model, usage_field, logprobs, names }
    }

    /// A chunk whose delta is one text field.
    fn delta_chunk(
        &self,
        choice: u32,
        field: &str,
        text: &str,
        logprobs: &[TokenLogprob],
        usage: Option<&Usage>,
    ) -> String {
        let mut s = String::with_capacity(160 + text.len());
        self.chunk_open(&mut s, choice);
        s.push_str("\"delta\":{\"");
        s.push_str(field);
        s.push_str("\":");
        push_str(&mut s, text);
        s.push_str("},");
        self.push_logprobs(&mut s, logprobs);
        s.push_str(",\"finish_reason\":null");
        self.chunk_close(&mut s, usage);
        s
    }

    /// `{"id":…,"object":"chat.completion.chunk",…,"choices":[{"index":i,` (open).
    fn chunk_open(&self, out: &mut String, choice: u32) {
        out.push('{');
        push_header(out, &self.id, "chat.completion.chunk", self.created, &self.model);
        out.push_str(",\"choices\":[{\"index\":");
        push_int(out, choice);
        out.push(',');
    }

    fn chunk_close(&self, out: &mut String, usage: Option<&Usage>) {
        out.push_str("}]");
        if self.usage_field {
            out.push_str(",\"usage\":");
            match usage {
                Some(u) => push_usage(out, u),
                None => out.push_str("null"),
            }
        }
        out.push('}');
    }

    fn push_logprobs(&self, out: &mut String, rows: &[TokenLogprob]) {
        out.push_str("\"logprobs\":");
        match self.logprobs {
            Some(top) => push_chat_logprobs(out, rows, top),
            None => out.push_str("null"),
        }
    }

    fn role_chunk(&self, choice: u32) -> String {
        let mut s = String::with_capacity(160);
        self.chunk_open(&mut s, choice);
        s.push_str("\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null");
        self.chunk_close(&mut s, None);
        s
    }

    /// Reasoning, then content (carrying the logprobs), then one chunk per tool-call piece.
    fn stream_delta(&self, out: &mut SseOut, d: &Delta) {
        let (output, usage) = (&d.output, d.usage.as_ref());
        if !output.reasoning.is_empty() {
            out.push(self.delta_chunk(d.choice, "reasoning_content", &output.reasoning, &[], usage));
        }
        if !output.content.is_empty() || (!d.logprobs.is_empty() && output.calls.is_empty()) {
            out.push(self.delta_chunk(d.choice, "content", &output.content, &d.logprobs, usage));
        }
        // One tool-call delta per chunk; id, type and name only on a call's first piece.
        for call in &output.calls {
            let mut s = String::with_capacity(192 + call.arguments.len());
            self.chunk_open(&mut s, d.choice);
            s.push_str("\"delta\":{\"tool_calls\":[{\"index\":");
            push_int(&mut s, call.index);
            if let Some(id) = &call.id {
                s.push_str(",\"id\":");
                push_str(&mut s, id);
                s.push_str(",\"type\":\"function\"");
            }
            s.push_str(",\"function\":{");
            if let Some(name) = &call.name {
                s.push_str("\"name\":");
                push_str(&mut s, name);
                s.push(',');
            }
            s.push_str("\"arguments\":");
            push_str(&mut s, &call.arguments);
            s.push_str("}}]},\"logprobs\":null,\"finish_reason\":null");
            self.chunk_close(&mut s, usage);
            out.push(s);
        }
    }

    fn finish_chunk(&self, f: &Finished) -> String {
        let mut s = String::with_capacity(192);
        self.chunk_open(&mut s, f.choice);
        s.push_str("\"delta\":{},\"logprobs\":null,\"finish_reason\":");
        push_str(&mut s, finish_reason(Some(&f.finish), f.tool_calls));
        s.push(',');
        push_stop_reason(&mut s, f.finish.stop_reason.as_ref());
        self.chunk_close(&mut s, f.usage.as_ref());
        s
    }

    fn usage_chunk(&self, usage: &Usage) -> String {
        let mut s = String::with_capacity(256);
        s.push('{');
        push_header(&mut s, &self.id, "chat.completion.chunk", self.created, &self.model);
        s.push_str(",\"choices\":[],\"usage\":");
        push_usage(&mut s, usage);
        s.push('}');
        s
    }
}

/// A non-streamed assistant message: content (null when only tool calls came back),
/// `reasoning_content` when there was reasoning, `tool_calls` when there were calls.
fn push_message(s: &mut String, c: &Collected) {
    s.push_str("{\"role\":\"assistant\",\"content\":");
    if !c.calls.is_empty() && c.content.trim().is_empty() {
        s.push_str("null");
    } else {
        push_str(s, &c.content);
    }
    if !c.reasoning.is_empty() {
        s.push_str(",\"reasoning_content\":");
        push_str(s, &c.reasoning);
    }
    if !c.calls.is_empty() {
        s.push_str(",\"tool_calls\":[");
        for (i, call) in c.calls.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str("{\"id\":");
            push_str(s, &call.id);
            s.push_str(",\"type\":\"function\",\"function\":{\"name\":");
            push_str(s, &call.name);
            s.push_str(",\"arguments\":");
            push_str(s, &call.arguments);
            s.push_str("}}");
        }
        s.push(']');
    }
    s.push('}');
}

impl Format for ChatFormat {
    fn stream(&mut self, event: &Event, out: &mut SseOut) {
        match event {
            Event::Start { choice } => out.push(self.role_chunk(*choice)),
            Event::PromptLogprobs { .. } => {}
            Event::Delta(d) => self.stream_delta(out, d),
            Event::Finished(f) => out.push(self.finish_chunk(f)),
            Event::Usage(u) if self.usage_field => out.push(self.usage_chunk(u)),
            Event::Usage(_) => {}
        }
    }

    fn end_stream(&mut self, out: &mut SseOut) {
        push_done(out);
    }

    fn client_error(&self, e: &ApiError) -> ApiError {
        self.names.engine_error(e)
    }

    fn stream_error(&mut self, e: &ApiError, out: &mut SseOut) {
        push_stream_error(e, out);
    }

    fn body(&mut self, choices: &[Collected], usage: &Usage) -> String {
        let mut s = String::with_capacity(256 + choices.iter().map(|c| c.content.len() + 96).sum::<usize>());
        s.push('{');
        push_header(&mut s, &self.id, "chat.completion", self.created, &self.model);
        s.push_str(",\"choices\":[");
        for (k, c) in choices.iter().enumerate() {
            if k > 0 {
                s.push(',');
            }
            s.push_str("{\"index\":");
            push_int(&mut s, k);
            s.push_str(",\"message\":");
            push_message(&mut s, c);
            s.push(',');
            self.push_logprobs(&mut s, &c.logprobs);
            s.push_str(",\"finish_reason\":");
            push_str(&mut s, finish_reason(c.finish.as_ref(), c.tool_calls));
            s.push(',');
            push_stop_reason(&mut s, c.finish.as_ref().and_then(|f| f.stop_reason.as_ref()));
            s.push('}');
        }
        s.push_str("],\"usage\":");
        push_usage(&mut s, usage);
        s.push('}');
        s
    }
}

#[cfg(test)]
#[path = "chat_format_tests.rs"]
mod tests;
