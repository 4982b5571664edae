//! The ZMQ transport of a shard's link: how a ZMQ engine group's messages travel, and the tasks
//! that move them.
//!
//! A vLLM engine takes one socket pair per shard (requests go out as client index = shard, and
//! the engine routes this shard's outputs back here); a TokenSpeed engine takes one pair in
//! all, held by an owner shard, which relays the other shards' messages and routes their
//! outputs through the `hub`. Decoded outputs go into the link's request book
//! (`engine::book`).

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bringup::Engine;
use super::hub::{shard_of, Hub, Outgoing};
use crate::config::Backend;
use crate::engine::book::RequestBook;
use crate::engine::loss::LinkLoss;
use crate::engine::submit_error::SubmitError;
use crate::engine::{EngineRequest, TokenEvent};
use crate::error::{ApiError, EngineFault, FaultSource};
use crate::limits;
use shardgate_wire::msgpack::DecodeError;
use shardgate_wire::zmtp::{self, Attached, DriveEnd, Frames, SendError};
use shardgate_wire::{tokenspeed, vllm};

/// Request type bytes shared by both wires (vLLM and TokenSpeed agree on ADD and ABORT).
const REQUEST_ADD: u8 = vllm::REQUEST_ADD;
const REQUEST_ABORT: u8 = vllm::REQUEST_ABORT;
const _: () = assert!(REQUEST_ADD == tokenspeed::REQUEST_ADD && REQUEST_ABORT == tokenspeed::REQUEST_ABORT);

/// What a shard is handed for a ZMQ worker after the handshake.
pub struct ZmqAttachment {
    pub sockets: LinkSockets,
    /// The gateway's libzmq context, for the KV-event subscriptions.
    pub zmq: zmq::Context,
    /// The engines, by rank (the link's rank table has one slot each).
    pub engines: Arc<[Engine]>,
}

impl ZmqAttachment {
    /// The context length every engine of the group accepts.
    pub fn max_model_len(&self) -> u32 {
        self.engines.iter().map(|e| e.registration.max_model_len).min().unwrap_or(0)
    }
}

/// This shard's sockets for a worker.
pub enum LinkSockets {
    /// This shard's own (input ROUTER, output PULL) pair.
    Pair(zmtp::Socket, zmtp::Socket),
    /// The worker's only pair, held by this shard for all shards.
    Owner(zmtp::Socket, zmtp::Socket, Arc<Hub>),
    /// Through the owner shard.
    Relay(Arc<Hub>),
}

enum Route {
    Direct(Attached),
    Owner(Attached, Arc<Hub>),
    Relay(Arc<Hub>),
}

pub struct ZmqTransport {
    backend: Backend,
    route: Route,
    engines: Arc<[Engine]>,
    scratch: std::cell::RefCell<Vec<u8>>,
    next_call_id: std::cell::Cell<u64>,
}

impl ZmqTransport {
    /// Attaches this shard's sockets to its runtime and starts the tasks that read outputs into
    /// `book` and keep the sockets serviced.
    pub(crate) fn start(a: ZmqAttachment, backend: Backend, book: &Rc<RequestBook>) -> std::io::Result<Rc<Self>> {
        let attach = Attached::attach;
        let (route, output) = match a.sockets {
            LinkSockets::Pair(input, output) => (Route::Direct(attach(input)?), Some(attach(output)?)),
            LinkSockets::Owner(input, output, hub) => (Route::Owner(attach(input)?, hub), Some(attach(output)?)),
            LinkSockets::Relay(hub) => (Route::Relay(hub), None),
        };
        let t = Rc::new(ZmqTransport {
            backend,
            route,
            engines: a.engines,
            scratch: std::cell::RefCell::new(Vec::with_capacity(4096)),
            next_call_id: std::cell::Cell::new(1),
        });
        match (&t.route, output) {
            (Route::Relay(hub), _) => {
                monoio::spawn(relay_inbox(book.clone(), t.clone(), hub.clone()));
            }
            (Route::Owner(_, _), Some(output)) => {
                monoio::spawn(read_outputs(book.clone(), t.clone(), output));
                monoio::spawn(drive_input(book.clone(), t.clone()));
                monoio::spawn(pump(book.clone(), t.clone()));
            }
            (_, Some(output)) => {
                monoio::spawn(read_outputs(book.clone(), t.clone(), output));
                monoio::spawn(drive_input(book.clone(), t.clone()));
            }
            (_, None) => unreachable!("socket transports come with an output socket"),
        }
        Ok(t)
    }

    fn identity(&self, rank: usize) -> [u8; 2] {
        self.engines[rank].identity.to_le_bytes()
    }

