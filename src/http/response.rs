//! Writing responses: full bodies with `Content-Length`, and SSE streams as chunked transfer
//! (one chunk per write, so every event reaches the client as soon as it exists; never
//! compressed). `Responder` also answers "is the client still there?" without consuming
//! request bytes, so an abandoned request can be aborted on the engine.
//!
//! The same `Responder` answers an HTTP/2 stream (`http::http2`): the head becomes a HEADERS
//! frame, each flush one DATA frame sent as flow control allows, and the client's RST_STREAM
//! is the client leaving. Everything above it (routes, sinks, relays) is the same for both.

use std::future::Future;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::time::Duration;

use monoio::io::{AsyncWriteRentExt, OwnedReadHalf, OwnedWriteHalf};
use monoio::net::TcpStream;

use super::http2::stream_out::StreamOut;
use crate::error::{ApiError, Envelope};

pub use super::ClientGone;

/// The two halves of one connection's socket (one descriptor): requests are read from the
/// reader, which also watches for the client leaving while the writer sends a response.
pub type Reader = OwnedReadHalf<TcpStream>;
pub type Writer = OwnedWriteHalf<TcpStream>;

/// Where a response goes.
enum Out<'c> {
    /// An HTTP/1.x connection: the response is framed into bytes and written to the socket.
    Http1 { stream: &'c mut Writer, watch: &'c Reader, http10: bool },
    /// An HTTP/2 stream: the head as a header map, the body as DATA frames. Streamed events
    /// are formatted straight into `frames`, and each flush hands what it holds to `h2` (which
    /// owns it until written): its storage comes back once `h2` has dropped it, so a chunk
    /// costs neither a copy nor an allocation.
    Http2 { stream: StreamOut, head: Option<http::Response<()>>, frames: bytes::BytesMut },
}

/// Resolves when the client has gone away; see `Responder::gone`.
pub type GoneWatch<'c> = Pin<Box<dyn Future<Output = ()> + 'c>>;

pub struct Responder<'c> {
    out: Out<'c>,
    buf: Vec<u8>,
    /// The client allows the connection to be reused after this response.
    keep_alive: bool,
    state: State,
    /// The status line sent, once sent.
    status: Option<u16>,
    /// Headers every response carries (CORS and the like), set by the router.
    pub extra_headers: Vec<(&'static str, String)>,
    /// The error envelope of the API being served, set by the router.
    pub envelope: Envelope,
    /// A write that makes no progress for this long gives the client up (a reader that stopped
    /// reading would otherwise hold its request, and its engine slot, forever).
    pub write_timeout: Duration,
    /// The write timeout's timer, kept for the whole response: a stream's writes re-arm it
    /// about once per timeout, not once per chunk (a timer per chunk was most of the runtime's
    /// cost per streamed token in the paced regime).
    write_watch: Option<Pin<Box<monoio::time::Sleep>>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Idle,
    Streaming,
    Done,
}

pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        424 => "Failed Dependency",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

impl<'c> Responder<'c> {
    pub fn new(stream: &'c mut Writer, watch: &'c Reader, buf: Vec<u8>, keep_alive: bool, http10: bool) -> Self {
        Self::with_out(Out::Http1 { stream, watch, http10 }, buf, keep_alive)
    }

