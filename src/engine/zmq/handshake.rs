//! Connecting a ZMQ worker: bind the handshake ROUTER and one input/output pair per shard, then
//! run HELLO → INIT → registration (on every input socket) → READY with every engine of the
//! group. Runs on the control shard; the bound sockets are then handed to their shards.
//!
//! Each wait is bounded by the handshake timeout, restarted whenever an expected message
//! arrives, so a slow engine load (minutes) is fine and a missing engine is reported by name.

use std::time::{Duration, Instant};

use futures_util::future::select_all;

use super::sockdir;
use super::socket::{configure, AsyncSocket};
use super::vllm::handshake::{decode_registration, decode_status, encode_init, EngineRegistration};
use crate::config::WorkerConfig;
use crate::limits;

/// The result of a completed handshake.
pub struct Connected {
    /// (input ROUTER, output PULL) per shard, in shard order.
    pub pairs: Vec<(zmq::Socket, zmq::Socket)>,
    /// One registration per engine, by rank.
    pub engines: Vec<EngineRegistration>,
}

#[derive(Default, Clone)]
struct EngineProgress {
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

/// Binds and runs the handshake for `worker` with `shards` client sockets.
pub async fn connect(
    zmq_ctx: &zmq::Context,
    worker: &WorkerConfig,
    handshake_address: &str,
    shards: usize,
    timeout: Duration,
) -> Result<Connected, String> {
    let files = sockdir::prepare(&worker.path, shards)?;
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
    let mut inputs = Vec::with_capacity(shards);
    let mut outputs = Vec::with_capacity(shards);
    for (input_path, output_path) in &files {
        let input = zmq_ctx.socket(zmq::ROUTER).map_err(|e| e.to_string())?;
        configure(&input).map_err(|e| e.to_string())?;
        input.set_router_mandatory(true).map_err(|e| e.to_string())?;
        input.bind(&format!("ipc://{input_path}")).map_err(|e| format!("cannot bind ipc://{input_path}: {e}"))?;
        let output = zmq_ctx.socket(zmq::PULL).map_err(|e| e.to_string())?;
        configure(&output).map_err(|e| e.to_string())?;
        output.bind(&format!("ipc://{output_path}")).map_err(|e| format!("cannot bind ipc://{output_path}: {e}"))?;
        inputs.push(input);
        outputs.push(output);
    }
    let input_addrs: Vec<String> = files.iter().map(|(i, _)| format!("ipc://{i}")).collect();
    let output_addrs: Vec<String> = files.iter().map(|(_, o)| format!("ipc://{o}")).collect();
    let mut init = Vec::with_capacity(256);
    encode_init(&input_addrs, &output_addrs, &mut init);

    let handshake = AsyncSocket::attach(handshake).map_err(|e| e.to_string())?;
    let inputs: Vec<AsyncSocket> =
        inputs.into_iter().map(AsyncSocket::attach).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
    let engines = exchange(&handshake, &inputs, &init, worker.engine_count, timeout).await?;
    let pairs = inputs.into_iter().map(AsyncSocket::detach).zip(outputs).collect();
    Ok(Connected { pairs, engines })
}

/// Drives the message exchange until every engine is registered on every input and READY.
async fn exchange(
    handshake: &AsyncSocket,
    inputs: &[AsyncSocket],
    init: &[u8],
    engine_count: usize,
    timeout: Duration,
) -> Result<Vec<EngineRegistration>, String> {
    let mut progress =
        vec![EngineProgress { registered: vec![false; inputs.len()], ..Default::default() }; engine_count];
    let mut frames: Vec<zmq::Message> = Vec::new();
    let mut deadline = Instant::now() + timeout;
    loop {
        if progress.iter().all(EngineProgress::done) {
            settle(handshake, init, &mut progress).await?;
            return Ok(progress.into_iter().filter_map(|p| p.registration).collect());
        }
        let mut advanced = false;
        while handshake.try_recv_multipart(&mut frames).map_err(|e| e.to_string())? {
            on_handshake_message(handshake, &frames, init, &mut progress)?;
            advanced = true;
        }
        for (k, input) in inputs.iter().enumerate() {
            while input.try_recv_multipart(&mut frames).map_err(|e| e.to_string())? {
                on_registration(k, &frames, &mut progress)?;
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
                waiting_for(&progress),
                timeout.as_secs()
            ));
        }
        let mut waits: Vec<_> = std::iter::once(handshake).chain(inputs).map(|s| Box::pin(s.readable())).collect();
        let any = select_all(waits.drain(..));
        let _ = monoio::time::timeout(deadline - now, any).await;
    }
}