    /// The ADD message for `req` (its payload and the aux frames that carry its images'
    /// tensors), or why this engine cannot take it.
    pub(crate) fn encode_add(&self, req: &EngineRequest, client_index: u32) -> Result<EncodedAdd, SubmitError> {
        let mut buf = self.scratch.borrow_mut();
        buf.clear();
        let mut aux = Vec::new();
        match self.backend {
            Backend::Vllm => vllm::request::encode_add(req, client_index, &mut buf, &mut aux),
            Backend::Tokenspeed => tokenspeed::request::encode_add(req, true, &mut buf)
                .map_err(|u| SubmitError::Refused(ApiError::invalid_param(u.param(), u.to_string())))?,
        }
        Ok(EncodedAdd { payload: buf.clone(), aux })
    }

    /// TokenSpeed's finish semantics for `req`, which the link applies to its outputs.
    pub(crate) fn request_finish(&self, req: &EngineRequest) -> Option<tokenspeed::finish::RequestFinish> {
        (self.backend == Backend::Tokenspeed).then(|| tokenspeed::finish::RequestFinish::new(&req.sampling))
    }

    /// A MoE group steps in lockstep (every step ends in a collective all ranks must join), and
    /// an idle rank joins only when told to start a wave: what vLLM's DP coordinator does, which
    /// does not run here. So every ADD to such a group is preceded by START_DP_WAVE to every rank,
    /// for a wave number above any the engines can have reached: they advance one wave per
    /// completed wave, and a wave completes only after one of our wake-ups, so the last number
    /// sent plus one bounds them. An engine already running just relabels its wave.
    pub(crate) fn wake_group(&self, link: &RequestBook) {
        if self.backend != Backend::Vllm || self.engines.len() < 2 {
            return;
        }
        let wave = link.worker.dp_wave.fetch_add(1, std::sync::atomic::Ordering::AcqRel) + 1;
        for rank in 0..self.engines.len() {
            let mut payload = Vec::with_capacity(12);
            vllm::request::encode_start_dp_wave(wave, None, &mut payload);
            if let Err(e) = self.send_control(rank, vllm::REQUEST_START_DP_WAVE, payload) {
                tracing::warn!("cannot send START_DP_WAVE to {} rank {rank}: {e}", link.worker.url());
            }
        }
    }

    pub(crate) async fn send_add(&self, link: &RequestBook, rank: usize, add: EncodedAdd) -> Result<(), SubmitError> {
        let EncodedAdd { payload, aux } = add;
        let input = match &self.route {
            Route::Direct(input) | Route::Owner(input, _) => input,
            Route::Relay(hub) => {
                // Relays serve TokenSpeed, whose codec refuses images: an ADD here is one frame.
                debug_assert!(aux.is_empty());
                return hub.push_request(Outgoing { rank, kind: REQUEST_ADD, payload }).map_err(|_| {
                    tracing::warn!("worker {}: relay queue to the owner shard is full", link.worker.url());
                    SubmitError::Refused(ApiError::overloaded("The engine's request queue is full; try again later", 1))
                });
            }
        };
        let identity = self.identity(rank);
        let mut frames: Vec<&[u8]> = Vec::with_capacity(3 + aux.len());
        frames.extend([&identity[..], &[REQUEST_ADD], &payload]);
        frames.extend(aux.iter().map(|a| &a[..]));
        let sent = input.send_multipart_within(&frames, Duration::from_millis(limits::send_block_ms_max)).await;
        sent.map_err(|e| {
            link.fail(LinkLoss::SendFailed(e));
            SubmitError::Fault(
                EngineFault::new(FaultSource::Transport, format!("cannot send request to engine: {e}"), true)
                    .on_rank(rank),
            )
        })
    }

    /// Sends a message that must not wait (ABORT, ping); through the owner for a relay.
    fn send_control(&self, rank: usize, kind: u8, payload: Vec<u8>) -> Result<(), SendError> {
        match &self.route {
            Route::Direct(input) | Route::Owner(input, _) => {
                input.send_multipart(&[&self.identity(rank), &[kind], &payload])
            }
            Route::Relay(hub) => {
                hub.push_control(Outgoing { rank, kind, payload });
                Ok(())
            }
        }
    }

    fn encode_abort(&self, ids: &[&str]) -> Vec<u8> {
        let mut payload = Vec::with_capacity(16 + ids.iter().map(|i| i.len() + 2).sum::<usize>());
        match self.backend {
            Backend::Vllm => vllm::request::encode_abort(ids, &mut payload),
            Backend::Tokenspeed => tokenspeed::request::encode_abort(ids, &mut payload),
        }
        payload
    }