    /// A responder for one HTTP/2 stream.
    pub fn http2(stream: StreamOut) -> Responder<'static> {
        Responder::with_out(Out::Http2 { stream, head: None, frames: bytes::BytesMut::new() }, Vec::new(), true)
    }

    fn with_out(out: Out<'c>, buf: Vec<u8>, keep_alive: bool) -> Self {
        Responder {
            out,
            buf,
            keep_alive,
            state: State::Idle,
            status: None,
            extra_headers: Vec::new(),
            envelope: Envelope::OpenAi,
            write_timeout: Duration::from_secs(crate::limits::stream_write_timeout_s_default),
            write_watch: None,
        }
    }

    /// Ends the connection after this response (`connection: close`).
    pub fn close_after(&mut self) {
        self.keep_alive = false;
    }

    /// Whether the connection can serve another request after this response.
    pub fn reusable(&self) -> bool {
        self.keep_alive && self.state == State::Done
    }

    /// Gives back the write buffer for reuse.
    pub fn into_buffer(self) -> Vec<u8> {
        self.buf
    }

    pub fn has_started(&self) -> bool {
        self.state != State::Idle
    }

    /// The status sent, if a response went out.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    fn push_head(&mut self, status: u16, content_type: &str, length: Option<usize>, extra: &[(&str, &str)]) {
        self.status = Some(status);
        self.buf.clear();
        let headers = extra.iter().copied().chain(self.extra_headers.iter().map(|(k, v)| (*k, v.as_str())));
        match &mut self.out {
            Out::Http1 { http10, .. } => {
                let framing = Http1Framing { http10: *http10, keep_alive: self.keep_alive };
                framing.push_head(&mut self.buf, status, content_type, length, headers);
            }
            Out::Http2 { head, .. } => *head = Some(http2_head(status, content_type, length, headers)),
        }
    }

    /// Old HTTP/1.0: no chunked framing, a stream ends by closing the connection.
    fn http10(&self) -> bool {
        matches!(self.out, Out::Http1 { http10: true, .. })
    }

    /// Whether the body is framed into chunks here (HTTP/1.1 streams; HTTP/2 frames it itself).
    fn chunked(&self) -> bool {
        matches!(self.out, Out::Http1 { http10: false, .. })
    }

    async fn write_buf(&mut self) -> Result<(), ClientGone> {
        self.write_from(0, true).await
    }

    /// Writes `buf[start..]` within the write timeout, then empties `buf` for reuse. `end`:
    /// the response ends with these bytes (an HTTP/2 stream's END_STREAM).
    async fn write_from(&mut self, start: usize, end: bool) -> Result<(), ClientGone> {
        let buf = std::mem::take(&mut self.buf);
        let sent = match &mut self.out {
            Out::Http1 { stream, .. } => {
                let write = stream.write_all(monoio::buf::IoBuf::slice(buf, start..));
                match within(&mut self.write_watch, self.write_timeout, write).await {
                    Some((res, slice)) => {
                        self.buf = slice.into_inner();
                        Some(res.map(|_| ()).map_err(|_| ClientGone))
                    }
                    // The buffer went with the cancelled write; the connection closes after this.
                    None => None,
                }
            }
            Out::Http2 { stream, head, frames } => {
                let sent = within(
                    &mut self.write_watch,
                    self.write_timeout,
                    send_http2(stream, head.take(), frames, &buf[start..], end),
                )
                .await;
                self.buf = buf;
                sent
            }
        };
        self.buf.clear();
        sent.unwrap_or_else(|| self.timed_out())
    }

    fn timed_out(&mut self) -> Result<(), ClientGone> {
        tracing::warn!("client accepted no bytes for {} s; cutting it off", self.write_timeout.as_secs());
        self.keep_alive = false;
        Err(ClientGone)
    }

    /// A complete response.
    pub async fn send(
        &mut self,
        status: u16,
        content_type: &str,
        body: &[u8],
        extra: &[(&str, &str)],
    ) -> Result<(), ClientGone> {
        debug_assert_eq!(self.state, State::Idle);
        self.push_head(status, content_type, Some(body.len()), extra);
        self.buf.extend_from_slice(body);
        self.state = State::Done;
        self.write_buf().await
    }

    pub async fn send_json(&mut self, status: u16, body: &[u8]) -> Result<(), ClientGone> {
        self.send(status, "application/json", body, &[]).await
    }

    /// An error in the served API's envelope, with `Retry-After` when it has one.
    pub async fn send_error(&mut self, e: &ApiError) -> Result<(), ClientGone> {
        let body = e.to_json_in(self.envelope);
        let retry;
        let mut extra: Vec<(&str, &str)> = Vec::new();
        if let Some(s) = e.retry_after_s {
            retry = s.to_string();
            extra.push(("retry-after", &retry));
        }
        self.send(e.status, "application/json", body.as_bytes(), &extra).await
    }

    /// Starts an SSE stream (200, `text/event-stream`, chunked).
    pub async fn start_sse(&mut self) -> Result<(), ClientGone> {
        self.start_chunked(200, "text/event-stream", &[("cache-control", "no-cache"), ("x-accel-buffering", "no")])
            .await
    }

    /// Starts a chunked response of any kind (an upstream's stream, relayed): `push_bytes`,
    /// `flush`, and `end_sse` to finish it.
    pub async fn start_chunked(
        &mut self,
        status: u16,
        content_type: &str,
        extra: &[(&str, &str)],
    ) -> Result<(), ClientGone> {
        debug_assert_eq!(self.state, State::Idle);
        self.push_head(status, content_type, None, extra);
        self.state = State::Streaming;
        self.write_from(0, false).await
    }

    /// Queues bytes as they are, for the next chunk.
    pub fn push_bytes(&mut self, bytes: &[u8]) {
        debug_assert_eq!(self.state, State::Streaming);
        self.queue(&[bytes]);
    }

    /// Queues one event, `data: <payload>\n\n`, with an `event: <name>` line first when named
    /// (clients of APIs with named events drop events that have none); `flush` sends everything
    /// queued as one chunk.
    pub fn push_sse(&mut self, name: Option<&str>, payload: &[u8]) {
        debug_assert_eq!(self.state, State::Streaming);
        match name {
            Some(name) => self.queue(&[b"event: ", name.as_bytes(), b"\ndata: ", payload, b"\n\n"]),
            None => self.queue(&[b"data: ", payload, b"\n\n"]),
        }
    }

    /// Appends `parts` to the chunk being built: after room for the chunk's size line (patched
    /// in `flush`) on an HTTP/1.1 stream, straight into the bytes `h2` will send on HTTP/2.
    fn queue(&mut self, parts: &[&[u8]]) {
        if let Out::Http2 { frames, .. } = &mut self.out {
            frames.reserve(parts.iter().map(|p| p.len()).sum());
            parts.iter().for_each(|p| frames.extend_from_slice(p));
            return;
        }
        if self.buf.is_empty() && self.chunked() {
            self.buf.extend_from_slice(CHUNK_HEADER_PLACEHOLDER);
        }
        parts.iter().for_each(|p| self.buf.extend_from_slice(p));
    }

    /// Queues an SSE comment line (keep-alive).
    pub fn push_sse_comment(&mut self, comment: &str) {
        self.queue(&[b": ", comment.as_bytes(), b"\n\n"]);
    }

    /// Sends the queued events as one chunk.
    pub async fn flush(&mut self) -> Result<(), ClientGone> {
        self.flush_chunk(false).await
    }

    /// Writes the queued events as one chunk, and the last-chunk marker with them if `last`.
    async fn flush_chunk(&mut self, last: bool) -> Result<(), ClientGone> {
        if let Out::Http2 { .. } = self.out {
            return self.flush_http2(last).await;
        }
        if self.buf.is_empty() {
            if !last || self.http10() {
                return Ok(());
            }
            // Nothing queued (a relay flushes every piece as it comes): the end marker alone.
            if self.chunked() {
                self.buf.extend_from_slice(b"0\r\n\r\n");
            }
            return self.write_from(0, true).await;
        }
        let mut start = 0;
        if self.chunked() {
            let payload_len = self.buf.len() - CHUNK_HEADER_PLACEHOLDER.len();
            let mut size = [0u8; 18];
            let header = format_chunk_size(payload_len, &mut size);
            // Right-align the size line in the reserved room and write from there.
            start = CHUNK_HEADER_PLACEHOLDER.len() - header.len();
            self.buf[start..CHUNK_HEADER_PLACEHOLDER.len()].copy_from_slice(header);
            self.buf.extend_from_slice(b"\r\n");
            if last {
                self.buf.extend_from_slice(b"0\r\n\r\n");
            }
        }
        self.write_from(start, last).await
    }

    /// Hands the queued events to `h2` as one DATA frame: at once when the stream's reserved
    /// capacity covers them (no timer, no wake: the connection's task writes every stream's
    /// frames of the step together), else waiting for the client's window within the write
    /// timeout.
    async fn flush_http2(&mut self, last: bool) -> Result<(), ClientGone> {
        let Out::Http2 { stream, frames, .. } = &mut self.out else { return Ok(()) };
        if frames.is_empty() && !last {
            return Ok(());
        }
        let rest = stream.send_now(frames.split().freeze(), last)?;
        if rest.is_empty() {
            return Ok(());
        }
        match within(&mut self.write_watch, self.write_timeout, stream.send_data(rest, last)).await {
            Some(sent) => sent,
            None => self.timed_out(),
        }
    }

    /// Ends the stream: what is queued and the terminating chunk, in one write.
    pub async fn end_sse(&mut self) -> Result<(), ClientGone> {
        self.state = State::Done;
        if self.http10() {
            // HTTP/1.0 streams end by closing the connection.
            self.keep_alive = false;
        }
        self.flush_chunk(true).await
    }

    /// Resolves when the client has gone away: closed its side of the HTTP/1.x connection
    /// (request bytes are never consumed: pipelined data means the client is alive, and watching
    /// stops there), or reset its HTTP/2 stream, or lost the HTTP/2 connection. Independent of
    /// the responder's borrow, so it can be awaited beside the writes.
    pub fn gone(&self) -> GoneWatch<'c> {
        match &self.out {
            Out::Http1 { watch, .. } => Box::pin(client_gone(watch)),
            Out::Http2 { stream, .. } => Box::pin(stream.gone()),
        }
    }
}

