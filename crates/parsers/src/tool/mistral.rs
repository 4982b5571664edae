//! Mistral framing. After `[TOOL_CALLS]` comes either a JSON array of call
//! objects (`[TOOL_CALLS] [{"name": ..., "arguments": {...}}]`, tokenizer
//! v3-v7) or, in newer checkpoints (tokenizer v11+), the bare name followed by
//! `[ARGS]` and the arguments object (`[TOOL_CALLS]get_weather[ARGS]{...}`,
//! optionally with `[CALL_ID]id` before `[ARGS]`). One `[TOOL_CALLS]` per
//! call in the second form.

use super::json_args::{JsonStatus, JsonStreamer};
use super::json_call::{JsonRegion, JsonSyntax};
use super::region::{Decision, RegionDecoder};
use super::sink::CallSink;
use crate::limits;
use crate::stream_core::{floor_char_boundary, leading_whitespace_len, scan, Scan};

const ARGS_MARKER: &str = "[ARGS]";
const CALL_ID_MARKER: &str = "[CALL_ID]";

enum Phase {
    Choose,
    Json(JsonRegion),
    Arguments(JsonStreamer),
}

pub(crate) struct MistralDecoder {
    phase: Phase,
}

impl MistralDecoder {
    pub(crate) fn new() -> Self {
        Self { phase: Phase::Choose }
    }

    fn choose(&mut self, text: &str, at_end: bool, sink: &mut CallSink) -> Decision {
        let blank = leading_whitespace_len(text);
        let Some(first) = text[blank..].chars().next() else {
            return if at_end { Decision::Reject } else { Decision::Wait };
        };
        if first == '[' || first == '{' {
            self.phase = Phase::Json(JsonRegion::new(&MISTRAL_JSON));
            return Decision::Advance(blank);
        }
        let window = &text[..floor_char_boundary(text, limits::tool_header_bytes_max + ARGS_MARKER.len())];
        let at = match scan(window, &[ARGS_MARKER]) {
            Scan::Found { at, .. } if at <= limits::tool_header_bytes_max => at,
            Scan::Partial { safe_len } if safe_len <= limits::tool_header_bytes_max && !at_end => {
                return Decision::Wait;
            }
            _ => return Decision::Reject,
        };
        let header = &text[..at];
        let name = header.split(CALL_ID_MARKER).next().unwrap_or("").trim();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Decision::Reject;
        }
        sink.begin(name);
        self.phase = Phase::Arguments(JsonStreamer::object());
        Decision::Advance(at + ARGS_MARKER.len())
    }
}

impl RegionDecoder for MistralDecoder {
    fn step(&mut self, text: &str, at_end: bool, sink: &mut CallSink) -> Decision {
        match &mut self.phase {
            Phase::Choose => self.choose(text, at_end, sink),
            Phase::Json(region) => region.step(text, at_end, sink),
            Phase::Arguments(streamer) => {
                let mut fragment = String::new();
                let (used, status) = streamer.feed(text, at_end, &mut fragment);
                let ended = status != JsonStatus::Pending || at_end;
                if ended && status != JsonStatus::Complete {
                    streamer.close(&mut fragment);
                }
                sink.args(&fragment);
                match (ended, used) {
                    (true, _) => Decision::Done(used),
                    (false, 0) => Decision::Wait,
                    (false, _) => Decision::Advance(used),
                }
            }
        }
    }
}

/// The JSON calls after `[TOOL_CALLS]`.
pub(crate) static MISTRAL_JSON: JsonSyntax = JsonSyntax::calls(false, None, &[]);