/// Listens a moment longer after the last READY: the engines of one group start together, so
/// an engine beyond the expected count usually dials within milliseconds, and catching it here
/// fails the handshake with a clear reason instead of leaving that engine waiting for INIT.
async fn settle(handshake: &AsyncSocket, init: &[u8], progress: &mut [EngineProgress]) -> Result<(), String> {
    let until = Instant::now() + Duration::from_millis(limits::handshake_settle_ms);
    let mut frames: Vec<zmq::Message> = Vec::new();
    loop {
        while handshake.try_recv_multipart(&mut frames).map_err(|e| e.to_string())? {
            on_handshake_message(handshake, &frames, init, progress)?;
        }
        let now = Instant::now();
        if now >= until {
            return Ok(());
        }
        let _ = monoio::time::timeout(until - now, handshake.readable()).await;
    }
}

fn rank_of(identity: &[u8], engine_count: usize) -> Result<usize, String> {
    if identity.len() != 2 {
        return Err(format!("engine identity {identity:02x?} is not a 2-byte rank"));
    }
    let rank = u16::from_le_bytes([identity[0], identity[1]]) as usize;
    if rank >= engine_count {
        // More engines dialed in than the worker waits for: the same failure whichever
        // engine's HELLO arrives first.
        return Err(format!(
            "duplicate HELLO from engine rank {rank} after INIT phase: the worker expects {engine_count} engine(s); \
             check --zmq-engine-count (or dp_size) against the engine's --data-parallel-size"
        ));
    }
    Ok(rank)
}

fn on_handshake_message(
    handshake: &AsyncSocket,
    frames: &[zmq::Message],
    init: &[u8],
    progress: &mut [EngineProgress],
) -> Result<(), String> {
    let [identity, payload] = frames else {
        return Err(format!("handshake message with {} frames", frames.len()));
    };
    let msg = decode_status(payload).map_err(|e| format!("undecodable handshake message: {e}"))?;
    let all_inited = progress.iter().all(|p| p.hello);
    let rank = rank_of(identity, progress.len());
    match msg.status.as_str() {
        "HELLO" => {
            let rank = match rank {
                Ok(r) if !progress[r].hello => r,
                _ if all_inited => {
                    return Err(format!("duplicate HELLO from engine identity {identity:02x?} after INIT phase"))
                }
                Ok(r) => return Err(format!("duplicate HELLO from engine rank {r}")),
                Err(e) => return Err(e),
            };
            if !msg.headless {
                tracing::warn!("engine rank {rank} says it is not headless; continuing");
            }
            super::socket::send_frames(handshake.socket(), &[identity, init])
                .map_err(|e| format!("cannot send INIT to engine rank {rank}: {e}"))?;
            progress[rank].hello = true;
            tracing::debug!("HELLO from engine rank {rank}; INIT sent");
        }
        "READY" => {
            let rank = rank?;
            if !progress[rank].hello {
                return Err(format!("READY from engine rank {rank} before its HELLO"));
            }
            progress[rank].ready = true;
            tracing::debug!("READY from engine rank {rank}");
        }
        other => return Err(format!("unexpected handshake status {other:?}")),
    }
    Ok(())
}

fn on_registration(input: usize, frames: &[zmq::Message], progress: &mut [EngineProgress]) -> Result<(), String> {
    let [identity, payload] = frames else {
        return Err(format!("registration message with {} frames", frames.len()));
    };
    let rank = rank_of(identity, progress.len())?;
    let reg = decode_registration(payload).map_err(|e| format!("undecodable engine registration: {e}"))?;
    tracing::debug!(
        "engine rank {rank} registered on client socket {input} (max_model_len={}, vllm {})",
        reg.max_model_len,
        reg.vllm_version
    );
    let p = &mut progress[rank];
    p.registered[input] = true;
    p.registration.get_or_insert(reg);
    Ok(())
}

fn waiting_for(progress: &[EngineProgress]) -> String {
    if let Some(r) = progress.iter().position(|p| !p.hello) {
        return if progress.len() == 1 { "HELLO".into() } else { format!("HELLO from engine rank {r}") };
    }
    if let Some(r) = progress.iter().position(|p| !p.registered.iter().all(|&x| x)) {
        return format!("the registration of engine rank {r}");
    }
    match progress.iter().position(|p| !p.ready) {
        Some(r) => format!("READY from engine rank {r}"),
        None => "nothing".into(),
    }
}