/// Runs `work` unless the write timeout passes first (`None`).
///
/// The timer (the responder's `write_watch`) fires no later than this write's limit, but may
/// fire earlier (it was armed by an earlier write); an early firing re-arms it for this write's
/// own limit.
async fn within<T>(
    timer: &mut Option<Pin<Box<monoio::time::Sleep>>>,
    timeout: Duration,
    work: impl Future<Output = T>,
) -> Option<T> {
    let started = monoio::time::Instant::now();
    let limit = started + timeout;
    let timer = timer.get_or_insert_with(|| Box::pin(monoio::time::sleep_until(limit)));
    if timer.deadline() < started || timer.deadline() > limit {
        timer.as_mut().reset(limit);
    }
    let mut work = std::pin::pin!(work);
    loop {
        monoio::select! {
            done = &mut work => return Some(done),
            _ = timer.as_mut() => {
                if monoio::time::Instant::now() >= limit {
                    return None;
                }
                timer.as_mut().reset(limit);
            }
        }
    }
}

/// An HTTP/1.x response head's framing decisions.
struct Http1Framing {
    http10: bool,
    keep_alive: bool,
}

impl Http1Framing {
    fn push_head<'h>(
        &self,
        b: &mut Vec<u8>,
        status: u16,
        content_type: &str,
        length: Option<usize>,
        headers: impl Iterator<Item = (&'h str, &'h str)>,
    ) {
        b.extend_from_slice(if self.http10 { b"HTTP/1.0 " } else { b"HTTP/1.1 " });
        b.extend_from_slice(itoa::Buffer::new().format(status).as_bytes());
        b.push(b' ');
        b.extend_from_slice(reason_phrase(status).as_bytes());
        b.extend_from_slice(b"\r\ncontent-type: ");
        b.extend_from_slice(content_type.as_bytes());
        match length {
            Some(n) => {
                b.extend_from_slice(b"\r\ncontent-length: ");
                b.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            }
            None if !self.http10 => b.extend_from_slice(b"\r\ntransfer-encoding: chunked"),
            None => {}
        }
        for (k, v) in headers {
            b.extend_from_slice(b"\r\n");
            b.extend_from_slice(k.as_bytes());
            b.extend_from_slice(b": ");
            b.extend_from_slice(v.as_bytes());
        }
        let closing = !self.keep_alive || (length.is_none() && self.http10);
        if closing {
            b.extend_from_slice(b"\r\nconnection: close");
        } else if self.http10 {
            b.extend_from_slice(b"\r\nconnection: keep-alive");
        }
        b.extend_from_slice(b"\r\n\r\n");
    }
}

