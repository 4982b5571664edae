//! An HTTP/1.1 response read from a connection: the head (status, the headers this client
//! uses, how the body is framed) and a 2xx body under the byte limit, framed by
//! `Content-Length`, chunked transfer coding, or the connection's close (RFC 9112 §6.3).

use std::io::{BufRead, Read};

use crate::{limits, FetchError};

/// How the body's end is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Length(u64),
    Chunked,
    /// Neither: the body runs to the connection's close.
    Close,
    /// 204 and 304 have none.
    Empty,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    pub location: Option<String>,
    /// `Content-Type`'s media type, lowercase, without parameters.
    pub content_type: Option<String>,
    pub framing: Framing,
}

/// A line up to its `\n`, at most `max` bytes; `Ok(None)` at the end of the stream. `what`
/// names the part for the error when the line is longer.
fn line(r: &mut impl BufRead, max: usize, what: &'static str) -> std::io::Result<Option<Vec<u8>>> {
    let mut out = Vec::new();
    r.take(max as u64 + 1).read_until(b'\n', &mut out)?;
    if out.is_empty() {
        return Ok(None);
    }
    if !out.ends_with(b"\n") {
        let kind = if out.len() > max { std::io::ErrorKind::InvalidData } else { std::io::ErrorKind::UnexpectedEof };
        return Err(std::io::Error::new(kind, what));
    }
    Ok(Some(out))
}

/// The final response's head; informational (1xx) heads before it are skipped.
pub fn read_head(r: &mut impl BufRead, io: impl Fn(std::io::Error) -> FetchError) -> Result<Head, FetchError> {
    loop {
        let mut raw = Vec::new();
        loop {
            let left = limits::response_head_bytes_max.saturating_sub(raw.len());
            let l = line(r, left, "the response head is too long").map_err(|e| head_error(e, &io))?;
            let l = l.ok_or(FetchError::Protocol("the connection closed before a response"))?;
            let end = l == b"\r\n" || l == b"\n";
            raw.extend_from_slice(&l);
            if end && raw.len() > l.len() {
                break;
            }
        }
        let head = parse_head(&raw)?;
        if !(100..200).contains(&head.status) {
            return Ok(head);
        }
        if head.status == 101 {
            return Err(FetchError::Protocol("a protocol switch was not asked for"));
        }
    }
}

fn head_error(e: std::io::Error, io: &impl Fn(std::io::Error) -> FetchError) -> FetchError {
    match e.kind() {
        std::io::ErrorKind::InvalidData => FetchError::Protocol("the response head is too long"),
        std::io::ErrorKind::UnexpectedEof => FetchError::Protocol("the connection closed inside the response head"),
        _ => io(e),
    }
}

fn parse_head(raw: &[u8]) -> Result<Head, FetchError> {
    let mut headers = [httparse::EMPTY_HEADER; limits::response_headers_max];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(raw) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(FetchError::Protocol("an incomplete response head")),
        Err(httparse::Error::TooManyHeaders) => return Err(FetchError::Protocol("too many response headers")),
        Err(_) => return Err(FetchError::Protocol("a malformed response head")),
    }
    let status = response.code.ok_or(FetchError::Protocol("no status"))?;
    let value = |name: &'static str| {
        response
            .headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value))
    };
    let location = value("location").next().map(|v| v.trim().to_string());
    let content_type = value("content-type")
        .next()
        .and_then(|v| v.split(';').next().map(|t| t.trim().to_ascii_lowercase()))
        .filter(|t| !t.is_empty());
    let codings: Vec<String> = value("transfer-encoding")
        .flat_map(|v| v.split(',').map(|c| c.trim().to_ascii_lowercase()).collect::<Vec<_>>())
        .collect();
    let mut lengths =
        value("content-length").flat_map(|v| v.split(',').map(|l| l.trim().to_string()).collect::<Vec<_>>());
    let framing = if status == 204 || status == 304 {
        Framing::Empty
    } else if !codings.is_empty() {
        // Chunked last or not at all; any other coding's end is the close (§6.3 rule 4).
        if codings.last().map(String::as_str) == Some("chunked") {
            Framing::Chunked
        } else {
            Framing::Close
        }
    } else if let Some(first) = lengths.next() {
        let n = content_length(&first)?;
        if lengths.any(|other| content_length(&other) != Ok(n)) {
            return Err(FetchError::Protocol("conflicting Content-Length headers"));
        }
        Framing::Length(n)
    } else {
        Framing::Close
    };
    Ok(Head { status, location, content_type, framing })
}

