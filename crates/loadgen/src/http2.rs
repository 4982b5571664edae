//! `--http2`: one client core's HTTP/2 connections (cleartext, prior knowledge) and the exchange
//! of one request as a stream on them. The core's requests are spread over its connections in
//! turn; each connection's frames are read and written by its own task (the `h2` crate), each
//! stream's response is read by the request's task.
//!
//! Timestamps: a stream's task runs after the connection's task has read and decoded the frames,
//! so `now` there would add the decoding of every other stream of the read. Each connection
//! keeps the time its last read returned instead, and a stream's events take that time: events
//! that arrived in one read share its time, as over HTTP/1.1.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use monoio::io::IntoPollIo;
use monoio::net::TcpStream;

use super::chunk::Dialect;
use super::client::Clock;
use super::error::{HttpError, RunError};
use super::http::ResponseReader;
use super::record::{Failure, FailureKind, RequestRecord};
use crate::limits;

/// A prepared request in the parts an HTTP/2 stream sends.
pub struct H2Request {
    head: http::request::Parts,
    body: Bytes,
}

/// Headers that name HTTP/1.1 connection handling, which HTTP/2 forbids (RFC 9113 8.2.2).
const CONNECTION_HEADERS: [&str; 6] =
    ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te"];

impl H2Request {
    /// The HTTP/2 form of a prepared HTTP/1.1 request: `Host` becomes the `:authority`, the
    /// connection headers are dropped, the rest goes as it is.
    pub fn from_http1(bytes: &[u8]) -> Result<H2Request, HttpError> {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut request = httparse::Request::new(&mut headers);
        let head_len = match request.parse(bytes) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Err(HttpError::RequestForHttp2("incomplete head".into())),
            Err(e) => return Err(HttpError::RequestForHttp2(e.to_string())),
        };
        let host = request.headers.iter().find(|h| h.name.eq_ignore_ascii_case("host")).map(|h| h.value);
        let authority = std::str::from_utf8(host.unwrap_or(b"localhost")).unwrap_or("localhost");
        let uri = format!("http://{authority}{}", request.path.unwrap_or("/"));
        let mut builder = http::Request::builder().method(request.method.unwrap_or("POST")).uri(uri);
        for h in request.headers.iter() {
            let skip = h.name.eq_ignore_ascii_case("host")
                || CONNECTION_HEADERS.iter().any(|c| h.name.eq_ignore_ascii_case(c));
            if !skip {
                builder = builder.header(h.name, h.value);
            }
        }
        let (head, ()) = builder.body(()).map_err(|e| HttpError::RequestForHttp2(e.to_string()))?.into_parts();
        Ok(H2Request { head, body: Bytes::copy_from_slice(&bytes[head_len..]) })
    }

    fn request(&self) -> http::Request<()> {
        let mut r = http::Request::new(());
        *r.method_mut() = self.head.method.clone();
        *r.uri_mut() = self.head.uri.clone();
        *r.headers_mut() = self.head.headers.clone();
        r
    }
}

/// A socket that notes when each of its reads returned data.
struct Stamped<T> {
    io: T,
    last_read: Rc<Cell<Instant>>,
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Stamped<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.last_read.set(Instant::now());
        }
        polled
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Stamped<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[derive(Clone)]
struct Conn {
    send: SendRequest<Bytes>,
    last_read: Rc<Cell<Instant>>,
}

/// One core's HTTP/2 connections, opened ahead of the run; one that failed is opened again by
/// the next request given to it.
pub struct H2Pool {
    addr: SocketAddr,
    conns: Vec<RefCell<Option<Conn>>>,
    next: Cell<usize>,
}

impl H2Pool {
    pub fn new(addr: SocketAddr, connections: usize) -> H2Pool {
        H2Pool { addr, conns: (0..connections.max(1)).map(|_| RefCell::new(None)).collect(), next: Cell::new(0) }
    }

    /// Opens every connection (the HTTP/2 handshake included) before the run.
    pub async fn fill(&self) -> Result<(), RunError> {
        for slot in &self.conns {
            let conn = connect(self.addr).await.map_err(|source| RunError::Connect { addr: self.addr, source })?;
            *slot.borrow_mut() = Some(conn);
        }
        Ok(())
    }

    /// The next connection in turn, opened if it is not; `true` when it is new.
    async fn take(&self) -> std::io::Result<(Conn, bool)> {
        let i = self.next.get();
        self.next.set((i + 1) % self.conns.len());
        let open = self.conns[i].borrow().clone();
        if let Some(conn) = open {
            return Ok((conn, false));
        }
        let conn = connect(self.addr).await?;
        *self.conns[i].borrow_mut() = Some(conn.clone());
        Ok((conn, true))
    }

    /// Forgets `conn` (it failed), so that its slot's next request opens another.
    fn drop_conn(&self, conn: &Conn) {
        for slot in &self.conns {
            let mut slot = slot.borrow_mut();
            if slot.as_ref().is_some_and(|c| Rc::ptr_eq(&c.last_read, &conn.last_read)) {
                *slot = None;
            }
        }
    }
}

async fn connect(addr: SocketAddr) -> std::io::Result<Conn> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let last_read = Rc::new(Cell::new(Instant::now()));
    let io = Stamped { io: tcp.into_poll_io()?, last_read: last_read.clone() };
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(limits::http2_stream_window_bytes)
        .initial_connection_window_size(limits::http2_connection_window_bytes)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(std::io::Error::other)?;
    monoio::spawn(async move {
        // The streams see the connection's end as their own errors; nothing is left to report.
        let _ = connection.await;
    });
    Ok(Conn { send, last_read })
}

