//! An upstream's response head: status, the headers worth relaying, and how the body is framed
//! (RFC 9112 section 6.3, as a client reads it).

use super::fault::UpstreamFault;

/// How the response body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (1xx, 204, 304, or a `HEAD`).
    Empty,
    Length(usize),
    Chunked,
    /// Until the upstream closes the connection.
    Close,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    pub content_type: Option<String>,
    /// End-to-end headers to relay to the client (framing, hop-by-hop and the ones the gateway
    /// writes itself are left out).
    pub relayed: Vec<(String, String)>,
    pub framing: Framing,
    /// The upstream allows the connection to be reused after this response.
    pub keep_alive: bool,
}

impl ResponseHead {
    pub fn is_event_stream(&self) -> bool {
        self.content_type.as_deref().is_some_and(|t| t.trim_start().starts_with("text/event-stream"))
    }
}

/// Headers a relay never copies: hop-by-hop ones (RFC 9110 section 7.6.1), the framing the
/// gateway sets itself, and the ones its own responses carry.
pub fn is_hop_or_own(name: &str) -> bool {
    const SKIPPED: &[&str] = &[
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "content-type",
        "host",
        "date",
        "server",
    ];
    SKIPPED.iter().any(|s| s.eq_ignore_ascii_case(name))
}

/// Parses the head at the start of `buf`: `Ok(None)` until it is complete, then the head and
/// its length.
pub fn parse(buf: &[u8]) -> Result<Option<(ResponseHead, usize)>, UpstreamFault> {
    let mut headers = [httparse::EMPTY_HEADER; 96];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            if buf.len() > crate::limits::upstream_head_bytes_max {
                return Err(UpstreamFault::Malformed("response head too large".into()));
            }
            return Ok(None);
        }
        Err(e) => return Err(UpstreamFault::Malformed(format!("bad response head: {e}"))),
    };
    let status = response.code.unwrap_or(0);
    let http10 = response.version == Some(0);
    let mut content_type = None;
    let mut relayed = Vec::new();
    let mut length: Option<usize> = None;
    let mut chunked = false;
    let mut close = http10;
    for h in response.headers.iter() {
        let value = std::str::from_utf8(h.value)
            .map_err(|_| UpstreamFault::Malformed(format!("header {} is not UTF-8", h.name)))?
            .trim();
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            let n = value
                .parse::<usize>()
                .map_err(|_| UpstreamFault::Malformed(format!("bad content-length '{value}'")))?;
            if length.is_some_and(|m| m != n) {
                return Err(UpstreamFault::Malformed("conflicting content-length headers".into()));
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.rsplit(',').next().is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
            if !chunked {
                return Err(UpstreamFault::Malformed(format!("unsupported transfer-encoding '{value}'")));
            }
        } else if name.eq_ignore_ascii_case("connection") {
            let has = |token: &str| value.split(',').any(|t| t.trim().eq_ignore_ascii_case(token));
            close = if http10 { !has("keep-alive") } else { has("close") };
        } else if name.eq_ignore_ascii_case("content-type") {
            content_type = Some(value.to_string());
        } else if !is_hop_or_own(name) {
            relayed.push((name.to_ascii_lowercase(), value.to_string()));
        }
    }
    let framing = if (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::Empty
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        close = true;
        Framing::Close
    };
    Ok(Some((ResponseHead { status, content_type, relayed, framing, keep_alive: !close }, len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_give_status_framing_and_what_to_relay() {
        let cases: &[(&str, Framing, bool, usize)] = &[
            ("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n", Framing::Length(5), true, 0),
            ("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nx-request-id: a\r\n\r\n", Framing::Chunked, true, 1),
            ("HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 1\r\n\r\n", Framing::Length(1), false, 0),
            ("HTTP/1.1 200 OK\r\n\r\n", Framing::Close, false, 0),
            ("HTTP/1.0 200 OK\r\ncontent-length: 1\r\n\r\n", Framing::Length(1), false, 0),
            ("HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 1\r\n\r\n", Framing::Length(1), true, 0),
            ("HTTP/1.1 204 No Content\r\nserver: x\r\n\r\n", Framing::Empty, true, 0),
        ];
        for (text, framing, keep_alive, relayed) in cases {
            let (head, len) = parse(text.as_bytes()).unwrap().unwrap();
            assert_eq!(len, text.len(), "{text:?}");
            assert_eq!(
                (head.framing, head.keep_alive, head.relayed.len()),
                (*framing, *keep_alive, *relayed),
                "{text:?}"
            );
        }
    }

    #[test]
    fn a_partial_head_waits_and_a_bad_one_is_malformed() {
        assert_eq!(parse(b"HTTP/1.1 200 OK\r\ncontent-le").unwrap(), None);
        for bad in [
            &b"HTTP/1.1 2x0 OK\r\n\r\n"[..],
            b"SSH-2.0-OpenSSH\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n",
        ] {
            assert!(matches!(parse(bad), Err(UpstreamFault::Malformed(_))), "{:?}", String::from_utf8_lossy(bad));
        }
        let mut huge = b"HTTP/1.1 200 OK\r\nx: ".to_vec();
        huge.resize(crate::limits::upstream_head_bytes_max + 10, b'a');
        assert!(parse(&huge).is_err());
    }
}