fn content_length(v: &str) -> Result<u64, FetchError> {
    let valid = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
    valid.then(|| v.parse::<u64>().ok()).flatten().ok_or(FetchError::Protocol("an invalid Content-Length"))
}

/// The body, at most `max_bytes` of it: a `Content-Length` over the limit is refused before a
/// byte is read; a chunked or close-framed body is cut off at the limit.
pub fn read_body(
    r: &mut impl BufRead,
    framing: Framing,
    max_bytes: usize,
    io: impl Fn(std::io::Error) -> FetchError,
) -> Result<Vec<u8>, FetchError> {
    let too_large = FetchError::TooLarge { max_bytes };
    match framing {
        Framing::Empty => Ok(Vec::new()),
        Framing::Length(n) => {
            if n > max_bytes as u64 {
                return Err(too_large);
            }
            let mut body = Vec::with_capacity(n as usize);
            r.take(n).read_to_end(&mut body).map_err(&io)?;
            if (body.len() as u64) < n {
                return Err(FetchError::Truncated);
            }
            Ok(body)
        }
        Framing::Close => {
            let mut body = Vec::new();
            r.take(max_bytes as u64 + 1).read_to_end(&mut body).map_err(&io)?;
            if body.len() > max_bytes {
                return Err(too_large);
            }
            Ok(body)
        }
        Framing::Chunked => chunked(r, max_bytes, io),
    }
}

