//! Connecting a ZMQ worker: bind the handshake ROUTER and the client socket pairs, then run
//! HELLO → INIT → registration (on every input socket) → READY with every engine of the group.
//! Runs on the control shard; the bound sockets are then handed to their shards.
//!
//! vLLM engines take one pair per shard (each shard is its own engine client). TokenSpeed reads
//! only the first pair of INIT, so it gets one pair, which its owner shard holds; its READY may
//! come before its registration. Engines are told apart by their identity frame (vLLM: the DP
//! rank; TokenSpeed: `--zmq-engine-index` + rank), so progress is tracked per identity.
//!
//! Each wait is bounded by the handshake timeout, restarted whenever an expected message
//! arrives, so a slow engine load (minutes) is fine and a missing engine is reported by name.

use std::fmt;
use std::io;
use std::time::{Duration, Instant};

use futures_util::future::select_all;

use super::handshake_socket::{AsyncSocket, HandshakeSendError};
use crate::config::{Backend, WorkerConfig};
use crate::limits;
use shardgate_wire::msgpack::DecodeError;
use shardgate_wire::sockdir::{self, SockdirError};
use shardgate_wire::vllm::handshake::{decode_status, EngineRegistration};
use shardgate_wire::zmtp::{self, Frames, Kind};
use shardgate_wire::{tokenspeed, vllm};

/// Why connecting a worker failed: its sockets could not be bound, or an engine broke (or
/// never finished) the handshake. The worker stays registered and the next health probe tries
/// again. Texts are the ones the supervisor has always logged.
#[derive(Debug)]
pub enum HandshakeError {
    /// The socket files (checked again at bind time).
    Sockets(SockdirError),
    CreateSocket(zmq::Error),
    /// Setting up the handshake socket (libzmq's text).
    Setup(zmq::Error),
    BindHandshake {
        address: String,
        source: zmq::Error,
    },
    BindIpc {
        path: String,
        source: io::Error,
    },
    /// A `tcp://` worker's data socket (`address` with port 0: a free port).
    BindTcp {
        address: String,
        source: io::Error,
    },
    /// Watching a socket from the control shard's runtime.
    Attach(io::Error),
    /// Receiving on the handshake socket (libzmq's text).
    Receive(zmq::Error),
    /// Receiving on a client input socket.
    ReceiveInput(io::Error),
    TimedOut {
        waiting_for: String,
        secs: u64,
    },
    BadIdentity(Vec<u8>),
    BeforeHello {
        rank: u16,
    },
    /// More engines dialed in than the worker expects.
    TooManyEngines {
        rank: u16,
        expected: usize,
    },
    DuplicateHello {
        rank: u16,
    },
    /// A handshake (`what`: handshake or registration) message with the wrong frame count.
    Frames {
        what: &'static str,
        count: usize,
    },
    UndecodableStatus(DecodeError),
    UndecodableRegistration(DecodeError),
    SendInit {
        rank: u16,
        source: HandshakeSendError,
    },
    UnexpectedStatus(String),
    /// Another registered worker's socket files are this one's (a symlinked directory made
    /// after both were registered).
    SharedFiles {
        other: String,
    },
    /// The handshake completed with no engine (never with a valid group).
    NoEngines,
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::Sockets(e) => e.fmt(f),
            HandshakeError::CreateSocket(e) => write!(f, "cannot create handshake socket: {e}"),
            HandshakeError::Setup(e) | HandshakeError::Receive(e) => e.fmt(f),
            HandshakeError::BindHandshake { address, source } => {
                write!(f, "cannot bind handshake address {address}: {source} (another process may hold the port)")
            }
            HandshakeError::BindIpc { path, source } => write!(f, "cannot bind ipc://{path}: {source}"),
            HandshakeError::BindTcp { address, source } => write!(f, "cannot bind tcp://{address}: {source}"),
            HandshakeError::Attach(e) | HandshakeError::ReceiveInput(e) => e.fmt(f),
            HandshakeError::TimedOut { waiting_for, secs } => {
                write!(f, "startup handshake timed out while waiting for {waiting_for} after {secs}s")
            }
            HandshakeError::BadIdentity(identity) => {
                write!(f, "engine identity {identity:02x?} is not a 2-byte engine index")
            }
            HandshakeError::BeforeHello { rank } => write!(f, "message from engine rank {rank} before its HELLO"),
            HandshakeError::TooManyEngines { rank, expected } => write!(
                f,
                "duplicate HELLO from engine rank {rank} after INIT phase: the worker expects {expected} engine(s); \
                 check --zmq-engine-count (or dp_size) against the engine's --data-parallel-size"
            ),
            HandshakeError::DuplicateHello { rank } => write!(f, "duplicate HELLO from engine rank {rank}"),
            HandshakeError::Frames { what, count } => write!(f, "{what} message with {count} frames"),
            HandshakeError::UndecodableStatus(e) => write!(f, "undecodable handshake message: {e}"),
            HandshakeError::UndecodableRegistration(e) => write!(f, "undecodable engine registration: {e}"),
            HandshakeError::SendInit { rank, source } => write!(f, "cannot send INIT to engine rank {rank}: {source}"),
            HandshakeError::UnexpectedStatus(status) => write!(f, "unexpected handshake status {status:?}"),
            HandshakeError::SharedFiles { other } => {
                write!(f, "its socket files are also worker {other}'s (a symlinked directory)")
            }
            HandshakeError::NoEngines => f.write_str("the handshake registered no engine"),
        }
    }
}

