//! What can go wrong with a request to an upstream, and what the client is told. Every fault
//! is safe to retry elsewhere while nothing reached the client: the upstream refused the
//! request, answered it with a server error, or the gateway dropped the connection, which makes
//! an OpenAI-compatible server abort what it was doing.

use std::fmt;

use crate::error::ApiError;

/// A failure of one request to an upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamFault {
    /// The TCP connect failed or took too long.
    Connect(String),
    /// The TLS handshake of an `https://` upstream failed: its certificate refused (issuer,
    /// name, expiry), a protocol error, or no answer in time.
    Tls(String),
    /// The connection broke (reset, closed early, a failed write).
    Broken(String),
    /// Nothing came for `--http-worker-timeout-secs`: before the head, or inside the body.
    Stalled { before_head: bool, timeout_s: u64 },
    /// The response head or body was not valid HTTP/1.1.
    Malformed(String),
    /// The upstream answered 5xx.
    Status(u16),
}

impl UpstreamFault {
    /// The client's error: 504 for a stall, 502 for everything else the upstream did.
    pub fn to_api_error(&self, worker: &str) -> ApiError {
        let message = format!("HTTP worker {worker}: {self}");
        match self {
            UpstreamFault::Stalled { .. } => ApiError::gateway_timeout(message),
            _ => ApiError::bad_gateway(message),
        }
    }
}

impl fmt::Display for UpstreamFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamFault::Connect(e) => write!(f, "connect failed: {e}"),
            UpstreamFault::Tls(e) => write!(f, "TLS handshake failed: {e}"),
            UpstreamFault::Broken(e) => write!(f, "connection broken: {e}"),
            UpstreamFault::Stalled { before_head: true, timeout_s } => {
                write!(f, "no response within {timeout_s} s")
            }
            UpstreamFault::Stalled { before_head: false, timeout_s } => {
                write!(f, "the response stalled for {timeout_s} s")
            }
            UpstreamFault::Malformed(e) => write!(f, "malformed response: {e}"),
            UpstreamFault::Status(s) => write!(f, "answered {s}"),
        }
    }
}
