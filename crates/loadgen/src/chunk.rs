//! One SSE event of a streamed response applied to a request record. Each API has a reader
//! that says what one of its events means (a `Reading`); `apply_event` applies the readings of
//! every API the same way, so TTFT, ITL and E2E rest on one definition of an output chunk:
//! an event that carries generated output, whatever its API calls it.
//!
//! - `openai`: completions and chat completions chunks (`[DONE]` last);
//! - `anthropic`: Anthropic Messages events (`message_stop` last);
//! - `responses`: OpenAI Responses events (`response.completed` or `.incomplete` last).
//!
//! Usage-only events update counts, never times; `[DONE]` ends any stream.

mod anthropic;
mod openai;
mod responses;

use super::record::{Chunk, Failure, FailureKind, RequestRecord};

/// The stream format a response is read in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI completions and chat completions chunks.
    OpenAi,
    /// Anthropic Messages events.
    AnthropicMessages,
    /// OpenAI Responses events.
    OpenAiResponses,
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
        Dialect::AnthropicMessages => anthropic::read(data, &mut rec.text)?,
        Dialect::OpenAiResponses => responses::read(data, &mut rec.text)?,
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

/// An event that fails the request without saying why.
fn untold_error(kind: &str) -> Failure {
    Failure::new(FailureKind::StreamError, format!("the {kind} event carried no message"))
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::sse::SseParser;

    /// `parts` read in `dialect` as successive reads at times 1, 2, ... and the end of the body
    /// after them: the record, and whether the stream's last event came (or the failure).
    fn read_parts(dialect: Dialect, parts: &[&[u8]]) -> (RequestRecord, Result<bool, Failure>) {
        let mut sse = SseParser::default();
        let mut rec = RequestRecord::default();
        for (t, part) in parts.iter().enumerate() {
            sse.buffer().extend_from_slice(part);
            match sse.drain(|data| apply_event(dialect, data, t as u64 + 1, &mut rec)) {
                Ok(false) => {}
                ended => return (rec, ended),
            }
        }
        let ended = sse.finish(|data| apply_event(dialect, data, parts.len() as u64 + 1, &mut rec));
        (rec, ended)
    }

    /// The record without its times, which depend on the reads.
    fn timeless((mut rec, ended): (RequestRecord, Result<bool, Failure>)) -> (RequestRecord, Result<bool, Failure>) {
        rec.chunks.iter_mut().for_each(|c| c.time_ns = 0);
        (rec, ended)
    }

    /// Events framed as both APIs send them: an `event:` line naming the data's `type`, the
    /// data, a blank line.
    pub fn framed(events: &[&str]) -> Vec<u8> {
        let mut out = String::new();
        for data in events {
            let value: serde_json::Value = serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}"));
            if let Some(kind) = value["type"].as_str() {
                out.push_str(&format!("event: {kind}\n"));
            }
            out.push_str(&format!("data: {data}\n\n"));
        }
        out.into_bytes()
    }

    /// `stream` read whole; asserts that split at any byte, and fed one byte per read, it gives
    /// the same record (times aside).
    pub fn read_at_every_split(dialect: Dialect, stream: &[u8]) -> (RequestRecord, Result<bool, Failure>) {
        let whole = timeless(read_parts(dialect, &[stream]));
        for i in 0..=stream.len() {
            assert_eq!(timeless(read_parts(dialect, &[&stream[..i], &stream[i..]])), whole, "split at {i}");
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(timeless(read_parts(dialect, &bytes)), whole, "one byte per read");
        whole
    }

    /// What one event should read as: (output, text appended, prompt tokens, output tokens, end).
    pub type Want = (bool, &'static str, Option<u32>, Option<u32>, bool);

    /// Each event read alone by a dialect's `read` gives its `Want`.
    pub fn check_readings(read: fn(&[u8], &mut String) -> Result<Reading, Failure>, cases: &[(&str, Want)]) {
        for (data, (output, appended, prompt_tokens, completion_tokens, end)) in cases {
            let mut text = String::from("<");
            let want = Reading {
                output: *output,
                prompt_tokens: *prompt_tokens,
                completion_tokens: *completion_tokens,
                end: *end,
            };
            assert_eq!(read(data.as_bytes(), &mut text), Ok(want), "{data}");
            assert_eq!(text, format!("<{appended}"), "{data}");
        }
    }

    /// Each event fails the request with its kind and a message starting with the given text.
    pub fn check_failures(
        read: fn(&[u8], &mut String) -> Result<Reading, Failure>,
        cases: &[(&str, FailureKind, &str)],
    ) {
        for (data, kind, message) in cases {
            match read(data.as_bytes(), &mut String::new()).map_err(|f| (f.kind, f.message)) {
                Err((k, m)) => assert!(k == *kind && m.starts_with(message), "{data}: {k:?} {m}"),
                Ok(r) => panic!("{data}: read as {r:?}"),
            }
        }
    }

    #[test]
    fn done_ends_every_dialect_and_empty_text_chunks_count() {
        for dialect in [Dialect::OpenAi, Dialect::AnthropicMessages, Dialect::OpenAiResponses] {
            assert_eq!(apply_event(dialect, b"[DONE]", 1, &mut RequestRecord::default()), Ok(true), "{dialect:?}");
        }
        let mut rec = RequestRecord::default();
        let empty = br#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}"#;
        assert_eq!(apply_event(Dialect::AnthropicMessages, empty, 4, &mut rec), Ok(false));
        assert_eq!(rec.chunks, [Chunk { time_ns: 4, text_end: 0, completion_tokens_cum: None }]);
    }
}
