//! gRPC status: the code and message a call ends with (`grpc-status` / `grpc-message` in the
//! trailers, or in the headers of a trailers-only answer), and the `grpc-timeout` header.

use http::HeaderMap;

/// gRPC's status codes (the numbering every implementation shares).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Ok,
    Cancelled,
    Unknown,
    InvalidArgument,
    DeadlineExceeded,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Aborted,
    OutOfRange,
    Unimplemented,
    Internal,
    Unavailable,
    DataLoss,
    Unauthenticated,
}

const CODES: [Code; 17] = [
    Code::Ok,
    Code::Cancelled,
    Code::Unknown,
    Code::InvalidArgument,
    Code::DeadlineExceeded,
    Code::NotFound,
    Code::AlreadyExists,
    Code::PermissionDenied,
    Code::ResourceExhausted,
    Code::FailedPrecondition,
    Code::Aborted,
    Code::OutOfRange,
    Code::Unimplemented,
    Code::Internal,
    Code::Unavailable,
    Code::DataLoss,
    Code::Unauthenticated,
];

impl Code {
    /// A number outside gRPC's table is UNKNOWN, as the gRPC spec says a client must read it.
    pub fn from_number(n: u32) -> Code {
        CODES.get(n as usize).copied().unwrap_or(Code::Unknown)
    }

    /// The spec's upper-case name, as SMG and grpcio print it.
    pub fn name(self) -> &'static str {
        match self {
            Code::Ok => "OK",
            Code::Cancelled => "CANCELLED",
            Code::Unknown => "UNKNOWN",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::OutOfRange => "OUT_OF_RANGE",
            Code::Unimplemented => "UNIMPLEMENTED",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::DataLoss => "DATA_LOSS",
            Code::Unauthenticated => "UNAUTHENTICATED",
        }
    }
}

/// How a call ended, as the worker said it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: Code,
    pub message: String,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.name(), self.message)
    }
}

impl Status {
    /// The status in `headers` (trailers, or the headers of a trailers-only answer); `None`
    /// when they carry no `grpc-status`.
    pub fn from_headers(headers: &HeaderMap) -> Option<Status> {
        let raw = headers.get("grpc-status")?;
        // A status that is not a number is UNKNOWN rather than a silent OK.
        let code = raw.to_str().ok().and_then(|s| s.parse::<u32>().ok()).map_or(Code::Unknown, Code::from_number);
        let message = headers.get("grpc-message").map(|m| percent_decode(m.as_bytes())).unwrap_or_default();
        Some(Status { code, message })
    }
}

/// `grpc-message` is percent-encoded UTF-8; a malformed escape stays as written (the spec
/// asks a client to keep what it cannot decode rather than fail the call over it).
fn percent_decode(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let escaped = match raw[i] {
            b'%' => raw
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok()),
            _ => None,
        };
        match escaped {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(raw[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `grpc-timeout` value for a deadline `ms` from now: at most eight digits, so a long
/// deadline is sent in a coarser unit (the spec's `TimeoutValue`).
pub fn timeout_header(ms: u64) -> String {
    const UNITS: [(u64, char); 3] = [(1, 'm'), (1_000, 'S'), (60_000, 'M')];
    for (per, unit) in UNITS {
        let v = ms.div_ceil(per);
        if v < 100_000_000 {
            return format!("{v}{unit}");
        }
    }
    format!("{}H", ms.div_ceil(3_600_000).min(99_999_999))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_from_headers() {
        type Want<'a> = Option<(Code, &'a str)>;
        let cases: [(&str, Option<&str>, Want); 6] = [
            ("0", None, Some((Code::Ok, ""))),
            (
                "3",
                Some("max_tokens%20must%20be%20at%20least%201"),
                Some((Code::InvalidArgument, "max_tokens must be at least 1")),
            ),
            ("14", Some("caf%C3%A9 down"), Some((Code::Unavailable, "café down"))),
            ("99", Some("bad%zz and 100%"), Some((Code::Unknown, "bad%zz and 100%"))),
            ("x", None, Some((Code::Unknown, ""))),
            ("", None, Some((Code::Unknown, ""))),
        ];
        for (status, message, want) in cases {
            let mut h = HeaderMap::new();
            h.insert("grpc-status", status.parse().unwrap());
            if let Some(m) = message {
                h.insert("grpc-message", m.parse().unwrap());
            }
            let got = Status::from_headers(&h).map(|s| (s.code, s.message));
            assert_eq!(got, want.map(|(c, m)| (c, m.to_string())), "{status} {message:?}");
        }
        assert_eq!(Status::from_headers(&HeaderMap::new()), None);
    }

    #[test]
    fn timeout_header_fits_eight_digits() {
        let cases =
            [(0, "0m"), (250, "250m"), (99_999_999, "99999999m"), (100_000_000, "100000S"), (u64::MAX, "99999999H")];
        for (ms, want) in cases {
            assert_eq!(timeout_header(ms), want, "{ms}");
        }
    }
}
