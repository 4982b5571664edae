//! Request heads: parsing with httparse and the framing decisions (length, chunked, keep-alive,
//! `Expect: 100-continue`). Every malformed or oversized head is an `ApiError` with the right
//! status (400, 413, 431), never a panic.
//!
//! Framing follows RFC 9112's strict reading, the one a smuggling-aware proxy in front applies,
//! so that both always agree on where a request ends: `Content-Length` is digits only,
//! `Transfer-Encoding` is exactly `chunked` and only on HTTP/1.1, never with a length; an
//! HTTP/1.1 request has exactly one `Host`; credentials come in one header, never two (which
//! one wins differs between servers). Anything else is a 400 and the connection is closed.

use crate::error::ApiError;
use crate::limits;

/// How the body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    None,
    Length(usize),
    Chunked,
}

/// A parsed request head.
#[derive(Debug, Clone)]
pub struct RequestHead {
    pub method: String,
    /// Path without the query string.
    pub path: String,
    pub query: Option<String>,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub version_minor: u8,
    pub framing: BodyFraming,
    pub keep_alive: bool,
    pub expect_continue: bool,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// A complete request.
#[derive(Debug, Clone)]
pub struct Request {
    pub head: RequestHead,
    pub body: Vec<u8>,
}

/// Headers a request may carry once at most (`host` first: HTTP/1.1 requires it).
const SINGLETON_HEADERS: [&str; 3] = ["host", "authorization", "x-api-key"];

/// Refuses a second copy of a header that must come once (names lowercased). HTTP/2 requests
/// are held to the same rule.
pub fn check_singletons<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), ApiError> {
    let mut seen = [false; SINGLETON_HEADERS.len()];
    for name in names {
        if let Some(i) = SINGLETON_HEADERS.iter().position(|s| *s == name) {
            if std::mem::replace(&mut seen[i], true) {
                return Err(ApiError::bad_request(format!("more than one {name} header")));
            }
        }
    }
    Ok(())
}

