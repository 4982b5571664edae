//! The gateway's error model.
//!
//! `ApiError` is everything a client can be told: an HTTP status, a message, and the details
//! an API's error envelope carries. It is turned into bytes in exactly one place,
//! `ApiError::to_json_in`, in the envelope of the API being served (`Envelope`: OpenAI's
//! `{"error":{"message","type","param","code"}}` or Anthropic's
//! `{"type":"error","error":{"type","message"}}`), and into a status line by `http::response`. Its constructors take any
//! `Display` message, so a lower layer's typed error (a tokenizer or template error) becomes
//! the client's text here, at the edge, and nowhere earlier. Engine and transport faults
//! are `EngineFault`s: they carry where they came from and whether retrying is safe, and become
//! an `ApiError` only at the edge.

use std::fmt;

/// A client-visible error.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub kind: ErrorKind,
    pub message: String,
    pub param: Option<String>,
    pub code: Option<&'static str>,
    /// Seconds for a `Retry-After` header (429/503).
    pub retry_after_s: Option<u32>,
    /// A result that comes with the error, as JSON, beside `error` in OpenAI's envelope under
    /// `response`: a response that was generated but could not be saved is not lost.
    pub result: Option<String>,
}

/// The OpenAI `error.type` strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidRequest,
    NotFound,
    ServerError,
    ServiceUnavailable,
    NotImplemented,
    RateLimit,
    Authentication,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidRequest => "invalid_request_error",
            ErrorKind::NotFound => "invalid_request_error",
            ErrorKind::ServerError => "server_error",
            ErrorKind::ServiceUnavailable => "service_unavailable",
            ErrorKind::NotImplemented => "not_implemented",
            ErrorKind::RateLimit => "rate_limit_error",
            // OpenAI answers a bad key with invalid_request_error + code invalid_api_key; SDKs
            // raise AuthenticationError from the status alone.
            ErrorKind::Authentication => "invalid_request_error",
        }
    }
}

impl ApiError {
    fn new(status: u16, kind: ErrorKind, message: impl fmt::Display) -> Self {
        ApiError {
            status,
            kind,
            message: message.to_string(),
            param: None,
            code: None,
            retry_after_s: None,
            result: None,
        }
    }

    /// 400 `invalid_request_error`.
    pub fn bad_request(message: impl fmt::Display) -> Self {
        Self::new(400, ErrorKind::InvalidRequest, message)
    }

    /// 400 naming the offending request field (request validation composes its texts).
    pub fn invalid_param(param: &str, message: impl Into<String>) -> Self {
        let mut e = Self::bad_request(message.into());
        e.param = Some(param.to_string());
        e.code = Some("invalid_value");
        e
    }

    pub fn not_found(message: impl fmt::Display) -> Self {
        Self::new(404, ErrorKind::NotFound, message)
    }

    pub fn model_not_found(model: &str) -> Self {
        let mut e = Self::not_found(format!("The model `{model}` does not exist."));
        e.param = Some("model".to_string());
        e.code = Some("model_not_found");
        e
    }

    pub fn method_not_allowed(message: impl fmt::Display) -> Self {
        Self::new(405, ErrorKind::InvalidRequest, message)
    }

    pub fn payload_too_large(message: impl fmt::Display) -> Self {
        Self::new(413, ErrorKind::InvalidRequest, message)
    }

    pub fn header_too_large(message: impl fmt::Display) -> Self {
        Self::new(431, ErrorKind::InvalidRequest, message)
    }

    pub fn request_timeout(message: impl fmt::Display) -> Self {
        Self::new(408, ErrorKind::InvalidRequest, message)
    }

    pub fn internal(message: impl fmt::Display) -> Self {
        Self::new(500, ErrorKind::ServerError, message)
    }

    /// 502: an upstream (an HTTP worker) failed the request.
    pub fn bad_gateway(message: impl fmt::Display) -> Self {
        Self::new(502, ErrorKind::ServerError, message).with_code("upstream_error")
    }

    /// 424: a service the request itself named (an MCP server) failed it, so the request
    /// cannot go on; OpenAI and SMG answer a tool list that could not be had so.
    pub fn failed_dependency(message: impl fmt::Display) -> Self {
        Self::new(424, ErrorKind::InvalidRequest, message)
    }

    /// 504: an upstream (an HTTP worker) did not answer in time.
    pub fn gateway_timeout(message: impl fmt::Display) -> Self {
        Self::new(504, ErrorKind::ServerError, message).with_code("upstream_timeout")
    }

    pub fn unavailable(message: impl fmt::Display) -> Self {
        let mut e = Self::new(503, ErrorKind::ServiceUnavailable, message);
        e.retry_after_s = Some(1);
        e
    }

