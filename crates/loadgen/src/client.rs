//! One client core's HTTP/1.1 connections and the exchange of one request on them. Connections
//! are pooled and kept alive (TCP_NODELAY, so Nagle never adds to a latency); a request opens
//! one only when the pool is empty, or always under --new-connection-per-request. Every read
//! is timestamped when it returns, so events that arrived together share their time.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;

use super::chunk::Dialect;
use super::error::{ListingFailure, RunError, ServerError};
use super::http::{Progress, ResponseReader};
use super::record::{Failure, FailureKind, RequestRecord};
use crate::limits;

/// Nanoseconds since the run origin, on the monotonic clock every client thread shares.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub origin: Instant,
}

impl Clock {
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// `instant` on this clock (0 before the origin).
    pub fn ns_at(&self, instant: Instant) -> u64 {
        u64::try_from(instant.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }

    pub fn at(&self, offset_ns: u64) -> Instant {
        self.origin + Duration::from_nanos(offset_ns)
    }
}

pub struct Pool {
    addr: SocketAddr,
    reuse: bool,
    idle: RefCell<Vec<TcpStream>>,
}

impl Pool {
    pub fn new(addr: SocketAddr, reuse: bool) -> Pool {
        Pool { addr, reuse, idle: RefCell::new(Vec::new()) }
    }

    async fn connect(&self) -> std::io::Result<TcpStream> {
        let stream = TcpStream::connect(self.addr).await?;
        stream.set_nodelay(true)?;
        Ok(stream)
    }

    /// Opens `count` idle connections ahead of the run, so that connection setup is not
    /// inside the first requests' latencies.
    pub async fn fill(&self, count: usize) -> Result<(), RunError> {
        while self.reuse && self.idle.borrow().len() < count {
            let stream = self.connect().await.map_err(|source| RunError::Connect { addr: self.addr, source })?;
            self.idle.borrow_mut().push(stream);
        }
        Ok(())
    }

    fn take_idle(&self) -> Option<TcpStream> {
        self.idle.borrow_mut().pop()
    }

