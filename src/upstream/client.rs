//! One HTTP/1.1 connection to an upstream, on the shard's runtime: write a request, read the
//! response head, then the body piece by piece as it arrives. Every wait has a limit: the
//! connect and TLS handshake (`limits::upstream_connect_timeout_ms` each), the first byte of
//! the head and every silence inside the body (`--http-worker-timeout-secs`).
//!
//! A plain connection reads and writes with monoio's own (io_uring) calls; a TLS one runs
//! rustls over monoio's poll-io stream, which is what the TLS crate's handshake takes.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::tcp::stream_poll::TcpStreamPoll;
use monoio::net::TcpStream;
use shardgate_tls::{Alpn, ClientTls, TlsStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::body::BodyDecoder;
use super::fault::UpstreamFault;
use super::head::{self, ResponseHead};
use super::target::Upstream;
use crate::limits;

enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStreamPoll>>),
}

pub struct Conn {
    stream: Stream,
    /// Bytes read and not yet used.
    buf: Vec<u8>,
}

/// The address of `host:port`. A name is resolved by the system resolver, which blocks the
/// shard for its duration: upstreams named by IP address (the usual case inside a cluster)
/// never pay it.
fn resolve(authority: &str) -> Result<SocketAddr, UpstreamFault> {
    if let Ok(addr) = authority.parse::<SocketAddr>() {
        return Ok(addr);
    }
    authority
        .to_socket_addrs()
        .map_err(|e| UpstreamFault::Connect(format!("cannot resolve {authority}: {e}")))?
        .next()
        .ok_or_else(|| UpstreamFault::Connect(format!("{authority} resolves to no address")))
}

/// The TLS handshake with an `https://` upstream, its certificate checked for the URL's host.
async fn secure(
    up: &Upstream,
    tls: Option<&ClientTls>,
    tcp: TcpStream,
    limit: Duration,
) -> Result<TlsStream<TcpStreamPoll>, UpstreamFault> {
    let tls = tls.ok_or_else(|| UpstreamFault::Tls("no TLS configuration for workers".into()))?;
    let name = shardgate_tls::server_name(&up.host)
        .ok_or_else(|| UpstreamFault::Tls(format!("'{}' is not a name a certificate can carry", up.host)))?;
    let io = tcp.try_into_poll_io().map_err(|(e, _)| UpstreamFault::Connect(e.to_string()))?;
    match monoio::time::timeout(limit, shardgate_tls::connect(tls.config(Alpn::Http1), name, io)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err(UpstreamFault::Tls(e.to_string())),
        Err(_) => Err(UpstreamFault::Tls(format!("no TLS handshake within {} ms", limit.as_millis()))),
    }
}

impl Conn {
    /// Connects to `up`, over TLS when its URL is `https://` (`tls` is then the gateway's
    /// configuration; without one the connect fails).
    pub async fn connect(up: &Upstream, tls: Option<&ClientTls>) -> Result<Conn, UpstreamFault> {
        let addr = resolve(&up.authority)?;
        let limit = Duration::from_millis(limits::upstream_connect_timeout_ms);
        let tcp = match monoio::time::timeout(limit, TcpStream::connect_addr(addr)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return Err(UpstreamFault::Connect(e.to_string())),
            Err(_) => return Err(UpstreamFault::Connect(format!("no answer within {} ms", limit.as_millis()))),
        };
        let _ = tcp.set_nodelay(true);
        let stream =
            if up.tls { Stream::Tls(Box::new(secure(up, tls, tcp, limit).await?)) } else { Stream::Plain(tcp) };
        Ok(Conn { stream, buf: Vec::with_capacity(limits::http_read_buffer_bytes) })
    }

    /// Writes a whole request; the buffer comes back either way (to send it again).
    pub async fn send(&mut self, request: Vec<u8>) -> (Result<(), UpstreamFault>, Vec<u8>) {
        let (res, request) = match &mut self.stream {
            Stream::Plain(s) => {
                let (res, request) = s.write_all(request).await;
                (res.map(|_| ()), request)
            }
            Stream::Tls(s) => {
                let res = async {
                    s.write_all(&request).await?;
                    s.flush().await
                }
                .await;
                (res, request)
            }
        };
        (res.map_err(|e| UpstreamFault::Broken(e.to_string())), request)
    }

    /// Reads more bytes within `limit`. Ok(false): the upstream closed the connection.
    async fn read_more(&mut self, limit: Duration, before_head: bool) -> Result<bool, UpstreamFault> {
        if self.buf.capacity() - self.buf.len() < 4096 {
            self.buf.reserve(limits::http_read_buffer_bytes);
        }
        let read = match &mut self.stream {
            Stream::Plain(s) => {
                let len = self.buf.len();
                let spare = monoio::buf::IoBufMut::slice_mut(std::mem::take(&mut self.buf), len..);
                match monoio::time::timeout(limit, s.read(spare)).await {
                    Ok((res, spare)) => {
                        self.buf = spare.into_inner();
                        Ok(res)
                    }
                    Err(e) => Err(e),
                }
            }
            Stream::Tls(s) => monoio::time::timeout(limit, s.read_buf(&mut self.buf)).await,
        };
        match read {
            Ok(res) => res.map(|n| n > 0).map_err(|e| UpstreamFault::Broken(e.to_string())),
            Err(_) => Err(UpstreamFault::Stalled { before_head, timeout_s: limit.as_secs() }),
        }
    }

    /// Whether any byte of a response arrived (a reused connection that the upstream had
    /// closed fails before any).
    pub fn has_input(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Reads the response head; interim (1xx) responses are skipped.
    pub async fn read_head(&mut self, limit: Duration) -> Result<ResponseHead, UpstreamFault> {
        loop {
            if let Some((head, len)) = head::parse(&self.buf)? {
                self.buf.drain(..len);
                if (100..200).contains(&head.status) {
                    continue;
                }
                return Ok(head);
            }
            if !self.read_more(limit, true).await? {
                return Err(UpstreamFault::Broken("closed before a response".into()));
            }
        }
    }

    /// The next piece of the body, appended to `out`; false once the body is complete.
    pub async fn read_body(
        &mut self,
        body: &mut BodyDecoder,
        out: &mut Vec<u8>,
        limit: Duration,
    ) -> Result<bool, UpstreamFault> {
        let start = out.len();
        loop {
            if !self.buf.is_empty() {
                let used = body.feed(&self.buf, out)?;
                self.buf.drain(..used);
            }
            if body.is_done() {
                return Ok(false);
            }
            if out.len() > start {
                return Ok(true);
            }
            if !self.read_more(limit, false).await? {
                body.at_eof()?;
                return Ok(false);
            }
        }
    }

    /// Ready for the next request: nothing unread is left over.
    pub fn is_clean(&self) -> bool {
        self.buf.is_empty()
    }
}
