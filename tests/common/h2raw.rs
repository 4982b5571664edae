//! HTTP/2 frames by hand, for the tests that must send what no well-behaved client would
//! (floods, oversized frames, protocol errors) and read exactly what the server answers.
//! Header blocks are HPACK literals without indexing or Huffman coding (RFC 7541 §6.2.2),
//! which every decoder must accept.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

/// Error codes (RFC 9113 §7).
pub const NO_ERROR: u32 = 0x0;
pub const PROTOCOL_ERROR: u32 = 0x1;
pub const FLOW_CONTROL_ERROR: u32 = 0x3;
pub const STREAM_CLOSED: u32 = 0x5;
pub const FRAME_SIZE_ERROR: u32 = 0x6;
pub const REFUSED_STREAM: u32 = 0x7;
pub const CANCEL: u32 = 0x8;
pub const COMPRESSION_ERROR: u32 = 0x9;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// A GOAWAY's or RST_STREAM's error code.
    pub fn error_code(&self) -> Option<u32> {
        let at = match self.kind {
            GOAWAY => 4,
            RST_STREAM => 0,
            _ => return None,
        };
        let b = self.payload.get(at..at + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

pub fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
    let payload: Vec<u8> = pairs.iter().flat_map(|(k, v)| k.to_be_bytes().into_iter().chain(v.to_be_bytes())).collect();
    frame(SETTINGS, 0, 0, &payload)
}

pub fn rst_stream(stream: u32, code: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream, &code.to_be_bytes())
}

pub fn window_update(stream: u32, increment: u32) -> Vec<u8> {
    frame(WINDOW_UPDATE, 0, stream, &increment.to_be_bytes())
}

fn hpack_int(out: &mut Vec<u8>, prefix_bits: u8, first: u8, mut n: usize) {
    let max = (1usize << prefix_bits) - 1;
    if n < max {
        out.push(first | n as u8);
        return;
    }
    out.push(first | max as u8);
    n -= max;
    while n >= 128 {
        out.push((n % 128) as u8 | 0x80);
        n /= 128;
    }
    out.push(n as u8);
}

/// A header block of literal fields.
pub fn header_block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.push(0x00);
        hpack_int(&mut out, 7, 0, name.len());
        out.extend_from_slice(name.as_bytes());
        hpack_int(&mut out, 7, 0, value.len());
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// The pseudo-headers of a request, then `extra`.
pub fn request_block(method: &str, path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut fields = vec![(":method", method), (":scheme", "http"), (":path", path), (":authority", "localhost")];
    fields.extend_from_slice(extra);
    header_block(&fields)
}

/// A HEADERS frame carrying a whole request head.
pub fn request(stream: u32, method: &str, path: &str, end_stream: bool) -> Vec<u8> {
    let flags = END_HEADERS | if end_stream { END_STREAM } else { 0 };
    frame(HEADERS, flags, stream, &request_block(method, path, &[]))
}

/// A raw HTTP/2 connection: the preface and an empty SETTINGS are sent on connect.
pub struct Conn {
    pub s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub fn open(port: u16) -> Conn {
        Self::open_with(port, &settings(&[]))
    }

    /// Connects and sends the preface followed by `first` (normally a SETTINGS frame).
    pub fn open_with(port: u16, first: &[u8]) -> Conn {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_nodelay(true).unwrap();
        // A flood that the server stops reading ends here instead of blocking the test.
        s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
        s.write_all(PREFACE).unwrap();
        s.write_all(first).unwrap();
        Conn { s, buf: Vec::new() }
    }

    /// Waits for the server's SETTINGS and acknowledges them, so that its limits are in force
    /// (RFC 9113 §6.5.3: a server applies them once acknowledged).
    pub fn acknowledge_settings(&mut self) {
        let f = self.until(Duration::from_secs(5), |f| f.kind == SETTINGS && f.flags & ACK == 0);
        assert!(f.is_some(), "no SETTINGS from the server");
        assert!(self.send(&frame(SETTINGS, ACK, 0, &[])));
    }

    /// Sends bytes; false once the server has closed the connection or stopped reading it.
    pub fn send(&mut self, bytes: &[u8]) -> bool {
        self.s.write_all(bytes).is_ok()
    }

    /// The next frame within `limit`; `None` on end of file, a reset or the limit.
    pub fn next(&mut self, limit: Duration) -> Option<Frame> {
        let deadline = Instant::now() + limit;
        loop {
            if self.buf.len() >= 9 {
                let len = (usize::from(self.buf[0]) << 16) | (usize::from(self.buf[1]) << 8) | usize::from(self.buf[2]);
                if self.buf.len() >= 9 + len {
                    let f = Frame {
                        kind: self.buf[3],
                        flags: self.buf[4],
                        stream: u32::from_be_bytes([self.buf[5], self.buf[6], self.buf[7], self.buf[8]]) & 0x7fff_ffff,
                        payload: self.buf[9..9 + len].to_vec(),
                    };
                    self.buf.drain(..9 + len);
                    return Some(f);
                }
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            self.s.set_read_timeout(Some(left.max(Duration::from_millis(1)))).unwrap();
            let mut chunk = [0u8; 16 * 1024];
            match self.s.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Frames until one matches `want` (returned) or the connection ends or `limit` passes.
    pub fn until(&mut self, limit: Duration, want: impl Fn(&Frame) -> bool) -> Option<Frame> {
        let deadline = Instant::now() + limit;
        while let Some(f) = self.next(deadline.saturating_duration_since(Instant::now())) {
            if want(&f) {
                return Some(f);
            }
        }
        None
    }

    /// Whether the server closes the connection within `limit` (frames before are skipped).
    pub fn closes_within(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while self.next(deadline.saturating_duration_since(Instant::now())).is_some() {}
        Instant::now() < deadline
    }

    /// Every frame until the connection ends or `limit` passes.
    pub fn drain(&mut self, limit: Duration) -> Vec<Frame> {
        let deadline = Instant::now() + limit;
        let mut frames = Vec::new();
        while let Some(f) = self.next(deadline.saturating_duration_since(Instant::now())) {
            frames.push(f);
        }
        frames
    }
}
