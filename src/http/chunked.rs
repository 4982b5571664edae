//! Incremental decoding of `Transfer-Encoding: chunked` request bodies. Fed whatever bytes have
//! arrived; says how many it consumed and whether the body is complete. Chunk extensions and
//! trailers are accepted and ignored; sizes are bounded by the body limit.
//!
//! Strict as RFC 9112 section 7.1 reads (what a smuggling-aware proxy in front enforces, so
//! both sides agree on where the body ends): a chunk size is hex digits only (no sign, no
//! spaces), every line ends in CRLF (a bare LF or a bare CR is refused as soon as it is seen,
//! not waited on), and chunk data is followed by CRLF.

use crate::error::ApiError;
use crate::limits;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a `size[;ext]\r\n` line.
    Size,
    /// Reading `remaining` data bytes.
    Data(usize),
    /// Expecting the `\r\n` after a chunk's data.
    DataEnd,
    /// After the zero chunk: trailer lines until an empty one.
    Trailer,
    Done,
}

pub struct ChunkedDecoder {
    state: State,
    pub body: Vec<u8>,
    limit: usize,
}

impl ChunkedDecoder {
    pub fn new(limit: usize) -> Self {
        ChunkedDecoder { state: State::Size, body: Vec::new(), limit }
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes from `input`; returns the number of bytes used.
    pub fn feed(&mut self, input: &[u8]) -> Result<usize, ApiError> {
        let mut pos = 0;
        while pos < input.len() && self.state != State::Done {
            match self.state {
                State::Size => {
                    let Some(eol) = find_line_end(&input[pos..])? else {
                        // + 1: the line's CR may already be here without its LF.
                        if input.len() - pos > limits::http_chunk_size_line_bytes_max + 1 {
                            return Err(ApiError::bad_request("malformed chunked body: size line too long"));
                        }
                        return Ok(pos);
                    };
                    // The same limit whether the line arrived whole or in pieces.
                    if eol > limits::http_chunk_size_line_bytes_max {
                        return Err(ApiError::bad_request("malformed chunked body: size line too long"));
                    }
                    let line = &input[pos..pos + eol];
                    let size = chunk_size(line.split(|&b| b == b';').next().unwrap_or(&[]))?;
                    pos += eol + 2;
                    if size == 0 {
                        self.state = State::Trailer;
                    } else {
                        if self.body.len().saturating_add(size) > self.limit {
                            return Err(ApiError::payload_too_large(format!(
                                "request body exceeds the limit of {} bytes",
                                self.limit
                            )));
                        }
                        self.state = State::Data(size);
                    }
                }
                State::Data(remaining) => {
                    let take = remaining.min(input.len() - pos);
                    self.body.extend_from_slice(&input[pos..pos + take]);
                    pos += take;
                    self.state = if take == remaining { State::DataEnd } else { State::Data(remaining - take) };
                }
                State::DataEnd => {
                    // A wrong first byte is refused at once rather than waited on.
                    if input.len() - pos < 2 && input[pos] == b'\r' {
                        return Ok(pos);
                    }
                    if !input[pos..].starts_with(b"\r\n") {
                        return Err(ApiError::bad_request("malformed chunked body: missing CRLF after chunk"));
                    }
                    pos += 2;
                    self.state = State::Size;
                }
                State::Trailer => {
                    let Some(eol) = find_line_end(&input[pos..])? else {
                        // + 1: the line's CR may already be here without its LF.
                        if input.len() - pos > limits::http_chunk_size_line_bytes_max + 1 {
                            return Err(ApiError::bad_request("malformed chunked body: trailer too long"));
                        }
                        return Ok(pos);
                    };
                    if eol > limits::http_chunk_size_line_bytes_max {
                        return Err(ApiError::bad_request("malformed chunked body: trailer too long"));
                    }
                    pos += eol + 2;
                    if eol == 0 {
                        self.state = State::Done;
                    }
                }
                State::Done => {}
            }
        }
        Ok(pos)
    }
}

/// Where the first line of `b` ends (the index of its CR), `None` while no LF has arrived.
/// A line must end in CRLF and hold no other CR: lenient parsers disagree on bare line ends,
/// which is how a body is made to end in different places for a proxy and for us.
fn find_line_end(b: &[u8]) -> Result<Option<usize>, ApiError> {
    let Some(lf) = memchr::memchr(b'\n', b) else { return Ok(None) };
    match b[..lf].iter().position(|&c| c == b'\r') {
        Some(cr) if cr + 1 == lf => Ok(Some(cr)),
        Some(_) => Err(ApiError::bad_request("malformed chunked body: bare CR in a line")),
        None => Err(ApiError::bad_request("malformed chunked body: line ends in a bare LF, not CRLF")),
    }
}

/// `1*HEXDIG`, nothing else (no sign, no whitespace).
fn chunk_size(hex: &[u8]) -> Result<usize, ApiError> {
    let bad =
        || ApiError::bad_request(format!("malformed chunked body: bad chunk size {:?}", String::from_utf8_lossy(hex)));
    if hex.is_empty() || !hex.iter().all(u8::is_ascii_hexdigit) {
        return Err(bad());
    }
    // All hex digits, so UTF-8; too many of them overflow, which is an error too.
    usize::from_str_radix(std::str::from_utf8(hex).map_err(|_| bad())?, 16).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_pieces(raw: &[u8], piece: usize) -> Result<(Vec<u8>, usize), ApiError> {
        let mut d = ChunkedDecoder::new(1 << 20);
        let mut buf: Vec<u8> = Vec::new();
        let mut consumed_total = 0;
        for chunk in raw.chunks(piece) {
            buf.extend_from_slice(chunk);
            let used = d.feed(&buf)?;
            buf.drain(..used);
            consumed_total += used;
            if d.is_done() {
                break;
            }
        }
        assert!(d.is_done(), "not done");
        Ok((d.body, consumed_total))
    }

    #[test]
    fn decodes_at_every_split() {
        let raw = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
        for piece in 1..raw.len() {
            let (body, used) = decode_in_pieces(raw, piece).unwrap();
            assert_eq!(body, b"hello world", "piece {piece}");
            assert_eq!(used, raw.len() - 4, "piece {piece}");
        }
    }

    #[test]
    fn rejects_malformed_and_oversized() {
        let mut d = ChunkedDecoder::new(4);
        assert_eq!(d.feed(b"5\r\nhello\r\n").unwrap_err().status, 413);
        let mut d = ChunkedDecoder::new(100);
        assert_eq!(d.feed(b"zz\r\n").unwrap_err().status, 400);
        let mut d = ChunkedDecoder::new(100);
        assert_eq!(d.feed(b"2\r\nabXX").unwrap_err().status, 400);
    }

    #[test]
    fn lenient_framing_is_refused_at_once_however_the_bytes_arrive() {
        // Each body is refused (400) as soon as the offending byte is in, never waited on.
        let cases: [&[u8]; 10] = [
            b"+5\r\nhello\r\n0\r\n\r\n",
            b" 5\r\nhello\r\n0\r\n\r\n",
            b"5 \r\nhello\r\n0\r\n\r\n",
            b"5 ;ext\r\nhello\r\n0\r\n\r\n",
            b"0x5\r\nhello\r\n0\r\n\r\n",
            b"\r\nhello\r\n0\r\n\r\n",
            b"5\nhello\n0\n\n",
            b"5\r\nhello\n0\r\n\r\n",
            b"5\r\nhello\r\n0\r\nX-T: 1\n\r\n",
            b"5\rX\r\nhello\r\n0\r\n\r\n",
        ];
        for raw in cases {
            for piece in 1..=raw.len() {
                let mut d = ChunkedDecoder::new(1 << 20);
                let mut buf: Vec<u8> = Vec::new();
                let mut status = None;
                for chunk in raw.chunks(piece) {
                    buf.extend_from_slice(chunk);
                    match d.feed(&buf) {
                        Ok(used) => {
                            buf.drain(..used);
                        }
                        Err(e) => {
                            status = Some(e.status);
                            break;
                        }
                    }
                }
                assert_eq!(status, Some(400), "{:?} in pieces of {piece}", String::from_utf8_lossy(raw));
            }
        }
        // Legitimate forms still decode: upper-case hex, leading zeros, extensions, trailers.
        let ok: [(&[u8], &[u8]); 3] = [
            (b"A\r\n0123456789\r\n0\r\n\r\n", b"0123456789"),
            (b"005;a=b;c\r\nhello\r\n000\r\nX-T: 1\r\n\r\n", b"hello"),
            (b"0\r\n\r\n", b""),
        ];
        for (raw, body) in ok {
            assert_eq!(decode_in_pieces(raw, 1).unwrap().0, body, "{:?}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn line_limits_do_not_depend_on_how_bytes_arrive() {
        let long_ext = format!("3;{}\r\nabc\r\n0\r\n\r\n", "e".repeat(limits::http_chunk_size_line_bytes_max));
        let long_trailer =
            format!("3\r\nabc\r\n0\r\nX-T: {}\r\n\r\n", "t".repeat(limits::http_chunk_size_line_bytes_max));
        let exact = format!("3;{}\r\nabc\r\n0\r\n\r\n", "e".repeat(limits::http_chunk_size_line_bytes_max - 2));
        for piece in [
            1,
            7,
            limits::http_chunk_size_line_bytes_max,
            limits::http_chunk_size_line_bytes_max + 1,
            limits::http_chunk_size_line_bytes_max + 2,
            1 << 20,
        ] {
            for raw in [&long_ext, &long_trailer] {
                assert_eq!(decode_in_pieces(raw.as_bytes(), piece).unwrap_err().status, 400, "piece {piece}");
            }
            assert_eq!(decode_in_pieces(exact.as_bytes(), piece).unwrap().0, b"abc", "piece {piece}");
        }
    }
}