    /// ABORT for one request that has left the link's map.
    pub(crate) fn send_abort(&self, link: &RequestBook, rank: usize, request_id: &str) {
        let payload = self.encode_abort(&[request_id]);
        if let Err(e) = self.send_control(rank, REQUEST_ABORT, payload) {
            tracing::warn!("cannot send ABORT for {request_id} to {}: {e}", link.worker.url());
            if e == SendError::Unreachable {
                link.fail(LinkLoss::Unreachable(e));
            }
        }
    }

    /// One ABORT per rank for the ids listed under it.
    pub(crate) fn abort_many(&self, link: &RequestBook, by_rank: &[Vec<String>]) {
        for (rank, ids) in by_rank.iter().enumerate().filter(|(_, ids)| !ids.is_empty()) {
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let payload = self.encode_abort(&ids);
            if let Err(e) = self.send_control(rank, REQUEST_ABORT, payload) {
                tracing::warn!("cannot send ABORT for {} request(s) to {}: {e}", ids.len(), link.worker.url());
            }
        }
    }

    /// Sends a cheap message to every engine: a send to an engine that went away fails (no
    /// connection holds its identity). The closed connection itself is usually seen first
    /// (`drive_input`); this is the backstop. vLLM gets a utility call; TokenSpeed, which has
    /// none, an empty ABORT (a no-op there).
    pub(crate) fn ping(&self, client_index: u32) -> Result<(), LinkLoss> {
        for rank in 0..self.engines.len() {
            let mut payload = Vec::with_capacity(32);
            let kind = match self.backend {
                Backend::Vllm => {
                    let call_id = self.next_call_id.get();
                    self.next_call_id.set(call_id + 1);
                    vllm::request::encode_utility(client_index, call_id, "is_sleeping", &mut payload);
                    vllm::REQUEST_UTILITY
                }
                Backend::Tokenspeed => {
                    tokenspeed::request::encode_ping(&mut payload);
                    REQUEST_ABORT
                }
            };
            match self.send_control(rank, kind, payload) {
                Ok(()) | Err(SendError::Full) => {}
                Err(error) => return Err(LinkLoss::PingFailed { rank: self.engines[rank].identity, error }),
            }
        }
        Ok(())
    }

    /// The rank of the engine whose identity value is `engine_index`.
    fn rank_of(&self, engine_index: u32) -> Option<usize> {
        self.engines.iter().position(|e| u32::from(e.identity) == engine_index)
    }

    /// Hands an output to this shard's request; ABORTs it on the engine when the gateway
    /// finished it (TokenSpeed: at a stop token the engine does not watch for).
    fn deliver(&self, link: &RequestBook, request_id: &str, ev: TokenEvent) {
        if let Some(rank) = link.deliver(request_id, ev) {
            if link.is_open() {
                self.send_abort(link, rank, request_id);
            }
        }
    }

    /// Owner shard: an output for any shard's request.
    fn route_output(&self, link: &RequestBook, request_id: &str, ev: TokenEvent) {
        match (shard_of(request_id), &self.route) {
            (Some(shard), _) if shard == link.client_index as usize => self.deliver(link, request_id, ev),
            (Some(shard), Route::Owner(_, hub)) if hub.route(shard, request_id.to_string(), ev) => {}
            _ => tracing::warn!("worker {}: output for unknown request {request_id}", link.worker.url()),
        }
    }

    /// Publishes an engine's load report; `engine_index` is its identity value.
    fn report_load(&self, link: &RequestBook, engine_index: u32, running: u32, waiting: u32, kv_cache_usage: f64) {
        match self.rank_of(engine_index) {
            Some(rank) => link.report_load(rank, running, waiting, kv_cache_usage),
            None => tracing::warn!("worker {}: load report from unknown engine {engine_index}", link.worker.url()),
        }
    }

    /// Delivers one output message (Err: it could not be decoded). True when it shows requests
    /// progressing (outputs, finishes or a scheduler report; see `EngineLink::progressed`).
    fn on_output(&self, link: &RequestBook, frames: &Frames) -> Result<bool, DecodeError> {
        let progress;
        match self.backend {
            Backend::Vllm => {
                let aux: Vec<&[u8]> = frames.iter().skip(1).collect();
                let batch = vllm::output::decode_batch(&frames[0], &aux)?;
                // Before the batch's finishes, so a last finish resets this report, not the
                // reverse.
                progress = !batch.outputs.is_empty() || !batch.finished_requests.is_empty() || batch.load.is_some();
                if let Some(load) = &batch.load {
                    self.report_load(link, batch.engine_index, load.running, load.waiting, load.kv_cache_usage);
                }
                for (id, ev) in batch.outputs {
                    self.deliver(link, id, ev);
                }
            }
            Backend::Tokenspeed => {
                let batch = tokenspeed::output::decode_batch(&frames[0])?;
                progress = true;
                if let Some(load) = &batch.load {
                    self.report_load(link, batch.engine_index, load.running, load.waiting, load.kv_cache_usage());
                }
                for (id, ev) in batch.outputs {
                    self.route_output(link, id, ev);
                }
            }
        }
        Ok(progress)
    }
}