/// Chunked transfer coding (RFC 9112 §7.1): sizes in hex, extensions and trailers skipped.
fn chunked(
    r: &mut impl BufRead,
    max_bytes: usize,
    io: impl Fn(std::io::Error) -> FetchError,
) -> Result<Vec<u8>, FetchError> {
    let line = |r: &mut _| match line(r, limits::chunk_line_bytes_max, "a chunk line is too long") {
        Ok(Some(l)) => Ok(l),
        Ok(None) => Err(FetchError::Truncated),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => Err(FetchError::Protocol("a chunk line is too long")),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(FetchError::Truncated),
        Err(e) => Err(io(e)),
    };
    let mut body = Vec::new();
    loop {
        let size_line = line(r)?;
        let text = std::str::from_utf8(&size_line).map_err(|_| FetchError::Protocol("an invalid chunk size"))?;
        let hex = text.split(';').next().unwrap_or_default().trim();
        let size = (!hex.is_empty() && hex.len() <= 16)
            .then(|| u64::from_str_radix(hex, 16).ok())
            .flatten()
            .ok_or(FetchError::Protocol("an invalid chunk size"))?;
        if size == 0 {
            while !matches!(line(r)?.as_slice(), b"\r\n" | b"\n") {}
            return Ok(body);
        }
        if (body.len() as u64).saturating_add(size) > max_bytes as u64 {
            return Err(FetchError::TooLarge { max_bytes });
        }
        let before = body.len();
        r.take(size).read_to_end(&mut body).map_err(&io)?;
        if ((body.len() - before) as u64) < size {
            return Err(FetchError::Truncated);
        }
        if !matches!(line(r)?.as_slice(), b"\r\n" | b"\n") {
            return Err(FetchError::Protocol("a chunk longer than its size"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(e: std::io::Error) -> FetchError {
        FetchError::Io(e.to_string())
    }

    #[test]
    fn heads() {
        let head = |status, location: Option<&str>, content_type: Option<&str>, framing| Head {
            status,
            location: location.map(str::to_string),
            content_type: content_type.map(str::to_string),
            framing,
        };
        let cases: Vec<(&str, Result<Head, FetchError>)> = vec![
            (
                "HTTP/1.1 200 OK\r\nContent-Type: Image/PNG; q=1\r\nContent-Length: 12\r\n\r\n",
                Ok(head(200, None, Some("image/png"), Framing::Length(12))),
            ),
            (
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 3\r\n\r\n",
                Ok(head(200, None, None, Framing::Chunked)),
            ),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", Ok(head(200, None, None, Framing::Close))),
            ("HTTP/1.0 200 OK\n\n", Ok(head(200, None, None, Framing::Close))),
            ("HTTP/1.1 302 Found\r\nLocation:  /b \r\n\r\n", Ok(head(302, Some("/b"), None, Framing::Close))),
            ("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", Ok(head(204, None, None, Framing::Empty))),
            ("HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n", Ok(head(200, None, None, Framing::Length(3)))),
            ("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", Err(FetchError::Protocol("conflicting Content-Length headers"))),
            ("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", Err(FetchError::Protocol("an invalid Content-Length"))),
            ("HTTP/1.1 101 Switching\r\n\r\n", Err(FetchError::Protocol("a protocol switch was not asked for"))),
            ("HTTP/1.1 200 OK\r\nContent-", Err(FetchError::Protocol("the connection closed inside the response head"))),
            ("", Err(FetchError::Protocol("the connection closed before a response"))),
            ("SSH-2.0-OpenSSH\r\n\r\n", Err(FetchError::Protocol("a malformed response head"))),
        ];
        for (raw, want) in cases {
            assert_eq!(read_head(&mut raw.as_bytes(), io), want, "{raw:?}");
        }
        let long = format!("HTTP/1.1 200 OK\r\nX: {}\r\n\r\n", "y".repeat(limits::response_head_bytes_max));
        assert_eq!(read_head(&mut long.as_bytes(), io), Err(FetchError::Protocol("the response head is too long")));
    }

    /// What the server sent, its framing, the byte limit, and the body wanted.
    type Case = (&'static str, Framing, usize, Result<&'static [u8], FetchError>);

    #[test]
    fn bodies() {
        let cases: Vec<Case> = vec![
            ("hello", Framing::Length(5), 5, Ok(b"hello")),
            ("hello, and more", Framing::Length(5), 5, Ok(b"hello")),
            ("hel", Framing::Length(5), 5, Err(FetchError::Truncated)),
            ("hello", Framing::Length(6), 5, Err(FetchError::TooLarge { max_bytes: 5 })),
            ("hello", Framing::Close, 5, Ok(b"hello")),
            ("hello!", Framing::Close, 5, Err(FetchError::TooLarge { max_bytes: 5 })),
            ("anything", Framing::Empty, 5, Ok(b"")),
            ("3;ext=1\r\nhel\r\n2\r\nlo\r\n0\r\nTrailer: x\r\n\r\n", Framing::Chunked, 5, Ok(b"hello")),
            ("3\nhel\n2\nlo\n0\n\n", Framing::Chunked, 5, Ok(b"hello")),
            ("3\r\nhel\r\n3\r\nlo!\r\n0\r\n\r\n", Framing::Chunked, 5, Err(FetchError::TooLarge { max_bytes: 5 })),
            ("3\r\nhel\r\n2\r\nl", Framing::Chunked, 5, Err(FetchError::Truncated)),
            ("3\r\nhel", Framing::Chunked, 5, Err(FetchError::Truncated)),
            ("3\r\nhello\r\n0\r\n\r\n", Framing::Chunked, 9, Err(FetchError::Protocol("a chunk longer than its size"))),
            ("zz\r\n", Framing::Chunked, 5, Err(FetchError::Protocol("an invalid chunk size"))),
            ("\r\n", Framing::Chunked, 5, Err(FetchError::Protocol("an invalid chunk size"))),
            ("fffffffffffffffff\r\n", Framing::Chunked, 5, Err(FetchError::Protocol("an invalid chunk size"))),
            ("ffffffffffffffff\r\n", Framing::Chunked, 5, Err(FetchError::TooLarge { max_bytes: 5 })),
        ];
        for (raw, framing, max, want) in cases {
            let got = read_body(&mut raw.as_bytes(), framing, max, io);
            assert_eq!(got, want.map(<[u8]>::to_vec), "{raw:?} {framing:?}");
        }
    }
}