impl std::error::Error for HandshakeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HandshakeError::Sockets(e) => Some(e),
            HandshakeError::CreateSocket(e) | HandshakeError::Setup(e) | HandshakeError::Receive(e) => Some(e),
            HandshakeError::BindHandshake { source, .. } => Some(source),
            HandshakeError::BindIpc { source, .. } | HandshakeError::BindTcp { source, .. } => Some(source),
            HandshakeError::Attach(e) | HandshakeError::ReceiveInput(e) => Some(e),
            HandshakeError::UndecodableStatus(e) | HandshakeError::UndecodableRegistration(e) => Some(e),
            HandshakeError::SendInit { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// One engine of a connected group.
#[derive(Debug, Clone, PartialEq)]
pub struct Engine {
    /// The value of its 2-byte identity frame, which is also `engine_index` in its outputs.
    pub identity: u16,
    /// What it registered with (TokenSpeed's translated; `max_model_len` is what a request
    /// may use in total).
    pub registration: EngineRegistration,
}

/// The result of a completed handshake.
pub struct Connected {
    /// (input ROUTER, output PULL): one per shard for vLLM, one in all for TokenSpeed.
    pub pairs: Vec<(zmtp::Socket, zmtp::Socket)>,
    /// The engines, by data-parallel rank.
    pub engines: Vec<Engine>,
}

#[derive(Default, Clone)]
struct EngineProgress {
    identity: Vec<u8>,
    hello: bool,
    registered: Vec<bool>,
    registration: Option<EngineRegistration>,
    ready: bool,
}

impl EngineProgress {
    fn done(&self) -> bool {
        self.hello && self.ready && self.registered.iter().all(|&r| r)
    }
}

/// Binds and runs the handshake for `worker` with `shards` shards; its socket files must lie
/// under `socket_root` when one is set.
pub async fn connect(
    zmq_ctx: &zmq::Context,
    worker: &WorkerConfig,
    handshake_address: &str,
    shards: usize,
    socket_root: Option<&std::path::Path>,
    timeout: Duration,
) -> Result<Connected, HandshakeError> {
    let handshake = zmq_ctx.socket(zmq::ROUTER).map_err(HandshakeError::CreateSocket)?;
    handshake.set_linger(0).map_err(HandshakeError::Setup)?;
    handshake
        .bind(handshake_address)
        .map_err(|source| HandshakeError::BindHandshake { address: handshake_address.to_string(), source })?;
    tracing::info!(
        "Binding ZMQ client for worker {} (handshake={handshake_address}, engines={})",
        worker.url,
        worker.engine_count
    );
    let pairs = bind_pairs(worker, shards, socket_root)?;
    let mut inputs = Vec::with_capacity(pairs.len());
    let mut outputs = Vec::with_capacity(pairs.len());
    for (input, output) in pairs {
        inputs.push(zmtp::Attached::attach(input).map_err(HandshakeError::Attach)?);
        outputs.push(output);
    }
    // A TCP socket's path is its `tcp://` address as bound; a socket file's is the bare path.
    let address = |path: &str| if worker.tcp.is_some() { path.to_string() } else { format!("ipc://{path}") };
    let input_addrs: Vec<String> = inputs.iter().map(|i| address(&i.path())).collect();
    let output_addrs: Vec<String> = outputs.iter().map(|o| address(o.path())).collect();
    let mut init = Vec::with_capacity(256);
    vllm::handshake::encode_init(&input_addrs, &output_addrs, &mut init);

    let handshake = AsyncSocket::attach(handshake).map_err(HandshakeError::Attach)?;
    let wire = Wire { backend: worker.backend, engine_count: worker.engine_count, init: &init };
    let engines = exchange(&handshake, &inputs, &wire, timeout).await?;
    let pairs = inputs.into_iter().map(zmtp::Attached::detach).zip(outputs).collect();
    Ok(Connected { pairs, engines })
}

/// The worker's (input ROUTER, output PULL) pairs: socket files for an `ipc://` worker, free
/// ports on the handshake's IP for a `tcp://` one.
fn bind_pairs(
    worker: &WorkerConfig,
    shards: usize,
    socket_root: Option<&std::path::Path>,
) -> Result<Vec<(zmtp::Socket, zmtp::Socket)>, HandshakeError> {
    let count = worker.backend.socket_pairs(shards);
    if let Some(addr) = worker.tcp {
        let any_port = std::net::SocketAddr::new(addr.ip(), 0);
        let bind = |kind| {
            zmtp::Socket::bind_tcp(kind, any_port)
                .map_err(|source| HandshakeError::BindTcp { address: any_port.to_string(), source })
        };
        return (0..count).map(|_| Ok((bind(Kind::Router)?, bind(Kind::Pull)?))).collect();
    }
    let files = sockdir::prepare(&worker.path, count, socket_root).map_err(HandshakeError::Sockets)?;
    let bind = |kind, path: &str| {
        zmtp::Socket::bind(kind, path).map_err(|source| HandshakeError::BindIpc { path: path.to_string(), source })
    };
    files.iter().map(|(input, output)| Ok((bind(Kind::Router, input)?, bind(Kind::Pull, output)?))).collect()
}

/// What the exchange needs to know about the worker.
struct Wire<'a> {
    backend: Backend,
    engine_count: usize,
    init: &'a [u8],
}

