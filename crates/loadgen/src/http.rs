//! The client side of an HTTP/1.1 streaming response, without I/O: raw socket bytes in
//! (`ResponseReader::input`), record updates out. Parses the head (httparse), undoes the body
//! framing (chunked, content-length or until close) into the SSE parser, and applies each
//! event to the record with the time of the read that completed it.

use super::chunk::{apply_event, Dialect};
use super::error::HttpError;
use super::record::{Failure, FailureKind, RequestRecord};
use super::sse::SseParser;
use crate::limits;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    Chunked,
    Length(u64),
    UntilClose,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    pub framing: Framing,
    pub keep_alive: bool,
}

/// Ok(None): the head is not complete yet.
pub fn parse_head(buf: &[u8]) -> Result<Option<(ResponseHead, usize)>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(HttpError::MalformedHead(e)),
    };
    let status = response.code.unwrap_or(0);
    let mut keep_alive = response.version == Some(1);
    let mut framing = Framing::UntilClose;
    for h in response.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if value.rsplit(',').next().is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked")) {
                framing = Framing::Chunked;
            }
        } else if h.name.eq_ignore_ascii_case("content-length") && framing != Framing::Chunked {
            let n = value.parse::<u64>().map_err(|_| HttpError::ContentLength(value.to_string()))?;
            framing = Framing::Length(n);
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case("keep-alive") {
                    keep_alive = true;
                }
            }
        }
    }
    if status == 204 || status == 304 {
        framing = Framing::Length(0);
    }
    if framing == Framing::UntilClose {
        keep_alive = false;
    }
    Ok(Some((ResponseHead { status, framing, keep_alive }, len)))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkState {
    Size { value: u64, digits: u8, extension: bool },
    Data(u64),
    DataEnd,
    Trailer { line_empty: bool },
    Done,
}

/// Chunked transfer decoding, byte-exact at any split point. Accepts bare LF for CRLF.
#[derive(Clone, Copy, Debug)]
pub struct ChunkedDecoder {
    state: ChunkState,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder { state: ChunkState::Size { value: 0, digits: 0, extension: false } }
    }
}

impl ChunkedDecoder {
    pub fn is_done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Decodes from `input` into `out`; returns the bytes of `input` consumed (all of them
    /// unless the body ended).
    pub fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, HttpError> {
        let mut i = 0;
        while i < input.len() {
            if let ChunkState::Data(left) = self.state {
                let take = (input.len() - i).min(usize::try_from(left).unwrap_or(usize::MAX));
                out.extend_from_slice(&input[i..i + take]);
                i += take;
                let left = left - take as u64;
                self.state = if left == 0 { ChunkState::DataEnd } else { ChunkState::Data(left) };
                continue;
            }
            if self.state == ChunkState::Done {
                break;
            }
            self.state = self.step(input[i])?;
            i += 1;
        }
        Ok(i)
    }

    fn step(&self, byte: u8) -> Result<ChunkState, HttpError> {
        Ok(match (self.state, byte) {
            (ChunkState::Size { value, digits, .. }, b'\n') => match (digits, value) {
                (0, _) => return Err(HttpError::ChunkSizeWithoutDigits),
                (_, 0) => ChunkState::Trailer { line_empty: true },
                (_, n) => ChunkState::Data(n),
            },
            (s @ ChunkState::Size { extension: true, .. }, _) | (s @ ChunkState::Size { .. }, b'\r' | b' ' | b'\t') => {
                s
            }
            (ChunkState::Size { value, digits, .. }, b';') => ChunkState::Size { value, digits, extension: true },
            (ChunkState::Size { value, digits, .. }, b) => {
                let d = (b as char).to_digit(16).ok_or(HttpError::ChunkSizeByte(b))?;
                if digits >= 15 {
                    return Err(HttpError::ChunkSizeTooLarge);
                }
                ChunkState::Size { value: value * 16 + u64::from(d), digits: digits + 1, extension: false }
            }
            (ChunkState::DataEnd, b'\r') => ChunkState::DataEnd,
            (ChunkState::DataEnd, b'\n') => ChunkState::Size { value: 0, digits: 0, extension: false },
            (ChunkState::DataEnd, b) => return Err(HttpError::ChunkDataEnd(b)),
            (ChunkState::Trailer { line_empty: true }, b'\n') => ChunkState::Done,
            (ChunkState::Trailer { .. }, b'\n') => ChunkState::Trailer { line_empty: true },
            (s @ ChunkState::Trailer { .. }, b'\r') => s,
            (ChunkState::Trailer { .. }, _) => ChunkState::Trailer { line_empty: false },
            (s @ (ChunkState::Data(_) | ChunkState::Done), _) => s,
        })
    }
}

pub enum Progress {
    More,
    /// The response is complete; `reusable`: the connection may carry the next request.
    Complete {
        reusable: bool,
    },
}

pub struct ResponseReader {
    /// Raw bytes read from the socket and not yet consumed.
    pub input: Vec<u8>,
    dialect: Dialect,
    head: Option<ResponseHead>,
    chunked: ChunkedDecoder,
    length_left: u64,
    sse: SseParser,
    /// The stream's last event came (`[DONE]`, `message_stop`, a terminal Responses event):
    /// what follows it in the body is not read.
    done_event: bool,
}

impl ResponseReader {
    /// A reader of one response whose events are in `dialect`.
    pub fn new(dialect: Dialect) -> ResponseReader {
        ResponseReader {
            input: Vec::new(),
            dialect,
            head: None,
            chunked: ChunkedDecoder::default(),
            length_left: 0,
            sse: SseParser::default(),
            done_event: false,
        }
    }

