//! One HTTP/2 connection to a worker, its calls multiplexed as streams.
//!
//! The connection is driven by a task on the caller's monoio runtime (h2 reads and writes
//! through monoio's poll-io stream), together with the keep-alive: a PING every
//! `keepalive_interval_ms`, and the connection dropped when one is not answered within
//! `keepalive_timeout_ms`, which fails every call on it with `Fault::Closed`.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::{select, Either};
use h2::client::SendRequest;
use http::{HeaderValue, Method, Request};
use monoio::time::{timeout, timeout_at, Instant};

use shardgate_tls::{Alpn, ClientTls};

use crate::fault::Fault;
use crate::frame::{self, Decoder};
use crate::limits;
use crate::status::{timeout_header, Code, Status};

/// Why the connection ended, once it has; shared by the driver task and the channel.
type Ended = Rc<RefCell<Option<String>>>;

pub struct Channel {
    send: SendRequest<Bytes>,
    /// `http://host:port` or `https://host:port`: the scheme and authority of every call.
    base: String,
    ended: Ended,
}

impl Channel {
    /// Connects to `addr` (`host:port`) and completes the HTTP/2 handshake; over TLS first when
    /// `tls` is given (`grpcs://`), the worker's certificate checked for the host in `addr`.
    pub async fn connect(addr: &str, tls: Option<&ClientTls>) -> Result<Channel, Fault> {
        let connect = monoio::net::TcpStream::connect(addr);
        let tcp = match timeout(Duration::from_millis(limits::connect_timeout_ms), connect).await {
            Ok(r) => r.map_err(Fault::Connect)?,
            Err(_) => return Err(Fault::Connect(std::io::Error::from(std::io::ErrorKind::TimedOut))),
        };
        // Token streams are many small writes: no Nagle delay on them.
        tcp.set_nodelay(true).map_err(Fault::Connect)?;
        let io = tcp.try_into_poll_io().map_err(|(e, _)| Fault::Connect(e))?;
        let (send, ended) = match tls {
            None => handshake(io).await?,
            Some(tls) => {
                let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
                let name = shardgate_tls::server_name(host)
                    .ok_or_else(|| Fault::Tls(format!("'{host}' is not a name a certificate can carry")))?;
                let secured = shardgate_tls::connect(tls.config(Alpn::H2), name, io);
                let io = match timeout(Duration::from_millis(limits::handshake_timeout_ms), secured).await {
                    Ok(r) => r.map_err(|e| Fault::Tls(e.to_string()))?,
                    Err(_) => {
                        return Err(Fault::Tls(format!("no TLS handshake within {} ms", limits::handshake_timeout_ms)))
                    }
                };
                handshake(io).await?
            }
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        Ok(Channel { send, base: format!("{scheme}://{addr}"), ended })
    }

    /// Why the connection ended; `None` while it is up.
    pub fn ended(&self) -> Option<String> {
        self.ended.borrow().clone()
    }

    /// Starts `path` with one request message; the answer's messages come from the `Call`.
    pub async fn call(&self, path: &str, message: &impl prost::Message, deadline_ms: u64) -> Result<Call, Fault> {
        if let Some(why) = self.ended() {
            return Err(Fault::Closed(why));
        }
        let deadline = Instant::now() + Duration::from_millis(deadline_ms);
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("{}{}", self.base, path))
            .header("content-type", HeaderValue::from_static("application/grpc"))
            .header("te", HeaderValue::from_static("trailers"))
            .header("grpc-timeout", timeout_header(deadline_ms))
            .body(())
            .map_err(|e| Fault::NotGrpc(format!("request for {path}: {e}")))?;
        let started = async {
            let mut send = self.send.clone().ready().await?;
            let (response, mut body) = send.send_request(request, false)?;
            body.send_data(frame::encode(&message.encode_to_vec()), true)?;
            Ok::<_, h2::Error>((response.await?, body))
        };
        let (response, body) = match timeout_at(deadline, started).await {
            Ok(r) => r?,
            Err(_) => return Err(Fault::Deadline { ms: deadline_ms }),
        };
        let (head, recv) = response.into_parts();
        if head.status != http::StatusCode::OK {
            return Err(Fault::NotGrpc(format!("HTTP status {}", head.status)));
        }
        let grpc = head.headers.get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
        if !grpc {
            return Err(Fault::NotGrpc(format!("content-type {:?}", head.headers.get("content-type"))));
        }
        // A trailers-only answer: the status is in the headers and no message follows.
        let ended = Status::from_headers(&head.headers);
        Ok(Call { recv, _send: body, decoder: Decoder::default(), deadline, deadline_ms, ended })
    }
}