impl Wire<'_> {
    fn decode_registration(&self, payload: &[u8]) -> Result<EngineRegistration, HandshakeError> {
        let undecodable = HandshakeError::UndecodableRegistration;
        match self.backend {
            Backend::Vllm => vllm::handshake::decode_registration(payload).map_err(undecodable),
            Backend::Tokenspeed => {
                let ts = tokenspeed::handshake::decode_registration(payload).map_err(undecodable)?;
                let mut reg = ts.to_vllm();
                reg.max_model_len = ts.usable_context_len();
                Ok(reg)
            }
        }
    }
}

/// Drives the message exchange until every engine is registered on every input and READY.
async fn exchange(
    handshake: &AsyncSocket,
    inputs: &[zmtp::Attached],
    wire: &Wire<'_>,
    timeout: Duration,
) -> Result<Vec<Engine>, HandshakeError> {
    // Every worker has a socket pair per shard, or one for all; `select_all` needs one.
    assert!(!inputs.is_empty(), "a handshake with no input socket");
    let mut progress: Vec<EngineProgress> = Vec::with_capacity(wire.engine_count);
    let mut frames: Vec<zmq::Message> = Vec::new();
    let mut input_frames = Frames::default();
    let mut deadline = Instant::now() + timeout;
    loop {
        if progress.len() == wire.engine_count && progress.iter().all(EngineProgress::done) {
            settle(handshake, wire, inputs.len(), &mut progress).await?;
            return Ok(finish(progress));
        }
        let mut advanced = false;
        while handshake.try_recv_multipart(&mut frames).map_err(HandshakeError::Receive)? {
            on_handshake_message(handshake, &frames, wire, inputs.len(), &mut progress)?;
            advanced = true;
        }
        for (k, input) in inputs.iter().enumerate() {
            while input.try_recv_multipart(&mut input_frames).map_err(HandshakeError::ReceiveInput)? {
                on_registration(k, &input_frames, wire, &mut progress)?;
                advanced = true;
            }
        }
        if advanced {
            deadline = Instant::now() + timeout;
            continue;
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(HandshakeError::TimedOut {
                waiting_for: waiting_for(&progress, wire.engine_count),
                secs: timeout.as_secs(),
            });
        }
        let inputs_ready = select_all(inputs.iter().map(|s| Box::pin(s.readable())));
        let any = async {
            monoio::select! {
                _ = handshake.readable() => {},
                _ = inputs_ready => {},
            }
        };
        let _ = monoio::time::timeout(deadline - now, any).await;
    }
}