    /// A reader of a response body alone, its head read by other means (an HTTP/2 stream's
    /// HEADERS): the body ends with the stream (`on_eof`) or with the last event.
    pub fn body_only(dialect: Dialect) -> ResponseReader {
        let mut r = ResponseReader::new(dialect);
        r.head = Some(ResponseHead { status: 200, framing: Framing::UntilClose, keep_alive: false });
        r
    }

    /// Consumes `input` after a read that returned at `time_ns`.
    pub fn on_bytes(&mut self, time_ns: u64, rec: &mut RequestRecord) -> Result<Progress, Failure> {
        let Some(head) = self.head else { return self.on_head_bytes(time_ns, rec) };
        let body_complete = match head.framing {
            Framing::Chunked => {
                let used = self.chunked.decode(&self.input, self.sse.buffer()).map_err(protocol)?;
                if used < self.input.len() {
                    return Err(protocol("bytes after the end of the response body"));
                }
                self.chunked.is_done()
            }
            Framing::Length(_) => {
                let take = self.input.len().min(usize::try_from(self.length_left).unwrap_or(usize::MAX));
                self.sse.buffer().extend_from_slice(&self.input[..take]);
                self.length_left -= take as u64;
                self.length_left == 0
            }
            Framing::UntilClose => {
                self.sse.buffer().extend_from_slice(&self.input);
                false
            }
        };
        self.input.clear();
        let dialect = self.dialect;
        if !self.done_event {
            self.done_event = self.sse.drain(|data| apply_event(dialect, data, time_ns, rec))?;
        }
        if body_complete {
            if !self.done_event {
                self.sse.finish(|data| apply_event(dialect, data, time_ns, rec))?;
            }
            rec.end_ns = time_ns;
            return Ok(Progress::Complete { reusable: head.keep_alive });
        }
        if self.done_event && head.framing == Framing::UntilClose {
            rec.end_ns = time_ns;
            return Ok(Progress::Complete { reusable: false });
        }
        Ok(Progress::More)
    }

    fn on_head_bytes(&mut self, time_ns: u64, rec: &mut RequestRecord) -> Result<Progress, Failure> {
        let Some((head, len)) = parse_head(&self.input).map_err(protocol)? else {
            if self.input.len() > limits::response_head_bytes_max {
                return Err(protocol("response head too large"));
            }
            return Ok(Progress::More);
        };
        rec.header_ns = Some(time_ns);
        rec.status = Some(head.status);
        self.input.drain(..len);
        if head.status != 200 {
            let body = String::from_utf8_lossy(&self.input[..self.input.len().min(300)]).into_owned();
            return Err(Failure::new(FailureKind::HttpStatus(head.status), body));
        }
        self.length_left = match head.framing {
            Framing::Length(n) => n,
            _ => 0,
        };
        self.head = Some(head);
        if self.input.is_empty() && head.framing != Framing::Length(0) {
            return Ok(Progress::More);
        }
        self.on_bytes(time_ns, rec)
    }