/// Headers that are about one HTTP/1.x connection and have no meaning in HTTP/2 (RFC 9113
/// §8.2.2: a message carrying them is malformed), dropped from relayed heads.
const CONNECTION_HEADERS: [&str; 6] =
    ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te"];

/// An HTTP/2 response head. A header a relayed upstream sent that HTTP/2 cannot carry is
/// dropped, with a log line.
fn http2_head<'h>(
    status: u16,
    content_type: &str,
    length: Option<usize>,
    headers: impl Iterator<Item = (&'h str, &'h str)>,
) -> http::Response<()> {
    let mut head = http::Response::new(());
    *head.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    let map = head.headers_mut();
    let length = length.map(|n| n.to_string());
    put_header(map, "content-type", content_type);
    if let Some(n) = &length {
        put_header(map, "content-length", n);
    }
    for (name, value) in headers {
        if !CONNECTION_HEADERS.iter().any(|c| name.eq_ignore_ascii_case(c)) {
            put_header(map, name, value);
        }
    }
    head
}

fn put_header(map: &mut http::HeaderMap, name: &str, value: &str) {
    match (http::HeaderName::from_bytes(name.as_bytes()), http::HeaderValue::from_str(value)) {
        (Ok(name), Ok(value)) => {
            map.append(name, value);
        }
        _ => tracing::warn!("HTTP/2 response: header {name:?} dropped (not a valid HTTP/2 header)"),
    }
}

