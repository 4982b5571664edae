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

use std::time::{Duration, Instant};

use futures_util::future::select_all;

use super::socket::AsyncSocket;
use crate::config::{Backend, WorkerConfig};
use crate::limits;
use shardgate_wire::sockdir;
use shardgate_wire::vllm::handshake::{decode_status, EngineRegistration};
use shardgate_wire::zmtp::{self, Frames, Kind};
use shardgate_wire::{tokenspeed, vllm};

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

/// How many client socket pairs a worker of `backend` gets with `shards` shards.
pub fn pair_count(backend: Backend, shards: usize) -> usize {
    match backend {
        Backend::Vllm => shards,
        Backend::Tokenspeed => 1,
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
) -> Result<Connected, String> {
    let files =
        sockdir::prepare(&worker.path, pair_count(worker.backend, shards), socket_root).map_err(|e| e.to_string())?;
    let handshake = zmq_ctx.socket(zmq::ROUTER).map_err(|e| format!("cannot create handshake socket: {e}"))?;
    handshake.set_linger(0).map_err(|e| e.to_string())?;
    handshake.bind(handshake_address).map_err(|e| {
        format!("cannot bind handshake address {handshake_address}: {e} (another process may hold the port)")
    })?;
    tracing::info!(
        "Binding ZMQ client for worker {} (handshake={handshake_address}, engines={})",
        worker.url,
        worker.engine_count
    );
    let mut inputs = Vec::with_capacity(files.len());
    let mut outputs = Vec::with_capacity(files.len());
    for (input_path, output_path) in &files {
        let bind =
            |kind, path: &str| zmtp::Socket::bind(kind, path).map_err(|e| format!("cannot bind ipc://{path}: {e}"));
        let input = zmtp::Attached::attach(bind(Kind::Router, input_path)?).map_err(|e| e.to_string())?;
        inputs.push(input);
        outputs.push(bind(Kind::Pull, output_path)?);
    }
    let input_addrs: Vec<String> = files.iter().map(|(i, _)| format!("ipc://{i}")).collect();
    let output_addrs: Vec<String> = files.iter().map(|(_, o)| format!("ipc://{o}")).collect();
    let mut init = Vec::with_capacity(256);
    vllm::handshake::encode_init(&input_addrs, &output_addrs, &mut init);

    let handshake = AsyncSocket::attach(handshake).map_err(|e| e.to_string())?;
    let wire = Wire { backend: worker.backend, engine_count: worker.engine_count, init: &init };
    let engines = exchange(&handshake, &inputs, &wire, timeout).await?;
    let pairs = inputs.into_iter().map(zmtp::Attached::detach).zip(outputs).collect();
    Ok(Connected { pairs, engines })
}

/// What the exchange needs to know about the worker.
struct Wire<'a> {
    backend: Backend,
    engine_count: usize,
    init: &'a [u8],
}

impl Wire<'_> {
    fn decode_registration(&self, payload: &[u8]) -> Result<EngineRegistration, String> {
        let undecodable = |e| format!("undecodable engine registration: {e}");
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
) -> Result<Vec<Engine>, String> {
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
        while handshake.try_recv_multipart(&mut frames).map_err(|e| e.to_string())? {
            on_handshake_message(handshake, &frames, wire, inputs.len(), &mut progress)?;
            advanced = true;
        }
        for (k, input) in inputs.iter().enumerate() {
            while input.try_recv_multipart(&mut input_frames).map_err(|e| e.to_string())? {
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
            return Err(format!(
                "startup handshake timed out while waiting for {} after {}s",
                waiting_for(&progress, wire.engine_count),
                timeout.as_secs()
            ));
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
) -> Result<(), String> {
    let until = Instant::now() + Duration::from_millis(limits::handshake_settle_ms);
    let mut frames: Vec<zmq::Message> = Vec::new();
    loop {
        while handshake.try_recv_multipart(&mut frames).map_err(|e| e.to_string())? {
            on_handshake_message(handshake, &frames, wire, inputs, progress)?;
        }
        let now = Instant::now();
        if now >= until {
            return Ok(());
        }
        let _ = monoio::time::timeout(until - now, handshake.readable()).await;
    }
}

fn identity_value(identity: &[u8]) -> Result<u16, String> {
    match identity {
        [lo, hi] => Ok(u16::from_le_bytes([*lo, *hi])),
        _ => Err(format!("engine identity {identity:02x?} is not a 2-byte engine index")),
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
) -> Result<usize, String> {
    let value = identity_value(identity)?;
    if let Some(i) = progress.iter().position(|p| p.identity == identity) {
        return Ok(i);
    }
    if !hello {
        return Err(format!("message from engine rank {value} before its HELLO"));
    }
    if progress.len() >= wire.engine_count {
        // More engines dialed in than the worker waits for: the same failure whichever
        // engine's HELLO arrives last.
        return Err(format!(
            "duplicate HELLO from engine rank {value} after INIT phase: the worker expects {} engine(s); \
             check --zmq-engine-count (or dp_size) against the engine's --data-parallel-size",
            wire.engine_count
        ));
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
) -> Result<(), String> {
    let [identity, payload] = frames else {
        return Err(format!("handshake message with {} frames", frames.len()));
    };
    let msg = decode_status(payload).map_err(|e| format!("undecodable handshake message: {e}"))?;
    let rank = identity_value(identity)?;
    match msg.status.as_str() {
        "HELLO" => {
            let i = entry(identity, true, wire, inputs, progress)?;
            if progress[i].hello {
                return Err(format!("duplicate HELLO from engine rank {rank}"));
            }
            if !msg.headless {
                tracing::warn!("engine rank {rank} says it is not headless; continuing");
            }
            handshake
                .send_multipart(&[identity, wire.init])
                .map_err(|e| format!("cannot send INIT to engine rank {rank}: {e}"))?;
            progress[i].hello = true;
            tracing::debug!("HELLO from engine rank {rank}; INIT sent");
        }
        "READY" => {
            let i = entry(identity, false, wire, inputs, progress)?;
            progress[i].ready = true;
            tracing::debug!("READY from engine rank {rank}");
        }
        other => return Err(format!("unexpected handshake status {other:?}")),
    }
    Ok(())
}

fn on_registration(
    input: usize,
    frames: &Frames,
    wire: &Wire<'_>,
    progress: &mut Vec<EngineProgress>,
) -> Result<(), String> {
    let Some((identity, payload)) = frames.pair() else {
        return Err(format!("registration message with {} frames", frames.len()));
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
    let name = |p: &EngineProgress| identity_value(&p.identity).map_or_else(|e| e, |v| v.to_string());
    if let Some(p) = progress.iter().find(|p| !p.registered.iter().all(|&x| x)) {
        return format!("the registration of engine rank {}", name(p));
    }
    match progress.iter().find(|p| !p.ready) {
        Some(p) => format!("READY from engine rank {}", name(p)),
        None => "nothing".into(),
    }
}