    /// The peer closed the connection.
    pub fn on_eof(&mut self, time_ns: u64, rec: &mut RequestRecord) -> Result<(), Failure> {
        rec.end_ns = time_ns;
        let dialect = self.dialect;
        match self.head {
            None => Err(Failure::new(FailureKind::Connection, "connection closed before the response head")),
            Some(ResponseHead { framing: Framing::UntilClose, .. }) => {
                if !self.done_event {
                    self.sse.finish(|data| apply_event(dialect, data, time_ns, rec))?;
                }
                Ok(())
            }
            Some(_) if self.done_event => Ok(()),
            Some(_) => Err(Failure::new(FailureKind::Connection, "connection closed mid-stream")),
        }
    }
}

fn protocol(message: impl std::fmt::Display) -> Failure {
    Failure::new(FailureKind::Protocol, message.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads() {
        type Want = Option<(u16, Framing, bool)>;
        let cases: &[(&str, Want)] = &[
            ("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", Some((200, Framing::Chunked, true))),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: close\r\n\r\n",
                Some((200, Framing::Length(12), false)),
            ),
            ("HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\n", Some((200, Framing::Length(3), false))),
            (
                "HTTP/1.0 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\n",
                Some((200, Framing::Length(3), true)),
            ),
            ("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n", Some((200, Framing::UntilClose, false))),
            ("HTTP/1.1 503 Busy\r\ncontent-length: 0\r\n\r\n", Some((503, Framing::Length(0), true))),
            ("HTTP/1.1 200 OK\r\ncontent-len", None),
        ];
        for (input, want) in cases {
            let got = parse_head(input.as_bytes()).ok().flatten().map(|(h, _)| (h.status, h.framing, h.keep_alive));
            assert_eq!(got, *want, "{input}");
        }
        assert!(parse_head(b"NOT HTTP\r\n\r\n").is_err());
    }

    #[test]
    fn chunked_at_every_split_point() {
        let body: &[u8] = b"6;ext=1\r\nhello \r\nA\r\n0123456789\r\n1\nx\n0\r\nTrailer: v\r\n\r\n";
        for i in 0..=body.len() {
            let mut d = ChunkedDecoder::default();
            let mut out = Vec::new();
            let a = d.decode(&body[..i], &mut out);
            let b = d.decode(&body[i..], &mut out);
            assert_eq!((a.is_ok(), b.is_ok()), (true, true), "split {i}");
            assert!(d.is_done(), "split {i}");
            assert_eq!(out, b"hello 0123456789x", "split {i}");
        }
        let mut d = ChunkedDecoder::default();
        assert!(d.decode(b"zz\r\n", &mut Vec::new()).is_err());
        let mut d = ChunkedDecoder::default();
        assert!(d.decode(b"3\r\nabcX", &mut Vec::new()).is_err());
    }

    /// A chat stream as the gateway frames it: role chunk, one token, usage, [DONE].
    fn stream() -> Vec<u8> {
        let mut out =
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        let writes: [&str; 3] = [
            "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n\
             data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"completion_tokens\":1}}\n\n",
            "data: [DONE]\n\n",
        ];
        for w in writes {
            out.extend_from_slice(format!("{:x}\r\n{w}\r\n", w.len()).as_bytes());
        }
        out.extend_from_slice(b"0\r\n\r\n");
        out
    }

    /// Feeds `parts` as successive reads at times 1, 2, 3...
    fn read_all(parts: &[&[u8]]) -> (RequestRecord, Option<bool>) {
        let mut reader = ResponseReader::new(Dialect::OpenAi);
        let mut rec = RequestRecord::default();
        for (t, part) in parts.iter().enumerate() {
            reader.input.extend_from_slice(part);
            match reader.on_bytes(t as u64 + 1, &mut rec) {
                Ok(Progress::Complete { reusable }) => return (rec, Some(reusable)),
                Ok(Progress::More) => {}
                Err(f) => {
                    rec.failure = Some(f);
                    return (rec, None);
                }
            }
        }
        (rec, None)
    }

    #[test]
    fn response_at_every_split_point() {
        let stream = stream();
        let (whole, reusable) = read_all(&[&stream]);
        assert_eq!(reusable, Some(true));
        assert_eq!((whole.status, whole.text.as_str(), whole.usage_completion_tokens), (Some(200), "Hi", Some(1)));
        assert_eq!(whole.chunks.len(), 1);
        for i in 0..=stream.len() {
            let (rec, reusable) = read_all(&[&stream[..i], &stream[i..]]);
            assert_eq!(reusable, Some(true), "split {i}");
            assert_eq!((rec.text.as_str(), rec.usage_completion_tokens, rec.chunks.len()), ("Hi", Some(1), 1));
            // The token chunk's time is the read that completed it.
            let token_end = stream.windows(4).position(|w| w == b"Hi\"}").unwrap_or(0) + 9;
            assert_eq!(rec.chunks[0].time_ns, if i >= token_end { 1 } else { 2 }, "split {i}");
        }
    }

    #[test]
    fn errors_and_eof() {
        let (rec, _) = read_all(&[b"HTTP/1.1 429 Too Many\r\ncontent-length: 4\r\n\r\nslow"]);
        assert_eq!(rec.failure.map(|f| (f.kind, f.message)), Some((FailureKind::HttpStatus(429), "slow".into())));
        let mut reader = ResponseReader::new(Dialect::OpenAi);
        let mut rec = RequestRecord::default();
        reader.input.extend_from_slice(&stream()[..120]);
        assert!(matches!(reader.on_bytes(1, &mut rec), Ok(Progress::More)));
        assert_eq!(reader.on_eof(2, &mut rec).map_err(|f| f.kind), Err(FailureKind::Connection));
        let mut reader = ResponseReader::new(Dialect::OpenAi);
        reader
            .input
            .extend_from_slice(b"HTTP/1.1 200 OK\r\n\r\ndata: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\n");
        let mut rec = RequestRecord::default();
        assert!(matches!(reader.on_bytes(1, &mut rec), Ok(Progress::Complete { reusable: false })));
        assert_eq!(rec.text, "a");
    }
}