/// The HTTP/2 part of a write: the head if it has not gone yet, then the body bytes.
async fn send_http2(
    stream: &StreamOut,
    head: Option<http::Response<()>>,
    frames: &mut bytes::BytesMut,
    body: &[u8],
    end: bool,
) -> Result<(), ClientGone> {
    if let Some(head) = head {
        let head_ends = end && body.is_empty();
        stream.send_head(head, head_ends)?;
        if head_ends {
            return Ok(());
        }
    }
    if body.is_empty() && !end {
        return Ok(());
    }
    frames.extend_from_slice(body);
    stream.send_data(frames.split().freeze(), end).await
}

/// Room for 16 hex digits + CRLF: enough for any chunk size, filled in by `flush`.
const CHUNK_HEADER_PLACEHOLDER: &[u8] = b"0000000000000000\r\n";

/// `<hex size>\r\n` into `out`, returned as a slice.
fn format_chunk_size(n: usize, out: &mut [u8; 18]) -> &[u8] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    let mut v = n;
    loop {
        i -= 1;
        digits[i] = HEX[v & 0xf];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    let len = digits.len() - i;
    out[..len].copy_from_slice(&digits[i..]);
    out[len] = b'\r';
    out[len + 1] = b'\n';
    &out[..len + 2]
}

async fn client_gone(watch: &Reader) {
    // SAFETY: monoio declares `TcpStream` `Split`: operations on its two halves are independent
    // (each takes its own handle on the descriptor when it starts), which is what lets the
    // writer send while this waits. Readiness and the peek below only read the descriptor, and
    // the reader's own reads never run while a response is being written.
    let watch: &TcpStream = unsafe { &*watch.0.get() };
    let fd = watch.as_raw_fd();
    loop {
        if watch.readable(false).await.is_err() {
            return;
        }
        let mut byte = 0u8;
        // SAFETY: one-byte peek into a local; the fd is open while `watch` lives.
        let n = unsafe { libc::recv(fd, (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
        if n == 0 {
            return;
        }
        if n > 0 {
            // A pipelined request: the client is alive; nothing more to learn here.
            std::future::pending::<()>().await;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::WouldBlock && err.kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}
