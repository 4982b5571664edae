//! Why a call to a gRPC worker failed, and what the gateway may do about it.

use crate::frame::FrameError;
use crate::response_error::ResponseError;
use crate::smg::Unsupported;
use crate::status::{Code, Status};

#[derive(Debug)]
pub enum Fault {
    /// TCP connect failed (refused, unreachable) or timed out.
    Connect(std::io::Error),
    /// The HTTP/2 preface or SETTINGS exchange failed or timed out.
    Handshake(String),
    /// The TLS handshake of a `grpcs://` worker failed: its certificate refused (issuer, name,
    /// expiry), no HTTP/2 by ALPN, or no answer in time.
    Tls(String),
    /// Not trying to connect yet: the last attempt failed and the backoff has not run out.
    Backoff { retry_in_ms: u64 },
    /// The connection is gone (reset, closed, GOAWAY, keep-alive unanswered).
    Closed(String),
    /// The worker refused the stream before processing it (RST_STREAM REFUSED_STREAM).
    Refused,
    /// The worker reset the stream with another HTTP/2 error code.
    Reset(String),
    /// The answer was not gRPC: an HTTP status other than 200 or another content type.
    NotGrpc(String),
    /// The call ended with a non-OK gRPC status.
    Status(Status),
    /// A malformed message prefix.
    Frame(FrameError),
    /// A message that does not decode as the method's answer.
    Decode(String),
    /// A decoded answer the gateway cannot read (unknown finish reason, ...).
    Response(ResponseError),
    /// The deadline passed before the call ended.
    Deadline { ms: u64 },
    /// The request asks for something the service cannot say.
    Unsupported(Unsupported),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Connect(e) => write!(f, "connect failed: {e}"),
            Fault::Handshake(e) => write!(f, "HTTP/2 handshake failed: {e}"),
            Fault::Tls(e) => write!(f, "TLS handshake failed: {e}"),
            Fault::Backoff { retry_in_ms } => write!(f, "worker unreachable, next connect attempt in {retry_in_ms} ms"),
            Fault::Closed(e) => write!(f, "connection lost: {e}"),
            Fault::Refused => f.write_str("stream refused by the worker"),
            Fault::Reset(e) => write!(f, "stream reset by the worker: {e}"),
            Fault::NotGrpc(e) => write!(f, "not a gRPC answer: {e}"),
            Fault::Status(s) => write!(f, "gRPC status {s}"),
            Fault::Frame(e) => write!(f, "bad gRPC frame: {e}"),
            Fault::Decode(e) => write!(f, "undecodable gRPC message: {e}"),
            Fault::Response(e) => write!(f, "unreadable Generate answer: {e}"),
            Fault::Deadline { ms } => write!(f, "deadline of {ms} ms exceeded"),
            Fault::Unsupported(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Fault {}

impl Fault {
    /// The request never ran on the worker, or the worker dropped it with the connection (a
    /// gRPC server cancels a call whose connection is gone), so sending it elsewhere runs it
    /// once. UNAVAILABLE is the status SMG's servicer answers when it did not admit a request.
    pub fn retry_safe(&self) -> bool {
        match self {
            Fault::Connect(_)
            | Fault::Handshake(_)
            | Fault::Tls(_)
            | Fault::Backoff { .. }
            | Fault::Closed(_)
            | Fault::Refused => true,
            Fault::Status(s) => s.code == Code::Unavailable,
            _ => false,
        }
    }

    /// The worker itself is at fault (unreachable, misbehaving, stalled), not the request: it
    /// goes unhealthy until it answers again.
    pub fn worker_fault(&self) -> bool {
        match self {
            Fault::Status(s) => matches!(
                s.code,
                Code::Unavailable | Code::Internal | Code::Unknown | Code::DataLoss | Code::Unimplemented
            ),
            Fault::Unsupported(_) => false,
            _ => true,
        }
    }
}

impl From<FrameError> for Fault {
    fn from(e: FrameError) -> Self {
        Fault::Frame(e)
    }
}

impl From<ResponseError> for Fault {
    fn from(e: ResponseError) -> Self {
        Fault::Response(e)
    }
}

impl From<Unsupported> for Fault {
    fn from(e: Unsupported) -> Self {
        Fault::Unsupported(e)
    }
}

impl From<h2::Error> for Fault {
    fn from(e: h2::Error) -> Self {
        if e.is_io() || e.is_go_away() {
            return Fault::Closed(e.to_string());
        }
        match e.reason() {
            Some(h2::Reason::REFUSED_STREAM) => Fault::Refused,
            Some(_) if e.is_reset() => Fault::Reset(e.to_string()),
            _ => Fault::Closed(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_safety_and_blame() {
        let status = |code| Fault::Status(Status { code, message: String::new() });
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let cases = [
            (Fault::Connect(refused), true, true),
            (Fault::Closed("eof".into()), true, true),
            (Fault::Refused, true, true),
            (Fault::Tls("UnknownIssuer".into()), true, true),
            (Fault::Reset("INTERNAL_ERROR".into()), false, true),
            (Fault::Deadline { ms: 5 }, false, true),
            (Fault::Decode("bad".into()), false, true),
            (status(Code::Unavailable), true, true),
            (status(Code::Internal), false, true),
            (status(Code::InvalidArgument), false, false),
            (Fault::Unsupported(Unsupported("cache_salt".into())), false, false),
        ];
        for (fault, safe, blame) in cases {
            assert_eq!((fault.retry_safe(), fault.worker_fault()), (safe, blame), "{fault}");
        }
    }
}
