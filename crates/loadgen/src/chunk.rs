//! One SSE event of a streamed response applied to a request record. Each API has a reader
//! that says what one of its events means (a `Reading`); `apply_event` applies the readings of
//! every API the same way, so TTFT, ITL and E2E rest on one definition of an output chunk:
//! an event that carries generated output, whatever its API calls it.
//!
//! - `openai`: completions and chat completions chunks (`[DONE]` last).
//!
//! Usage-only events update counts, never times; `[DONE]` ends any stream.

mod openai;

use super::record::{Chunk, Failure, FailureKind, RequestRecord};

/// The stream format a response is read in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI completions and chat completions chunks.
    OpenAi,
}

/// What one event means for its request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// The event is an output chunk; its text (possibly empty) was appended to the record's.
    pub output: bool,
    pub prompt_tokens: Option<u32>,
    /// Output tokens so far (cumulative).
    pub completion_tokens: Option<u32>,
    /// The stream's last event: nothing after it is read.
    pub end: bool,
}

/// Applies one event's data. Ok(true) at the stream's last event.
pub fn apply_event(dialect: Dialect, data: &[u8], time_ns: u64, rec: &mut RequestRecord) -> Result<bool, Failure> {
    if data == b"[DONE]" {
        return Ok(true);
    }
    let reading = match dialect {
        Dialect::OpenAi => openai::read(data, &mut rec.text)?,
    };
    rec.usage_prompt_tokens = reading.prompt_tokens.or(rec.usage_prompt_tokens);
    rec.usage_completion_tokens = reading.completion_tokens.or(rec.usage_completion_tokens);
    if reading.output {
        let text_end = u32::try_from(rec.text.len()).unwrap_or(u32::MAX);
        rec.chunks.push(Chunk { time_ns, text_end, completion_tokens_cum: reading.completion_tokens });
    }
    Ok(reading.end)
}

/// An event whose data is not the JSON its API sends.
fn undecodable(data: &[u8], e: &serde_json::Error) -> Failure {
    let shown = String::from_utf8_lossy(&data[..data.len().min(200)]).into_owned();
    Failure::new(FailureKind::Protocol, format!("undecodable stream chunk ({e}): {shown}"))
}

/// An error object sent inside the stream: its `message`, else the whole object.
fn stream_error(error: &serde_json::Value) -> Failure {
    let message = error.get("message").and_then(|m| m.as_str()).map_or_else(|| error.to_string(), String::from);
    Failure::new(FailureKind::StreamError, message)
}