/// Parses a head from the start of `buf`. `Ok(None)`: incomplete, read more.
pub fn parse_head(buf: &[u8]) -> Result<Option<(RequestHead, usize)>, ApiError> {
    let mut headers = [httparse::EMPTY_HEADER; limits::http_header_count_max];
    let mut req = httparse::Request::new(&mut headers);
    // Only the bytes a head may occupy are looked at, so a fault past the limit is always the
    // limit (431), never a 400 that depends on how much of the stream TCP had delivered.
    let window = &buf[..buf.len().min(limits::http_header_bytes_max)];
    let len = match req.parse(window) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            if buf.len() > limits::http_header_bytes_max {
                return Err(ApiError::header_too_large(format!(
                    "request header fields exceed {} bytes",
                    limits::http_header_bytes_max
                )));
            }
            return Ok(None);
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err(ApiError::header_too_large(format!(
                "more than {} request header fields",
                limits::http_header_count_max
            )))
        }
        Err(e) => return Err(ApiError::bad_request(format!("malformed HTTP request: {e}"))),
    };
    let method = req.method.unwrap_or_default().to_string();
    let target = req.path.unwrap_or("/");
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), Some(q.to_string())),
        None => (target.to_string(), None),
    };
    let version_minor = req.version.unwrap_or(1);
    let mut content_length: Option<usize> = None;
    let mut chunked = false;
    let mut connection_close = false;
    let mut connection_keep_alive = false;
    let mut expect_continue = false;
    let mut out_headers = Vec::with_capacity(req.headers.len());
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        let value = std::str::from_utf8(h.value)
            .map_err(|_| ApiError::bad_request(format!("header {name} is not valid UTF-8")))?
            .trim()
            .to_string();
        match name.as_str() {
            "content-length" => {
                let invalid = || ApiError::bad_request(format!("invalid Content-Length: {value:?}"));
                // `str::parse` would also take a sign ("+5").
                if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(invalid());
                }
                let n: usize = value.parse().map_err(|_| invalid())?;
                if content_length.is_some_and(|prev| prev != n) {
                    return Err(ApiError::bad_request("conflicting Content-Length headers"));
                }
                content_length = Some(n);
            }
            "transfer-encoding" => {
                // Other codings (`gzip, chunked`) would have to be undone, which we do not do;
                // a second header line would mean chunked twice.
                if !value.eq_ignore_ascii_case("chunked") || chunked {
                    return Err(ApiError::bad_request(format!(
                        "unsupported Transfer-Encoding: {value} (only one, chunked, is accepted)"
                    )));
                }
                chunked = true;
            }
            "connection" => {
                for token in value.split(',') {
                    match token.trim().to_ascii_lowercase().as_str() {
                        "close" => connection_close = true,
                        "keep-alive" => connection_keep_alive = true,
                        _ => {}
                    }
                }
            }
            "expect" if value.eq_ignore_ascii_case("100-continue") => expect_continue = true,
            _ => {}
        }
        out_headers.push((name, value));
    }
    check_singletons(out_headers.iter().map(|(k, _)| k.as_str()))?;
    // Both length and chunked is the classic request-smuggling shape: refuse it.
    if chunked && content_length.is_some() {
        return Err(ApiError::bad_request("both Content-Length and Transfer-Encoding were sent"));
    }
    // HTTP/1.0 has no chunked framing: a 1.0 recipient would read the body by length or to EOF.
    if chunked && version_minor == 0 {
        return Err(ApiError::bad_request("Transfer-Encoding on an HTTP/1.0 request"));
    }
    if version_minor == 1 && !out_headers.iter().any(|(k, _)| k == "host") {
        return Err(ApiError::bad_request("HTTP/1.1 request without a Host header"));
    }
    let framing = match (chunked, content_length) {
        (true, _) => BodyFraming::Chunked,
        (false, Some(0)) | (false, None) => BodyFraming::None,
        (false, Some(n)) => BodyFraming::Length(n),
    };
    if let BodyFraming::Length(n) = framing {
        if n > limits::http_body_bytes_max {
            return Err(ApiError::payload_too_large(format!(
                "request body of {n} bytes exceeds the limit of {} bytes",
                limits::http_body_bytes_max
            )));
        }
    }
    let keep_alive = if version_minor == 0 { connection_keep_alive } else { !connection_close };
    Ok(Some((
        RequestHead { method, path, query, version_minor, framing, keep_alive, expect_continue, headers: out_headers },
        len,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str) -> Result<Option<RequestHead>, u16> {
        parse_head(raw.as_bytes()).map(|o| o.map(|(h, _)| h)).map_err(|e| e.status)
    }

    #[test]
    fn framing_and_keep_alive() {
        let h =
            parse("POST /v1/completions?x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello").unwrap().unwrap();
        assert_eq!(h.path, "/v1/completions");
        assert_eq!(h.query.as_deref(), Some("x=1"));
        assert_eq!(h.framing, BodyFraming::Length(5));
        assert!(h.keep_alive);
        let h = parse("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, BodyFraming::Chunked);
        assert!(!h.keep_alive);
        let h = parse("GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!h.keep_alive);
        let h = parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").unwrap().unwrap();
        assert!(h.keep_alive);
        let h =
            parse("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n").unwrap().unwrap();
        assert!(h.expect_continue);
    }

    #[test]
    fn lenient_framing_is_refused() {
        let ok = "POST / HTTP/1.1\r\nHost: x\r\n";
        let cases: Vec<(String, &str)> = vec![
            (format!("{ok}Content-Length: +5\r\n\r\n"), "invalid Content-Length"),
            (format!("{ok}Content-Length: -0\r\n\r\n"), "invalid Content-Length"),
            (format!("{ok}Content-Length: 5 5\r\n\r\n"), "invalid Content-Length"),
            (format!("{ok}Content-Length: 0x5\r\n\r\n"), "invalid Content-Length"),
            (format!("{ok}Transfer-Encoding: gzip, chunked\r\n\r\n"), "unsupported Transfer-Encoding"),
            (format!("{ok}Transfer-Encoding: chunked, chunked\r\n\r\n"), "unsupported Transfer-Encoding"),
            (format!("{ok}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"), "unsupported"),
            (format!("{ok}Transfer-Encoding: xchunked\r\n\r\n"), "unsupported Transfer-Encoding"),
            ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n".into(), "HTTP/1.0"),
            ("GET / HTTP/1.1\r\n\r\n".into(), "without a Host"),
            ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".into(), "more than one host"),
            (format!("{ok}Authorization: Bearer a\r\nauthorization: Bearer b\r\n\r\n"), "more than one authorization"),
            (format!("{ok}X-Api-Key: a\r\nx-api-key: a\r\n\r\n"), "more than one x-api-key"),
        ];
        for (raw, expected) in cases {
            let e = parse_head(raw.as_bytes()).unwrap_err();
            assert_eq!(e.status, 400, "{raw:?}");
            assert!(e.message.contains(expected), "{raw:?}: {}", e.message);
        }
        // What stays legal: HTTP/1.0 without Host, chunked in any case, an empty Host, leading
        // zeros, one credential header of each kind.
        let legal = [
            "GET / HTTP/1.0\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n",
            "GET / HTTP/1.1\r\nHost:\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 007\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\r\nX-Api-Key: a\r\n\r\n",
        ];
        for raw in legal {
            assert!(parse(raw).unwrap().is_some(), "{raw:?}");
        }
    }

    #[test]
    fn partial_heads_wait_for_more() {
        assert!(parse("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le").unwrap().is_none());
        assert!(parse("").unwrap().is_none());
    }

    #[test]
    fn bad_heads_get_the_right_status() {
        let huge = format!("GET / HTTP/1.1\r\nHost: x\r\nX: {}\r\n", "a".repeat(limits::http_header_bytes_max + 10));
        let many: String = (0..200).map(|i| format!("X-{i}: v\r\n")).collect();
        let cases: Vec<(String, u16)> = vec![
            ("GARBAGE\r\n\r\n".into(), 400),
            ("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n".into(), 400),
            ("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n".into(), 400),
            ("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n".into(), 400),
            ("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n".into(), 400),
            (format!("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n", limits::http_body_bytes_max + 1), 413),
            (huge, 431),
            (format!("GET / HTTP/1.1\r\nHost: x\r\n{many}\r\n"), 431),
            // A bad byte past the limit: still the limit, however much of the stream is here.
            (
                format!(
                    "GET / HTTP/1.1\r\nHost: x\r\nX: {}\x01\r\n\r\n",
                    "a".repeat(limits::http_header_bytes_max + 10)
                ),
                431,
            ),
        ];
        for (raw, status) in cases {
            assert_eq!(parse(&raw).unwrap_err(), status, "request {:?}", &raw[..raw.len().min(60)]);
        }
    }
}
