//! What the client observed about one request, raw: the schedule, the send, the response
//! head, every token-bearing chunk (time, text, cumulative token count when the server sends
//! per-chunk usage) and the end. Every metric is derived from these records after the run, and
//! they are written out as JSON Lines so any metric can be recomputed offline.
//!
//! Times are nanoseconds from the run origin on the monotonic clock shared by all client
//! threads.

use std::fmt::Write as _;

/// A chunk that carried output: content, reasoning or a tool call (role-only and usage-only
/// chunks are not recorded).
#[derive(Clone, Debug, PartialEq)]
pub struct Chunk {
    /// When the read that completed this chunk returned.
    pub time_ns: u64,
    /// End of this chunk's text in `RequestRecord::text` (bytes).
    pub text_end: u32,
    /// `usage.completion_tokens` carried by this chunk (continuous usage stats).
    pub completion_tokens_cum: Option<u32>,
}

/// Why a request failed; the category is what the report counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureKind {
    /// TCP connect failed.
    Connect,
    /// The connection broke while sending or before the response completed.
    Connection,
    /// A non-200 status.
    HttpStatus(u16),
    /// Unparseable HTTP, chunked framing, SSE or JSON.
    Protocol,
    /// The server sent an error object inside the stream.
    StreamError,
    /// The stream ended without a single token-bearing chunk.
    NoTokens,
    /// --request-timeout-s passed.
    Timeout,
}

impl FailureKind {
    pub fn category(self) -> String {
        match self {
            FailureKind::Connect => "connect".into(),
            FailureKind::Connection => "connection".into(),
            FailureKind::HttpStatus(code) => format!("http_{code}"),
            FailureKind::Protocol => "protocol".into(),
            FailureKind::StreamError => "stream_error".into(),
            FailureKind::NoTokens => "no_tokens".into(),
            FailureKind::Timeout => "timeout".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure { kind, message: message.into() }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestRecord {
    /// Position in the run (schedule order).
    pub index: u32,
    pub prompt_index: u32,
    pub core_index: u16,
    /// When the schedule said to send; for unpaced runs, when a concurrency slot was free.
    pub scheduled_ns: u64,
    /// When the request's first byte was written.
    pub send_ns: u64,
    /// When the response head was complete.
    pub header_ns: Option<u64>,
    /// When the response ended (stream framing complete, or the failure).
    pub end_ns: u64,
    pub status: Option<u16>,
    /// The request opened a new TCP connection (its connect time is inside TTFT).
    pub connection_new: bool,
    pub chunks: Vec<Chunk>,
    /// Generated text: content, reasoning and completion text, concatenated.
    pub text: String,
    pub usage_prompt_tokens: Option<u32>,
    pub usage_completion_tokens: Option<u32>,
    pub failure: Option<Failure>,
}

impl RequestRecord {
    pub fn succeeded(&self) -> bool {
        self.failure.is_none()
    }

    pub fn first_token_ns(&self) -> Option<u64> {
        self.chunks.first().map(|c| c.time_ns)
    }

    pub fn last_token_ns(&self) -> Option<u64> {
        self.chunks.last().map(|c| c.time_ns)
    }

    /// The text of chunk `i`.
    pub fn chunk_text(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.chunks[i - 1].text_end as usize };
        let end = self.chunks[i].text_end as usize;
        self.text.get(start..end).unwrap_or("")
    }
}

/// Per-request facts the analysis adds to a record for the JSONL line.
pub struct Derived<'a> {
    pub input_tokens: u32,
    pub output_tokens: u32,
    pub requested_output_tokens: u32,
    pub tokens_per_chunk: &'a [u32],
    pub tokens_per_chunk_source: &'a str,
}

/// One JSON line per request. Hand-written so 100k+ records cost no intermediate tree.
pub fn write_jsonl_line(out: &mut String, r: &RequestRecord, d: &Derived) {
    let opt = |v: Option<u64>| v.map_or_else(|| "null".to_string(), |v| v.to_string());
    let _ = write!(
        out,
        r#"{{"index":{},"prompt_index":{},"core":{},"scheduled_ns":{},"send_ns":{},"header_ns":{},"#,
        r.index,
        r.prompt_index,
        r.core_index,
        r.scheduled_ns,
        r.send_ns,
        opt(r.header_ns)
    );
    let _ = write!(
        out,
        r#""first_token_ns":{},"last_token_ns":{},"end_ns":{},"queue_wait_ns":{},"status":{},"new_connection":{},"#,
        opt(r.first_token_ns()),
        opt(r.last_token_ns()),
        r.end_ns,
        r.send_ns.saturating_sub(r.scheduled_ns),
        opt(r.status.map(u64::from)),
        r.connection_new
    );
    let _ = write!(
        out,
        r#""input_tokens":{},"output_tokens":{},"requested_output_tokens":{},"usage_prompt_tokens":{},"usage_completion_tokens":{},"tokens_per_chunk_source":"{}","chunks":["#,
        d.input_tokens,
        d.output_tokens,
        d.requested_output_tokens,
        opt(r.usage_prompt_tokens.map(u64::from)),
        opt(r.usage_completion_tokens.map(u64::from)),
        d.tokens_per_chunk_source
    );
    for (i, c) in r.chunks.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(out, "{sep}[{},{}]", c.time_ns, d.tokens_per_chunk.get(i).copied().unwrap_or(0));
    }
    out.push_str("],\"failure\":");
    match &r.failure {
        None => out.push_str("null"),
        Some(f) => {
            let _ = write!(
                out,
                r#"{{"category":"{}","message":{}}}"#,
                f.kind.category(),
                serde_json::Value::String(f.message.clone())
            );
        }
    }
    out.push_str("}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_line_is_json_with_every_timestamp() {
        let r = RequestRecord {
            index: 3,
            scheduled_ns: 100,
            send_ns: 150,
            header_ns: Some(400),
            end_ns: 900,
            status: Some(200),
            chunks: vec![
                Chunk { time_ns: 500, text_end: 2, completion_tokens_cum: Some(1) },
                Chunk { time_ns: 800, text_end: 5, completion_tokens_cum: Some(3) },
            ],
            text: "hi yo".into(),
            failure: Some(Failure::new(FailureKind::HttpStatus(503), "busy \"now\"")),
            ..RequestRecord::default()
        };
        let d = Derived {
            input_tokens: 7,
            output_tokens: 3,
            requested_output_tokens: 3,
            tokens_per_chunk: &[1, 2],
            tokens_per_chunk_source: "usage",
        };
        let mut line = String::new();
        write_jsonl_line(&mut line, &r, &d);
        assert!(line.ends_with('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        assert_eq!(v["queue_wait_ns"], 50);
        assert_eq!(v["first_token_ns"], 500);
        assert_eq!(v["last_token_ns"], 800);
        assert_eq!(v["chunks"], serde_json::json!([[500, 1], [800, 2]]));
        assert_eq!(v["failure"]["category"], "http_503");
        assert_eq!(v["failure"]["message"], "busy \"now\"");
        assert_eq!(r.chunk_text(1), " yo");
    }
}