    /// 401 for a missing or wrong API key (the key itself is never echoed).
    pub fn unauthorized(message: impl fmt::Display) -> Self {
        let mut e = Self::new(401, ErrorKind::Authentication, message);
        e.code = Some("invalid_api_key");
        e
    }

    /// 429: the admission queue is full.
    pub fn too_many_requests(message: impl fmt::Display, retry_after_s: u32) -> Self {
        let mut e = Self::new(429, ErrorKind::RateLimit, message);
        e.code = Some("rate_limit_exceeded");
        e.retry_after_s = Some(retry_after_s);
        e
    }

    /// 503 with a chosen `Retry-After`.
    pub fn overloaded(message: impl fmt::Display, retry_after_s: u32) -> Self {
        let mut e = Self::unavailable(message);
        e.retry_after_s = Some(retry_after_s);
        e.code = Some("overloaded");
        e
    }

    pub fn not_implemented(code: &'static str, message: impl fmt::Display) -> Self {
        let mut e = Self::new(501, ErrorKind::NotImplemented, message);
        e.code = Some(code);
        e
    }

    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    /// Carries `result` (JSON) with the error.
    pub fn with_result(mut self, result: String) -> Self {
        self.result = Some(result);
        self
    }

    pub fn with_param(mut self, param: &str) -> Self {
        self.param = Some(param.to_string());
        self
    }

    /// The error in `envelope`'s shape.
    pub fn to_json_in(&self, envelope: Envelope) -> String {
        let mut out = String::with_capacity(96 + self.message.len());
        match envelope {
            Envelope::OpenAi => {
                out.push_str("{\"error\":");
                self.push_openai_object(&mut out);
                if let Some(result) = &self.result {
                    out.push_str(",\"response\":");
                    out.push_str(result);
                }
                out.push('}');
            }
            Envelope::Anthropic => {
                out.push_str("{\"type\":\"error\",\"error\":{\"type\":\"");
                out.push_str(self.anthropic_type());
                out.push_str("\",\"message\":");
                shardgate_util::json::push_str(&mut out, &self.message);
                out.push_str("}}");
            }
        }
        out
    }

    /// `{"message","type","param","code"}`: OpenAI's error object.
    pub fn push_openai_object(&self, out: &mut String) {
        out.push_str("{\"message\":");
        shardgate_util::json::push_str(out, &self.message);
        out.push_str(",\"type\":\"");
        out.push_str(self.kind.as_str());
        out.push_str("\",\"param\":");
        match &self.param {
            Some(p) => shardgate_util::json::push_str(out, p),
            None => out.push_str("null"),
        }
        out.push_str(",\"code\":");
        match self.code {
            Some(c) => shardgate_util::json::push_str(out, c),
            None => out.push_str("null"),
        }
        out.push('}');
    }

    /// Anthropic's `error.type`, which its SDKs and clients key on, by status
    /// (docs.anthropic.com "Errors"; 503 is how this gateway says overloaded).
    pub fn anthropic_type(&self) -> &'static str {
        match self.status {
            401 => "authentication_error",
            402 => "billing_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            503 | 529 => "overloaded_error",
            408 | 504 => "timeout_error",
            s if s >= 500 => "api_error",
            _ => "invalid_request_error",
        }
    }
}

/// The error envelope an API's clients parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Envelope {
    #[default]
    OpenAi,
    Anthropic,
}

impl Envelope {
    /// The envelope of the API a path belongs to.
    pub fn of_path(path: &str) -> Envelope {
        if path.starts_with("/v1/messages") {
            Envelope::Anthropic
        } else {
            Envelope::OpenAi
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.message)
    }
}

/// Where an engine fault came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultSource {
    /// The engine failed one request and stays healthy (an ERROR finish).
    Engine,
    /// The transport failed (socket error, undecodable output, silence).
    Transport,
    /// The gateway itself (shutdown, worker removed).
    Gateway,
}

/// A failure of an engine or its connection, as seen by one request.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineFault {
    pub source: FaultSource,
    pub message: String,
    /// True when resending the request to another engine cannot duplicate work: it never
    /// reached the engine, or the engine that had it is gone (it died or closed its
    /// connection), so nothing of it runs any more. `pipeline::retry` resends such a request
    /// once when nothing of its output was produced yet.
    pub retry_safe: bool,
    /// The engine rank (position in the worker's group) the request was on, when known.
    pub rank: Option<usize>,
}

impl EngineFault {
    pub fn new(source: FaultSource, message: impl fmt::Display, retry_safe: bool) -> Self {
        EngineFault { source, message: message.to_string(), retry_safe, rank: None }
    }

