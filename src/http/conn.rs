//! One HTTP/1.1 connection: read a request (head, then body), dispatch it, write the response,
//! repeat while keep-alive allows. Pipelined requests wait in the read buffer and are served in
//! order. Time limits: a connection that sends nothing, and an answered keep-alive connection
//! left idle, are closed silently; a request whose head or body is not complete in time gets a
//! 408 and the connection is closed, so a slow client cannot hold the shard's resources.
//! A connection is one descriptor: its socket, split into a reader and a writer.

use std::rc::Rc;
use std::time::{Duration, Instant};

use monoio::io::{AsyncReadRent, AsyncWriteRentExt, Splitable};
use monoio::net::TcpStream;

use super::chunked::ChunkedDecoder;
use super::request::{parse_head, BodyFraming, Request, RequestHead};
use super::response::{Reader, Responder, Writer};
use crate::error::ApiError;
use crate::limits;
use crate::shard::ShardCtx;

/// Why reading a request stopped.
enum ReadStop {
    /// Close quietly (EOF, idle timeout, socket error).
    Close,
    /// Answer with this error, then close.
    Fail(ApiError),
}

/// Which route table a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Router {
    /// The OpenAI API, health and admin routes.
    Api,
    /// A connection taken while its shard is at the connection cap: one request, which must
    /// arrive quickly; health probes are answered, anything else gets a 503.
    OverCap,
    /// The Prometheus listener.
    Metrics,
}

impl Router {
    /// What its connections are, for log lines.
    pub fn label(self) -> &'static str {
        match self {
            Router::Api => "connections",
            Router::OverCap => "for health probes",
            Router::Metrics => "metrics connections",
        }
    }

    /// Time from accepting the connection to the end of its first head.
    pub fn first_head_timeout(self) -> Duration {
        match self {
            Router::OverCap => Duration::from_millis(limits::http_over_cap_header_timeout_ms),
            Router::Api | Router::Metrics => Duration::from_secs(limits::http_header_read_timeout_s),
        }
    }
}

/// Serves HTTP/1.x on `stream` until the connection ends.
pub async fn serve_http1(ctx: &Rc<ShardCtx>, stream: TcpStream, router: Router) {
    let (mut reader, mut writer) = stream.into_split();
    let mut input: Vec<u8> = Vec::with_capacity(limits::http_read_buffer_bytes);
    let mut output: Vec<u8> = Vec::with_capacity(limits::http_read_buffer_bytes);
    let mut wait = Wait::First(router.first_head_timeout());
    loop {
        let request = match read_request(&mut reader, &mut writer, &mut input, wait).await {
            Ok(r) => r,
            Err(ReadStop::Close) => return,
            Err(ReadStop::Fail(e)) => {
                tracing::info!("shard {}: rejecting request: {}", ctx.index, e);
                let mut r = Responder::new(&mut writer, &reader, output, false, false);
                let _ = r.send_error(&e).await;
                ctx.metrics().response(e.status);
                return;
            }
        };
        wait = Wait::KeepAlive;
        let keep_alive = request.head.keep_alive && router != Router::OverCap;
        let http10 = request.head.version_minor == 0;
        let mut responder = Responder::new(&mut writer, &reader, output, keep_alive, http10);
        responder.write_timeout = Duration::from_secs(ctx.shared.config.stream_write_timeout_s);
        match router {
            Router::Api => crate::api::routes::dispatch(ctx, request, &mut responder).await,
            Router::OverCap => crate::api::routes::over_cap(ctx, request, &mut responder).await,
            Router::Metrics => crate::api::routes::metrics(ctx, request, &mut responder).await,
        }
        if let Some(status) = responder.status() {
            ctx.metrics().response(status);
        }
        let reusable = responder.reusable();
        output = responder.into_buffer();
        if !reusable {
            return;
        }
    }
}

