//! Inkling (TML) framing: a call is a model message whose content type is a
//! JSON tool invocation,
//! `<|message_model|>NAME<|content_invoke_tool_json|>{"name": ..., "args": {...}}<|end_message|>`.
//! The header (`NAME`) is protocol metadata; the call's name is the one in
//! the JSON. Text-mode invocations (`<|content_invoke_tool_text|>`) cannot be
//! expressed as OpenAI calls and are suppressed up to their end token. The
//! reasoning parser may already have removed the header; both shapes work.

use super::json_call::{CallKeys, JsonRegion, JsonSyntax};
use super::region::{Decision, RegionDecoder};
use super::sink::CallSink;
use crate::limits;
use crate::stream_core::{floor_char_boundary, scan, Scan};

const INVOKE_TOOL_JSON: &str = "<|content_invoke_tool_json|>";
const INVOKE_TOOL_TEXT: &str = "<|content_invoke_tool_text|>";

/// Tokens that end a message header, in the order of `HeaderEnd`.
const HEADER_ENDS: &[&str] = &[
    INVOKE_TOOL_JSON,
    INVOKE_TOOL_TEXT,
    "<|content_text|>",
    "<|content_thinking|>",
    "<|end_message|>",
    "<|content_model_end_sampling|>",
    "<|message_model|>",
];

enum Phase {
    Header,
    Json(JsonRegion),
    Suppress,
}

pub(crate) struct InklingDecoder {
    phase: Phase,
}

impl InklingDecoder {
    /// After `<|message_model|>`: a header first.
    pub(crate) fn after_header_start() -> Self {
        Self { phase: Phase::Header }
    }

    /// After `<|content_invoke_tool_json|>`.
    pub(crate) fn json_call() -> Self {
        Self { phase: Phase::Json(JsonRegion::new(&INKLING_JSON)) }
    }

    /// After `<|content_invoke_tool_text|>`.
    pub(crate) fn suppressed() -> Self {
        Self { phase: Phase::Suppress }
    }

    fn header(&mut self, text: &str, at_end: bool) -> Decision {
        let window = &text[..floor_char_boundary(text, limits::tool_header_bytes_max + INVOKE_TOOL_JSON.len())];
        let (at, index) = match scan(window, HEADER_ENDS) {
            Scan::Found { at, index } if at <= limits::tool_header_bytes_max => (at, index),
            Scan::Partial { safe_len } if safe_len <= limits::tool_header_bytes_max && !at_end => {
                return Decision::Wait;
            }
            _ => return Decision::Reject,
        };
        let token_len = HEADER_ENDS[index].len();
        match index {
            0 => {
                self.phase = Phase::Json(JsonRegion::new(&INKLING_JSON));
                Decision::Advance(at + token_len)
            }
            1 => {
                self.phase = Phase::Suppress;
                Decision::Advance(at + token_len)
            }
            // A new header: this one had no content type.
            6 => Decision::Done(at),
            // Text or thinking follows: only the header is protocol data.
            _ => Decision::Done(at + token_len),
        }
    }
}

impl RegionDecoder for InklingDecoder {
    fn step(&mut self, text: &str, at_end: bool, sink: &mut CallSink) -> Decision {
        match &mut self.phase {
            Phase::Header => self.header(text, at_end),
            Phase::Json(region) => region.step(text, at_end, sink),
            Phase::Suppress => match scan(text, INKLING_END) {
                Scan::Found { at, index } => Decision::Done(at + INKLING_END[index].len()),
                Scan::Partial { .. } if at_end => Decision::Done(text.len()),
                Scan::Partial { safe_len: 0 } => Decision::Wait,
                Scan::Partial { safe_len } => Decision::Advance(safe_len),
            },
        }
    }
}

pub(crate) const INKLING_END: &[&str] = &["<|end_message|>", "<|content_model_end_sampling|>"];

/// `{"name": ..., "args": {...}}` inside a TML tool block.
pub(crate) static INKLING_JSON: JsonSyntax = JsonSyntax {
    keys: CallKeys { name: &["name"], arguments: &["args", "arguments"] },
    allow_array: false,
    ..JsonSyntax::calls(false, None, INKLING_END)
};