    /// The fault of a request that was on engine rank `rank`.
    pub fn on_rank(mut self, rank: usize) -> Self {
        self.rank = Some(rank);
        self
    }

    /// The fault of an ERROR finish: retry-safe when the engine marked its error retryable (the
    /// request ended on the engine, and it may succeed elsewhere: a KV-cache load that failed);
    /// an error the request itself causes would fail everywhere.
    pub fn request_failed(error: Option<&shardgate_wire::RequestError>, rank: usize) -> Self {
        let (text, retryable) = match error {
            Some(e) => (e.to_string(), e.retryable),
            None => (String::from("no description"), false),
        };
        EngineFault::new(FaultSource::Engine, format!("the engine failed the request: {text}"), retryable).on_rank(rank)
    }

    /// The client's answer: 503 with Retry-After for what a retry may fix (the gateway's own
    /// refusals, an engine's retryable error), else 500 with the engine's description.
    pub fn to_api_error(&self) -> ApiError {
        match self.source {
            FaultSource::Gateway if self.retry_safe => ApiError::unavailable(self.message.clone()),
            FaultSource::Engine if self.retry_safe => {
                ApiError::unavailable(self.message.clone()).with_code("engine_error")
            }
            _ => {
                let mut e = ApiError::internal(self.message.clone());
                e.code = Some("engine_error");
                e
            }
        }
    }
}

impl fmt::Display for EngineFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.source, self.message)
    }
}

/// The store's failures as a client sees them: a full queue or a stopped store is a 503 to
/// retry, a record that cannot be read back a 500 for that request only.
impl From<shardgate_store::StoreError> for ApiError {
    fn from(e: shardgate_store::StoreError) -> Self {
        use shardgate_store::StoreError;
        match &e {
            StoreError::Busy | StoreError::Unavailable => {
                tracing::warn!("response store: {e}");
                ApiError::unavailable(&e).with_code("store_unavailable")
            }
            StoreError::NotFound(_) => ApiError::not_found(&e),
            StoreError::Duplicate(_) => ApiError::bad_request(&e).with_code("duplicate_id"),
            StoreError::ChainTooLong { .. } => ApiError::bad_request(&e).with_code("chain_too_long"),
            StoreError::Corrupt { .. } | StoreError::SchemaTooNew { .. } | StoreError::Io(_) => {
                tracing::error!("response store: {e}");
                ApiError::internal(&e).with_code("store_error")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_api_gets_its_own_envelope() {
        let e = ApiError::invalid_param("max_tokens", "max_tokens: Field required");
        assert_eq!(
            e.to_json_in(Envelope::OpenAi),
            r#"{"error":{"message":"max_tokens: Field required","type":"invalid_request_error","param":"max_tokens","code":"invalid_value"}}"#
        );
        assert_eq!(
            e.to_json_in(Envelope::Anthropic),
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}"#
        );
        let cases = [
            (ApiError::unauthorized("no key"), "authentication_error"),
            (ApiError::not_found("no such response"), "not_found_error"),
            (ApiError::payload_too_large("big"), "request_too_large"),
            (ApiError::too_many_requests("queue full", 1), "rate_limit_error"),
            (ApiError::unavailable("no workers"), "overloaded_error"),
            (ApiError::internal("boom"), "api_error"),
            (ApiError::request_timeout("slow"), "timeout_error"),
        ];
        for (e, kind) in cases {
            assert_eq!(e.anthropic_type(), kind, "{e}");
        }
        assert_eq!(Envelope::of_path("/v1/messages/count_tokens"), Envelope::Anthropic);
        let with_result = ApiError::internal("not stored").with_result("{\"id\":\"resp_1\"}".into());
        assert!(with_result.to_json_in(Envelope::OpenAi).ends_with(",\"response\":{\"id\":\"resp_1\"}}"));
    }

    #[test]
    fn store_failures_are_503_to_retry_or_500_for_this_request() {
        use shardgate_store::StoreError;
        let corrupt = StoreError::Corrupt { what: "response r".into(), why: "bad JSON".into() };
        let cases = [
            (StoreError::Busy, 503, Some(1)),
            (StoreError::Unavailable, 503, Some(1)),
            (StoreError::NotFound("response r".into()), 404, None),
            (StoreError::Duplicate("item i".into()), 400, None),
            (corrupt, 500, None),
            (StoreError::Io("disk full".into()), 500, None),
        ];
        for (e, status, retry_after_s) in cases {
            let text = e.to_string();
            let api = ApiError::from(e);
            assert_eq!((api.status, api.retry_after_s), (status, retry_after_s), "{text}");
            assert_eq!(api.message, text);
        }
        assert_eq!(Envelope::of_path("/v1/responses"), Envelope::OpenAi);
    }
}