/// Sends `request` as a stream on the next connection of `pool` and records the response, as
/// `client::execute` does over HTTP/1.1. A connection that fails before the stream is opened
/// is opened again, once.
pub async fn execute(
    pool: &H2Pool,
    clock: &Clock,
    request: &H2Request,
    dialect: Dialect,
    rec: &mut RequestRecord,
    timeout: Duration,
) {
    let deadline = Instant::now() + timeout;
    for attempt in 0..2 {
        let (conn, new) = match pool.take().await {
            Ok(c) => c,
            Err(e) => {
                rec.end_ns = clock.now_ns();
                rec.failure = Some(Failure::new(FailureKind::Connect, format!("connect: {e}")));
                return;
            }
        };
        rec.connection_new = new;
        let send = match conn.send.clone().ready().await {
            Ok(send) => send,
            Err(e) => {
                pool.drop_conn(&conn);
                if attempt == 0 && !new {
                    continue;
                }
                rec.end_ns = clock.now_ns();
                rec.failure = Some(Failure::new(FailureKind::Connection, format!("HTTP/2 connection: {e}")));
                return;
            }
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let exchanged =
            monoio::time::timeout(left, exchange(send, &conn.last_read, clock, request, dialect, rec)).await;
        rec.failure = match exchanged {
            Ok(Ok(())) => None,
            Ok(Err(f)) => Some(f),
            Err(_) => {
                rec.end_ns = clock.now_ns();
                Some(Failure::new(FailureKind::Timeout, format!("no complete response in {timeout:?}")))
            }
        };
        break;
    }
    if rec.failure.is_none() && rec.chunks.is_empty() {
        rec.failure = Some(Failure::new(FailureKind::NoTokens, "the stream carried no output chunk"));
    }
}

/// One request as one stream.
async fn exchange(
    mut send: SendRequest<Bytes>,
    last_read: &Cell<Instant>,
    clock: &Clock,
    request: &H2Request,
    dialect: Dialect,
    rec: &mut RequestRecord,
) -> Result<(), Failure> {
    let at = |clock: &Clock| clock.ns_at(last_read.get());
    rec.send_ns = clock.now_ns();
    let (response, mut body_out) = send.send_request(request.request(), false).map_err(stream_failure(rec, clock))?;
    body_out.send_data(request.body.clone(), true).map_err(stream_failure(rec, clock))?;
    let response = response.await.map_err(stream_failure(rec, clock))?;
    rec.header_ns = Some(at(clock));
    rec.status = Some(response.status().as_u16());
    let mut body = response.into_body();
    if rec.status != Some(200) {
        let mut text = Vec::new();
        while let Some(Ok(data)) = body.data().await {
            text.extend_from_slice(&data);
            if text.len() >= 300 {
                break;
            }
        }
        rec.end_ns = at(clock);
        let message = String::from_utf8_lossy(&text[..text.len().min(300)]).into_owned();
        return Err(Failure::new(FailureKind::HttpStatus(rec.status.unwrap_or(0)), message));
    }
    let mut reader = ResponseReader::body_only(dialect);
    while let Some(data) = body.data().await {
        let data = data.map_err(stream_failure(rec, clock))?;
        // Reading is consuming: the window reopens as the client keeps up, as a socket's would.
        let _ = body.flow_control().release_capacity(data.len());
        reader.input.extend_from_slice(&data);
        let time_ns = at(clock);
        if let Err(f) = reader.on_bytes(time_ns, rec) {
            rec.end_ns = time_ns;
            return Err(f);
        }
    }
    reader.on_eof(at(clock), rec)
}

/// An `h2` error on the stream or its connection, as the record's failure.
fn stream_failure<'a>(rec: &'a mut RequestRecord, clock: &'a Clock) -> impl FnOnce(h2::Error) -> Failure + 'a {
    move |e| {
        rec.end_ns = clock.now_ns();
        Failure::new(FailureKind::Connection, format!("HTTP/2 stream: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http1_requests_become_streams() {
        // (request bytes, method, uri, headers sent, body)
        type Case = (&'static [u8], &'static str, &'static str, &'static [(&'static str, &'static str)], &'static [u8]);
        let cases: &[Case] = &[
            (
                b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:26000\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
                "POST",
                "http://127.0.0.1:26000/v1/completions",
                &[("content-type", "application/json"), ("content-length", "2")],
                b"{}",
            ),
            (
                b"POST /v1/messages HTTP/1.1\r\nHost: h:1\r\nConnection: close\r\nx-api-key: k\r\nContent-Length: 0\r\n\r\n",
                "POST",
                "http://h:1/v1/messages",
                &[("x-api-key", "k"), ("content-length", "0")],
                b"",
            ),
        ];
        for (bytes, method, uri, headers, body) in cases {
            let r = H2Request::from_http1(bytes).unwrap_or_else(|e| panic!("{e}"));
            let built = r.request();
            assert_eq!((built.method().as_str(), built.uri().to_string().as_str()), (*method, *uri));
            let sent: Vec<(&str, &str)> =
                built.headers().iter().map(|(k, v)| (k.as_str(), v.to_str().unwrap_or(""))).collect();
            assert_eq!(sent, *headers);
            assert_eq!(&r.body[..], *body);
        }
        assert!(H2Request::from_http1(b"POST /x HTTP/1.1\r\nHost: h").is_err(), "an incomplete head");
        assert!(H2Request::from_http1(b"\x01\x02 nonsense\r\n\r\n").is_err());
    }
}
