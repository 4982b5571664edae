//! Engine-neutral outputs: what a transport hands to the request that owns an id.

/// Why the engine finished a request (vLLM's `FinishReason` numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    Length,
    Abort,
    Error,
    Repetition,
}

impl FinishReason {
    pub fn from_vllm(code: u64) -> Option<Self> {
        Some(match code {
            0 => FinishReason::Stop,
            1 => FinishReason::Length,
            2 => FinishReason::Abort,
            3 => FinishReason::Error,
            4 => FinishReason::Repetition,
            _ => return None,
        })
    }
}

/// What stopped a request, when it was not EOS or length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    TokenId(u32),
    Text(String),
}

/// Sample logprobs of the tokens in one event: per token, the sampled token's logprob and rank,
/// and the top-k alternatives in descending order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Logprobs {
    pub rows: Vec<LogprobRow>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LogprobRow {
    pub token_id: u32,
    pub logprob: f32,
    pub rank: i64,
    pub top: Vec<(u32, f32)>,
}

/// One engine step's worth of output for one request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TokenEvent {
    pub token_ids: Vec<u32>,
    pub logprobs: Option<Logprobs>,
    /// Logprobs of prompt positions completed by this step's prefill chunk: row j scores the
    /// prompt token after the rows already delivered (the first prompt token has none).
    pub prompt_logprobs: Option<Logprobs>,
    /// Set on the request's last event.
    pub finish: Option<FinishReason>,
    pub stop_reason: Option<StopReason>,
    /// Prompt tokens served from the engine's prefix cache (first event after prefill).
    pub cached_tokens: Option<u32>,
    /// Request-scoped engine error (ERROR finish), as the engine described it.
    pub error: Option<RequestError>,
}

/// A request-scoped engine error (vLLM 0.33's `RequestError`): the request failed, the engine
/// stays healthy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestError {
    /// The engine's classification (`kv_load_failed`, `internal_error`, ...); empty when the
    /// wire carries none.
    pub code: String,
    pub message: String,
    /// The engine says the same request may succeed if sent again (e.g. a KV-cache load that
    /// failed); false for errors the request itself causes.
    pub retryable: bool,
}

impl RequestError {
    /// An error the gateway describes itself, not to be retried.
    pub fn fatal(message: impl Into<String>) -> Self {
        RequestError { code: String::new(), message: message.into(), retryable: false }
    }
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.code.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.code, self.message)
        }
    }
}
