//! Incremental decoding of `Transfer-Encoding: chunked` request bodies. Fed whatever bytes have
//! arrived; says how many it consumed and whether the body is complete. Chunk extensions and
//! trailers are accepted and ignored; sizes are bounded by the body limit.

use crate::error::ApiError;

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

/// Longest size line we accept (hex digits plus extensions).
const SIZE_LINE_MAX: usize = 4096;

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
                    let Some(eol) = find_crlf(&input[pos..]) else {
                        // + 1: the line's CR may already be here without its LF.
                        if input.len() - pos > SIZE_LINE_MAX + 1 {
                            return Err(ApiError::bad_request("malformed chunked body: size line too long"));
                        }
                        return Ok(pos);
                    };
                    // The same limit whether the line arrived whole or in pieces.
                    if eol > SIZE_LINE_MAX {
                        return Err(ApiError::bad_request("malformed chunked body: size line too long"));
                    }
                    let line = &input[pos..pos + eol];
                    let hex = line.split(|&b| b == b';').next().unwrap_or(&[]);
                    let hex = std::str::from_utf8(hex).unwrap_or("").trim();
                    let size = usize::from_str_radix(hex, 16).map_err(|_| {
                        ApiError::bad_request(format!("malformed chunked body: bad chunk size {hex:?}"))
                    })?;
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
                    if input.len() - pos < 2 {
                        return Ok(pos);
                    }
                    if &input[pos..pos + 2] != b"\r\n" {
                        return Err(ApiError::bad_request("malformed chunked body: missing CRLF after chunk"));
                    }
                    pos += 2;
                    self.state = State::Size;
                }
                State::Trailer => {
                    let Some(eol) = find_crlf(&input[pos..]) else {
                        // + 1: the line's CR may already be here without its LF.
                        if input.len() - pos > SIZE_LINE_MAX + 1 {
                            return Err(ApiError::bad_request("malformed chunked body: trailer too long"));
                        }
                        return Ok(pos);
                    };
                    if eol > SIZE_LINE_MAX {
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

fn find_crlf(b: &[u8]) -> Option<usize> {
    memchr::memmem::find(b, b"\r\n")
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
    fn line_limits_do_not_depend_on_how_bytes_arrive() {
        let long_ext = format!("3;{}\r\nabc\r\n0\r\n\r\n", "e".repeat(SIZE_LINE_MAX));
        let long_trailer = format!("3\r\nabc\r\n0\r\nX-T: {}\r\n\r\n", "t".repeat(SIZE_LINE_MAX));
        let exact = format!("3;{}\r\nabc\r\n0\r\n\r\n", "e".repeat(SIZE_LINE_MAX - 2));
        for piece in [1, 7, SIZE_LINE_MAX, SIZE_LINE_MAX + 1, SIZE_LINE_MAX + 2, 1 << 20] {
            for raw in [&long_ext, &long_trailer] {
                assert_eq!(decode_in_pieces(raw.as_bytes(), piece).unwrap_err().status, 400, "piece {piece}");
            }
            assert_eq!(decode_in_pieces(exact.as_bytes(), piece).unwrap().0, b"abc", "piece {piece}");
        }
    }
}