/// The group by data-parallel rank.
fn finish(progress: Vec<EngineProgress>) -> Vec<Engine> {
    let mut engines: Vec<Engine> = progress
        .into_iter()
        .filter_map(|p| Some(Engine { identity: identity_value(&p.identity).ok()?, registration: p.registration? }))
        .collect();
    engines.sort_by_key(|e| (e.registration.data_parallel_rank, e.identity));
    engines
}

/// Listens a moment longer after the last READY: the engines of one group start together, so
/// an engine beyond the expected count usually dials within milliseconds, and catching it here
/// fails the handshake with a clear reason instead of leaving that engine waiting for INIT.
async fn settle(
    handshake: &AsyncSocket,
    wire: &Wire<'_>,
    inputs: usize,
    progress: &mut Vec<EngineProgress>,
) -> Result<(), HandshakeError> {
    let until = Instant::now() + Duration::from_millis(limits::handshake_settle_ms);
    let mut frames: Vec<zmq::Message> = Vec::new();
    loop {
        while handshake.try_recv_multipart(&mut frames).map_err(HandshakeError::Receive)? {
            on_handshake_message(handshake, &frames, wire, inputs, progress)?;
        }
        let now = Instant::now();
        if now >= until {
            return Ok(());
        }
        let _ = monoio::time::timeout(until - now, handshake.readable()).await;
    }
}

fn identity_value(identity: &[u8]) -> Result<u16, HandshakeError> {
    match identity {
        [lo, hi] => Ok(u16::from_le_bytes([*lo, *hi])),
        _ => Err(HandshakeError::BadIdentity(identity.to_vec())),
    }
}

/// The progress entry of the engine behind `identity`; a HELLO from a new identity takes a free
/// entry, and finds none once the group is complete.
fn entry(
    identity: &[u8],
    hello: bool,
    wire: &Wire<'_>,
    inputs: usize,
    progress: &mut Vec<EngineProgress>,
) -> Result<usize, HandshakeError> {
    let value = identity_value(identity)?;
    if let Some(i) = progress.iter().position(|p| p.identity == identity) {
        return Ok(i);
    }
    if !hello {
        return Err(HandshakeError::BeforeHello { rank: value });
    }
    if progress.len() >= wire.engine_count {
        // More engines dialed in than the worker waits for: the same failure whichever
        // engine's HELLO arrives last.
        return Err(HandshakeError::TooManyEngines { rank: value, expected: wire.engine_count });
    }
    progress.push(EngineProgress {
        identity: identity.to_vec(),
        registered: vec![false; inputs],
        ..Default::default()
    });
    Ok(progress.len() - 1)
}

fn on_handshake_message(
    handshake: &AsyncSocket,
    frames: &[zmq::Message],
    wire: &Wire<'_>,
    inputs: usize,
    progress: &mut Vec<EngineProgress>,
) -> Result<(), HandshakeError> {
    let [identity, payload] = frames else {
        return Err(HandshakeError::Frames { what: "handshake", count: frames.len() });
    };
    let msg = decode_status(payload).map_err(HandshakeError::UndecodableStatus)?;
    let rank = identity_value(identity)?;
    match msg.status.as_str() {
        "HELLO" => {
            let i = entry(identity, true, wire, inputs, progress)?;
            if progress[i].hello {
                return Err(HandshakeError::DuplicateHello { rank });
            }
            if !msg.headless {
                tracing::warn!("engine rank {rank} says it is not headless; continuing");
            }
            handshake
                .send_multipart(&[identity, wire.init])
                .map_err(|source| HandshakeError::SendInit { rank, source })?;
            progress[i].hello = true;
            tracing::debug!("HELLO from engine rank {rank}; INIT sent");
        }
        "READY" => {
            let i = entry(identity, false, wire, inputs, progress)?;
            progress[i].ready = true;
            tracing::debug!("READY from engine rank {rank}");
        }
        other => return Err(HandshakeError::UnexpectedStatus(other.to_string())),
    }
    Ok(())
}