    fn give_back(&self, stream: TcpStream) {
        if self.reuse {
            self.idle.borrow_mut().push(stream);
        }
    }
}

/// Sends `request` and records the response, read in `dialect`, into `rec` (its schedule
/// fields already set). A reused connection that turns out closed (the server's idle timeout)
/// before any response byte is retried once on a new connection.
pub async fn execute(
    pool: &Pool,
    clock: &Clock,
    request: &[u8],
    dialect: Dialect,
    rec: &mut RequestRecord,
    timeout: Duration,
) {
    let deadline = Instant::now() + timeout;
    for attempt in 0..2 {
        let idle = if attempt == 0 { pool.take_idle() } else { None };
        let (stream, new) = match idle {
            Some(s) => (s, false),
            None => match pool.connect().await {
                Ok(s) => (s, true),
                Err(e) => {
                    rec.end_ns = clock.now_ns();
                    rec.failure = Some(Failure::new(FailureKind::Connect, format!("connect: {e}")));
                    return;
                }
            },
        };
        rec.connection_new = new;
        let left = deadline.saturating_duration_since(Instant::now());
        let outcome = monoio::time::timeout(left, exchange(stream, clock, request, dialect, rec)).await;
        let result = match outcome {
            Ok(r) => r,
            Err(_) => {
                rec.end_ns = clock.now_ns();
                Err(Attempt::Failed(Failure::new(FailureKind::Timeout, format!("no complete response in {timeout:?}"))))
            }
        };
        match result {
            Ok(Some(stream)) => {
                pool.give_back(stream);
                break;
            }
            Ok(None) => break,
            Err(Attempt::Stale) if attempt == 0 && !new => continue,
            Err(Attempt::Stale) => {
                rec.failure = Some(Failure::new(FailureKind::Connection, "connection closed before the response"));
                break;
            }
            Err(Attempt::Failed(f)) => {
                rec.failure = Some(f);
                break;
            }
        }
    }
    if rec.failure.is_none() && rec.chunks.is_empty() {
        rec.failure = Some(Failure::new(FailureKind::NoTokens, "the stream carried no output chunk"));
    }
}

enum Attempt {
    /// The connection failed before a single response byte: safe to retry.
    Stale,
    Failed(Failure),
}

/// One request on one connection. Ok(Some(stream)): done and the connection is reusable.
async fn exchange(
    mut stream: TcpStream,
    clock: &Clock,
    request: &[u8],
    dialect: Dialect,
    rec: &mut RequestRecord,
) -> Result<Option<TcpStream>, Attempt> {
    rec.send_ns = clock.now_ns();
    let (written, _) = stream.write_all(request.to_vec()).await;
    if let Err(e) = written {
        rec.end_ns = clock.now_ns();
        return Err(io_failure(rec, &e));
    }
    let mut reader = ResponseReader::new(dialect);
    reader.input.reserve(limits::client_read_bytes_min);
    let mut received_any = false;
    loop {
        let mut buf = std::mem::take(&mut reader.input);
        if buf.capacity() - buf.len() < limits::client_read_bytes_min {
            buf.reserve(limits::client_read_bytes_min);
        }
        // monoio reads into the start of a Vec; a slice from `len` appends instead.
        let len = buf.len();
        let (read, spare) = stream.read(monoio::buf::IoBufMut::slice_mut(buf, len..)).await;
        let time_ns = clock.now_ns();
        reader.input = spare.into_inner();
        match read {
            Ok(0) => {
                if !received_any {
                    rec.end_ns = time_ns;
                    return Err(Attempt::Stale);
                }
                return reader.on_eof(time_ns, rec).map(|()| None).map_err(Attempt::Failed);
            }
            Ok(_) => received_any = true,
            Err(e) if !received_any => {
                rec.end_ns = time_ns;
                return Err(io_failure(rec, &e));
            }
            Err(e) => {
                rec.end_ns = time_ns;
                return Err(Attempt::Failed(Failure::new(FailureKind::Connection, format!("read: {e}"))));
            }
        }
        match reader.on_bytes(time_ns, rec) {
            Ok(Progress::More) => {}
            Ok(Progress::Complete { reusable }) => return Ok(reusable.then_some(stream)),
            Err(f) => {
                rec.end_ns = time_ns;
                return Err(Attempt::Failed(f));
            }
        }
    }
}

/// A write or first-read error: a reset on a reused connection is the stale case.
fn io_failure(rec: &RequestRecord, e: &std::io::Error) -> Attempt {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    if matches!(e.kind(), BrokenPipe | ConnectionReset | ConnectionAborted) && !rec.connection_new {
        return Attempt::Stale;
    }
    Attempt::Failed(Failure::new(FailureKind::Connection, format!("send: {e}")))
}

/// `GET /v1/models` before the run (blocking; the runtimes do not exist yet): the first
/// model's id, for runs without --model.
/// What `GET /v1/models` says of the served model: its id (the first listed when `model` is
/// None) and its `max_model_len` where the server reports one (vLLM and shardgate do).
pub struct ServedModel {
    pub id: String,
    pub max_model_len: Option<u64>,
}

/// vLLM's --ready-check-timeout-sec: polls `GET /v1/models` until it answers 200.
pub fn wait_ready(addr: SocketAddr, authority: &str, timeout: Duration) -> Result<(), ServerError> {
    let deadline = Instant::now() + timeout;
    loop {
        match list_models(addr, authority) {
            Ok(_) => return Ok(()),
            Err(failure) if Instant::now() >= deadline => {
                return Err(ServerError::NotReady {
                    timeout_s: timeout.as_secs(),
                    authority: authority.to_string(),
                    failure,
                })
            }
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

pub fn served_model(addr: SocketAddr, authority: &str, model: Option<&str>) -> Result<ServedModel, ServerError> {
    let listing = list_models(addr, authority);
    let entries = listing.as_ref().ok().and_then(|l| l["data"].as_array().cloned()).unwrap_or_default();
    let entry = match model {
        Some(m) => entries.iter().find(|e| e["id"] == m),
        None => entries.first(),
    };
    let max_model_len = entry.and_then(|e| e["max_model_len"].as_u64());
    match (model, entry) {
        // A named model needs no listing: servers without `/v1/models` still work.
        (Some(m), _) => Ok(ServedModel { id: m.to_string(), max_model_len }),
        (None, Some(e)) => e["id"]
            .as_str()
            .map(|id| ServedModel { id: id.to_string(), max_model_len })
            .ok_or_else(|| ServerError::ModelWithoutId { authority: authority.to_string() }),
        (None, None) => Err(ServerError::Listing {
            authority: authority.to_string(),
            failure: listing.err().unwrap_or(ListingFailure::NoModel),
        }),
    }
}

/// `GET /v1/models` at `authority`, its JSON body.
fn list_models(addr: SocketAddr, authority: &str) -> Result<serde_json::Value, ListingFailure> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let request = format!("GET /v1/models HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let (head, len) = super::http::parse_head(&raw)?.ok_or(ListingFailure::Truncated)?;
    if head.status != 200 {
        return Err(ListingFailure::Status(head.status));
    }
    let mut body = Vec::new();
    if head.framing == super::http::Framing::Chunked {
        super::http::ChunkedDecoder::default().decode(&raw[len..], &mut body)?;
    } else {
        body.extend_from_slice(&raw[len..]);
    }
    Ok(serde_json::from_slice(&body)?)
}