/// The HTTP/2 handshake on a connected stream, and the task that drives the connection.
async fn handshake<T>(io: T) -> Result<(SendRequest<Bytes>, Ended), Fault>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let mut builder = h2::client::Builder::new();
    builder
        .initial_window_size(limits::stream_window_bytes)
        .initial_connection_window_size(limits::connection_window_bytes)
        .max_header_list_size(limits::header_list_bytes_max)
        .enable_push(false);
    let handshake = builder.handshake::<_, Bytes>(io);
    let (send, mut conn) = match timeout(Duration::from_millis(limits::handshake_timeout_ms), handshake).await {
        Ok(r) => r.map_err(|e| Fault::Handshake(e.to_string()))?,
        Err(_) => return Err(Fault::Handshake(format!("no SETTINGS within {} ms", limits::handshake_timeout_ms))),
    };
    let ended: Ended = Rc::default();
    let pings = conn.ping_pong().ok_or_else(|| Fault::Handshake("keep-alive unavailable".into()))?;
    let driver_ended = ended.clone();
    monoio::spawn(async move {
        let why = match select(conn, Box::pin(keepalive(pings))).await {
            Either::Left((Ok(()), _)) => "closed by the worker".to_string(),
            Either::Left((Err(e), _)) => e.to_string(),
            Either::Right((why, _)) => why,
        };
        *driver_ended.borrow_mut() = Some(why);
    });
    Ok((send, ended))
}

/// Pings until one goes unanswered; returns why.
async fn keepalive(mut pings: h2::PingPong) -> String {
    loop {
        monoio::time::sleep(Duration::from_millis(limits::keepalive_interval_ms)).await;
        match timeout(Duration::from_millis(limits::keepalive_timeout_ms), pings.ping(h2::Ping::opaque())).await {
            Ok(Ok(_pong)) => {}
            Ok(Err(e)) => return format!("keep-alive failed: {e}"),
            Err(_) => return format!("keep-alive PING unanswered for {} ms", limits::keepalive_timeout_ms),
        }
    }
}

/// One call's answer. Dropping it before the end resets the stream (RST_STREAM CANCEL), which
/// a gRPC server reads as the client cancelling.
pub struct Call {
    recv: h2::RecvStream,
    // Held so the stream is reset only when the call is dropped.
    _send: h2::SendStream<Bytes>,
    decoder: Decoder,
    deadline: Instant,
    deadline_ms: u64,
    ended: Option<Status>,
}

impl Call {
    /// The next message, or `None` once the call ended with status OK.
    pub async fn message<M: prost::Message + Default>(&mut self) -> Result<Option<M>, Fault> {
        loop {
            if let Some(bytes) = self.decoder.next_message()? {
                return M::decode(bytes).map(Some).map_err(|e| Fault::Decode(e.to_string()));
            }
            if let Some(status) = self.ended.take() {
                return finished(status);
            }
            match timeout_at(self.deadline, self.recv.data()).await {
                Err(_) => return Err(Fault::Deadline { ms: self.deadline_ms }),
                Ok(Some(Ok(data))) => {
                    // Window space back at once: the decoder holds the bytes now.
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    self.decoder.push(&data);
                }
                Ok(Some(Err(e))) => return Err(e.into()),
                Ok(None) => {
                    self.decoder.finish()?;
                    let trailers = match timeout_at(self.deadline, self.recv.trailers()).await {
                        Err(_) => return Err(Fault::Deadline { ms: self.deadline_ms }),
                        Ok(r) => r?,
                    };
                    let status = trailers.as_ref().and_then(Status::from_headers);
                    // A stream that ends without a status broke the protocol (the spec reads
                    // it as INTERNAL): it must not pass for a complete answer.
                    let status = status
                        .unwrap_or(Status { code: Code::Internal, message: "stream ended without grpc-status".into() });
                    return finished(status);
                }
            }
        }
    }

    /// Exactly one message and then the end: a unary answer.
    pub async fn single<M: prost::Message + Default>(mut self) -> Result<M, Fault> {
        let Some(m) = self.message::<M>().await? else {
            return Err(Fault::Decode("unary call ended without its answer".into()));
        };
        match self.message::<M>().await? {
            None => Ok(m),
            Some(_) => Err(Fault::Decode("unary call answered more than one message".into())),
        }
    }
}

fn finished<M>(status: Status) -> Result<Option<M>, Fault> {
    match status.code {
        Code::Ok => Ok(None),
        _ => Err(Fault::Status(status)),
    }
}