fn on_registration(
    input: usize,
    frames: &Frames,
    wire: &Wire<'_>,
    progress: &mut Vec<EngineProgress>,
) -> Result<(), HandshakeError> {
    let Some((identity, payload)) = frames.pair() else {
        return Err(HandshakeError::Frames { what: "registration", count: frames.len() });
    };
    let inputs = progress.first().map_or(0, |p| p.registered.len());
    let i = entry(identity, false, wire, inputs, progress)?;
    let reg = wire.decode_registration(payload)?;
    tracing::debug!(
        "engine rank {} registered on client socket {input} (max_model_len={}, version {})",
        identity_value(identity)?,
        reg.max_model_len,
        reg.vllm_version
    );
    let p = &mut progress[i];
    if let Some(r) = p.registered.get_mut(input) {
        *r = true;
    }
    p.registration.get_or_insert(reg);
    Ok(())
}

fn waiting_for(progress: &[EngineProgress], engine_count: usize) -> String {
    if progress.len() < engine_count {
        if engine_count == 1 {
            return "HELLO".into();
        }
        // vLLM identities are the ranks 0..N: name the first one missing.
        let seen: Vec<u16> = progress.iter().filter_map(|p| identity_value(&p.identity).ok()).collect();
        return match (0..engine_count as u16).find(|r| !seen.contains(r)) {
            Some(r) if seen.iter().all(|&v| (v as usize) < engine_count) => format!("HELLO from engine rank {r}"),
            _ => format!("HELLO from {} more engine(s)", engine_count - progress.len()),
        };
    }
    let name = |p: &EngineProgress| identity_value(&p.identity).map_or_else(|e| e.to_string(), |v| v.to_string());
    if let Some(p) = progress.iter().find(|p| !p.registered.iter().all(|&x| x)) {
        return format!("the registration of engine rank {}", name(p));
    }
    match progress.iter().find(|p| !p.ready) {
        Some(p) => format!("READY from engine rank {}", name(p)),
        None => "nothing".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed errors read exactly as the texts they replaced (the supervisor logs them).
    #[test]
    fn handshake_texts_are_unchanged() {
        let cases: Vec<(HandshakeError, String)> = vec![
            (
                HandshakeError::BindHandshake { address: "tcp://127.0.0.1:1".into(), source: zmq::Error::EADDRINUSE },
                format!(
                    "cannot bind handshake address tcp://127.0.0.1:1: {} (another process may hold the port)",
                    zmq::Error::EADDRINUSE
                ),
            ),
            (
                HandshakeError::TimedOut { waiting_for: "HELLO".into(), secs: 600 },
                "startup handshake timed out while waiting for HELLO after 600s".into(),
            ),
            (
                HandshakeError::BadIdentity(vec![1, 2, 3]),
                "engine identity [01, 02, 03] is not a 2-byte engine index".into(),
            ),
            (HandshakeError::BeforeHello { rank: 2 }, "message from engine rank 2 before its HELLO".into()),
            (
                HandshakeError::TooManyEngines { rank: 2, expected: 2 },
                "duplicate HELLO from engine rank 2 after INIT phase: the worker expects 2 engine(s); check \
                 --zmq-engine-count (or dp_size) against the engine's --data-parallel-size"
                    .into(),
            ),
            (HandshakeError::DuplicateHello { rank: 0 }, "duplicate HELLO from engine rank 0".into()),
            (HandshakeError::Frames { what: "handshake", count: 3 }, "handshake message with 3 frames".into()),
            (HandshakeError::Frames { what: "registration", count: 1 }, "registration message with 1 frames".into()),
            (HandshakeError::UndecodableStatus(DecodeError("x".into())), "undecodable handshake message: x".into()),
            (
                HandshakeError::UndecodableRegistration(DecodeError("x".into())),
                "undecodable engine registration: x".into(),
            ),
            (
                HandshakeError::SendInit { rank: 0, source: HandshakeSendError::NotConnected },
                "cannot send INIT to engine rank 0: engine not connected".into(),
            ),
            (HandshakeError::UnexpectedStatus("BYE".into()), "unexpected handshake status \"BYE\"".into()),
            (
                HandshakeError::SharedFiles { other: "ipc:///tmp/v".into() },
                "its socket files are also worker ipc:///tmp/v's (a symlinked directory)".into(),
            ),
            (HandshakeError::NoEngines, "the handshake registered no engine".into()),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
        }
    }
}