/// Reads the outputs of this shard's socket until the link closes.
async fn read_outputs(link: Rc<RequestBook>, t: Rc<ZmqTransport>, output: Attached) {
    let mut frames = Frames::default();
    let mut decode_failures = 0u32;
    loop {
        let received = monoio::select! {
            r = output.recv_multipart(&mut frames) => r,
            _ = link.close_signal.wait() => return,
        };
        if let Err(e) = received {
            link.fail(LinkLoss::OutputFailed(Arc::new(e)));
            return;
        }
        if frames.len() == 1 && &frames[0][..] == vllm::ENGINE_CORE_DEAD {
            tracing::error!("engine of worker {} sent ENGINE_CORE_DEAD", link.worker.url());
            link.fail(LinkLoss::EngineDead);
            return;
        }
        let arrived = Instant::now();
        link.batch_arrived(arrived);
        match t.on_output(&link, &frames) {
            Ok(progress) => {
                decode_failures = 0;
                if progress {
                    link.progressed(arrived);
                }
            }
            Err(e) => {
                decode_failures += 1;
                tracing::warn!(
                    "undecodable output from worker {} ({decode_failures} in a row): {e}",
                    link.worker.url()
                );
                if decode_failures >= limits::output_decode_failures_max {
                    link.fail(LinkLoss::Undecodable { count: decode_failures, error: e });
                    return;
                }
            }
        }
    }
}

/// Keeps this shard's input socket serviced (queued requests flushed, a reconnecting engine
/// accepted) until the link closes, and fails the link as soon as an engine's connection
/// closes: a killed engine is noticed at once, not at the next liveness ping.
async fn drive_input(link: Rc<RequestBook>, t: Rc<ZmqTransport>) {
    let (Route::Direct(input) | Route::Owner(input, _)) = &t.route else { return };
    let reason = match input.drive(link.close_signal.wait()).await {
        DriveEnd::Stopped => return,
        DriveEnd::Lost(identity) => LinkLoss::EngineClosed(identity),
        DriveEnd::Failed(e) => LinkLoss::InputFailed(Arc::new(e)),
    };
    // A dying engine's last word (ENGINE_CORE_DEAD) is on the output socket: its reader gets
    // the moment it needs to report that cause instead of this one.
    monoio::select! {
        _ = monoio::time::sleep(Duration::from_millis(limits::engine_lost_grace_ms)) => {},
        _ = link.close_signal.wait() => return,
    }
    tracing::error!("worker {}: {reason}", link.worker.url());
    link.fail(reason);
}

/// An encoded ADD: the `EngineCoreRequest` frame, then one frame per out-of-band tensor.
pub(crate) struct EncodedAdd {
    payload: Vec<u8>,
    aux: Vec<Arc<[u8]>>,
}

/// Owner shard: sends what the other shards queued, in order, until the link closes.
async fn pump(link: Rc<RequestBook>, t: Rc<ZmqTransport>) {
    let Route::Owner(input, hub) = &t.route else { return };
    loop {
        monoio::select! {
            _ = hub.outgoing_ready() => {},
            _ = link.close_signal.wait() => return,
        }
        while let Some(msg) = hub.pop_outgoing() {
            let identity = t.identity(msg.rank.min(t.engines.len() - 1));
            let frames: [&[u8]; 3] = [&identity, &[msg.kind], &msg.payload];
            let sent = if msg.kind == REQUEST_ADD {
                input.send_multipart_within(&frames, Duration::from_millis(limits::send_block_ms_max)).await
            } else {
                input.send_multipart(&frames)
            };
            if let Err(e) = sent {
                // A full queue only delays a control message; anything else means the engine
                // is gone (or an ADD could not leave for the send limit).
                if msg.kind == REQUEST_ADD || e != SendError::Full {
                    link.fail(LinkLoss::RelayedSendFailed(e));
                    return;
                }
            }
        }
    }
}

/// A relayed shard: takes the outputs the owner routed here until the link closes.
async fn relay_inbox(link: Rc<RequestBook>, t: Rc<ZmqTransport>, hub: Arc<Hub>) {
    let shard = link.client_index as usize;
    loop {
        monoio::select! {
            _ = hub.output_ready(shard) => {},
            _ = link.close_signal.wait() => return,
        }
        let arrived = Instant::now();
        link.progressed(arrived);
        link.batch_arrived(arrived);
        while let Some((id, ev)) = hub.take_output(shard) {
            t.deliver(&link, &id, ev);
        }
    }
}