/// How long a connection may wait before a request's head is complete.
#[derive(Debug, Clone, Copy)]
enum Wait {
    /// A new connection: its first head must be complete this long after the accept; one that
    /// sends nothing at all in that time is closed silently.
    First(Duration),
    /// An answered keep-alive connection: silent for up to the keep-alive idle time, then the
    /// header timeout from the next request's first byte.
    KeepAlive,
}

/// Reads more bytes into `buf`, giving up at `deadline`. Ok(false): EOF.
async fn read_more(stream: &mut Reader, buf: &mut Vec<u8>, deadline: Instant) -> Result<bool, ReadStop> {
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(limits::http_read_buffer_bytes);
    }
    let remaining = deadline.saturating_duration_since(Instant::now());
    // monoio reads into the start of a Vec; a slice from `len` appends instead.
    let len = buf.len();
    let spare = monoio::buf::IoBufMut::slice_mut(std::mem::take(buf), len..);
    match monoio::time::timeout(remaining, stream.read(spare)).await {
        Ok((Ok(n), spare)) => {
            *buf = spare.into_inner();
            Ok(n > 0)
        }
        Ok((Err(_), _)) => Err(ReadStop::Close),
        Err(_) => Err(ReadStop::Fail(ApiError::request_timeout("timed out reading the request"))),
    }
}

async fn read_request(
    reader: &mut Reader,
    writer: &mut Writer,
    buf: &mut Vec<u8>,
    wait: Wait,
) -> Result<Request, ReadStop> {
    let now = Instant::now();
    let (silence_deadline, first_head_deadline) = match wait {
        Wait::First(timeout) => (now + timeout, Some(now + timeout)),
        Wait::KeepAlive => (now + Duration::from_secs(limits::http_keepalive_idle_timeout_s), None),
    };
    let mut head_deadline: Option<Instant> = None;
    let (head, head_len) = loop {
        if !buf.is_empty() {
            if let Some(parsed) = parse_head(buf).map_err(ReadStop::Fail)? {
                break parsed;
            }
            head_deadline.get_or_insert_with(|| {
                first_head_deadline
                    .unwrap_or_else(|| Instant::now() + Duration::from_secs(limits::http_header_read_timeout_s))
            });
        }
        let deadline = head_deadline.unwrap_or(silence_deadline);
        match read_more(reader, buf, deadline).await {
            Ok(true) => {}
            Ok(false) => return Err(ReadStop::Close),
            // A silent connection just closes; a half-sent head gets a 408.
            Err(ReadStop::Fail(_)) if head_deadline.is_none() => return Err(ReadStop::Close),
            Err(e) => return Err(e),
        }
    };
    buf.drain(..head_len);
    if head.expect_continue && head.framing != BodyFraming::None {
        let (res, _) = writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n".to_vec()).await;
        if res.is_err() {
            return Err(ReadStop::Close);
        }
    }
    let body = read_body(reader, buf, &head).await?;
    Ok(Request { head, body })
}

async fn read_body(stream: &mut Reader, buf: &mut Vec<u8>, head: &RequestHead) -> Result<Vec<u8>, ReadStop> {
    let deadline = Instant::now() + Duration::from_secs(limits::http_body_read_timeout_s);
    match head.framing {
        BodyFraming::None => Ok(Vec::new()),
        BodyFraming::Length(n) => {
            while buf.len() < n {
                if !read_more(stream, buf, deadline).await? {
                    return Err(ReadStop::Close);
                }
            }
            let rest = buf.split_off(n);
            Ok(std::mem::replace(buf, rest))
        }
        BodyFraming::Chunked => {
            let mut decoder = ChunkedDecoder::new(limits::http_body_bytes_max);
            loop {
                let used = decoder.feed(buf).map_err(ReadStop::Fail)?;
                buf.drain(..used);
                if decoder.is_done() {
                    return Ok(decoder.body);
                }
                if !read_more(stream, buf, deadline).await? {
                    return Err(ReadStop::Close);
                }
            }
        }
    }
}
