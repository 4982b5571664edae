//! One shard's connection to one worker for one epoch: the map of this shard's live requests,
//! how their messages reach the engines, and the tasks that read outputs and watch for silence.
//!
//! How messages travel depends on the engine (`Transport`): a vLLM engine takes one socket pair
//! per shard (requests go out as client index = shard, and the engine routes this shard's
//! outputs back here); a TokenSpeed engine takes one pair in all, held by an owner shard, which
//! relays the other shards' messages and routes their outputs through the `hub`.
//!
//! Invariants: a request id is in `requests` from its ADD until its final output, its ABORT, or
//! the link's close, never longer; every request in the map gets exactly one terminal event; a
//! closed link sends nothing. Leaving the map (`retire`) is the one place that counts a request
//! finished, on the worker and on its rank, so each dispatch is finished exactly once.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bringup::Engine;
use super::hub::{shard_of, Hub, Outgoing};
use super::loss::LinkLoss;
use crate::config::Backend;
use crate::engine::slot::{RequestSlot, SlotEvent};
use crate::engine::{EngineRequest, TokenEvent};
use crate::error::{ApiError, EngineFault, FaultSource};
use crate::limits;
use crate::routing::RankTable;
use crate::workers::Worker;
use shardgate_wire::msgpack::DecodeError;
use shardgate_wire::zmtp::{self, Attached, DriveEnd, Frames, SendError};
use shardgate_wire::{tokenspeed, vllm};

/// Request type bytes shared by both wires (vLLM and TokenSpeed agree on ADD and ABORT).
const REQUEST_ADD: u8 = vllm::REQUEST_ADD;
const REQUEST_ABORT: u8 = vllm::REQUEST_ABORT;
const _: () = assert!(REQUEST_ADD == tokenspeed::REQUEST_ADD && REQUEST_ABORT == tokenspeed::REQUEST_ABORT);

/// What a shard is handed for a worker after the handshake.
pub enum LinkSockets {
    /// This shard's own (input ROUTER, output PULL) pair.
    Pair(zmtp::Socket, zmtp::Socket),
    /// The worker's only pair, held by this shard for all shards.
    Owner(zmtp::Socket, zmtp::Socket, Arc<Hub>),
    /// Through the owner shard.
    Relay(Arc<Hub>),
}

enum Transport {
    Direct(Attached),
    Owner(Attached, Arc<Hub>),
    Relay(Arc<Hub>),
}

/// A request this shard has on the engine group.
struct Live {
    slot: Rc<RequestSlot>,
    /// Position in `engines` (and in the rank table).
    rank: usize,
    /// TokenSpeed: restores vLLM's finish semantics on its outputs.
    finish: Option<tokenspeed::finish::RequestFinish>,
}

pub struct EngineLink {
    pub worker: Arc<Worker>,
    pub epoch: u64,
    client_index: u32,
    backend: Backend,
    transport: Transport,
    engines: Arc<[Engine]>,
    ranks: Arc<RankTable>,
    requests: RefCell<HashMap<String, Live>>,
    closed: Cell<bool>,
    close_signal: shardgate_util::signal::LocalSignal,
    last_output: Cell<Instant>,
    /// When the output batch being delivered arrived (stamped once per batch).
    batch_arrived: Cell<Instant>,
    rank_cursor: Cell<usize>,
    /// Silence with requests in flight after which the engine counts as lost.
    silence_s: u64,
    scratch: RefCell<Vec<u8>>,
    next_call_id: Cell<u64>,
}

impl EngineLink {
    /// Takes over a shard's sockets (or relay) after the handshake and starts its tasks.
    pub fn start(
        worker: Arc<Worker>,
        epoch: u64,
        client_index: u32,
        sockets: LinkSockets,
        engines: Arc<[Engine]>,
        ranks: Arc<RankTable>,
        silence_s: u64,
    ) -> std::io::Result<Rc<EngineLink>> {
        assert!(!engines.is_empty() && engines.len() == ranks.len());
        let attach = Attached::attach;
        let (transport, output) = match sockets {
            LinkSockets::Pair(input, output) => (Transport::Direct(attach(input)?), Some(attach(output)?)),
            LinkSockets::Owner(input, output, hub) => (Transport::Owner(attach(input)?, hub), Some(attach(output)?)),
            LinkSockets::Relay(hub) => (Transport::Relay(hub), None),
        };
        let link = Rc::new(EngineLink {
            backend: worker.backend(),
            worker,
            epoch,
            client_index,
            transport,
            engines,
            // Shards start their rotation at different ranks so that ties spread.
            rank_cursor: Cell::new(client_index as usize),
            silence_s,
            ranks,
            requests: RefCell::new(HashMap::new()),
            closed: Cell::new(false),
            close_signal: Default::default(),
            last_output: Cell::new(Instant::now()),
            batch_arrived: Cell::new(Instant::now()),
            scratch: RefCell::new(Vec::with_capacity(4096)),
            next_call_id: Cell::new(1),
        });
        match (&link.transport, output) {
            (Transport::Relay(hub), _) => {
                monoio::spawn(relay_inbox(link.clone(), hub.clone()));
            }
            (Transport::Owner(_, _), Some(output)) => {
                monoio::spawn(read_outputs(link.clone(), output));
                monoio::spawn(drive_input(link.clone()));
                monoio::spawn(pump(link.clone()));
            }
            (_, Some(output)) => {
                monoio::spawn(read_outputs(link.clone(), output));
                monoio::spawn(drive_input(link.clone()));
            }
            (_, None) => unreachable!("socket transports come with an output socket"),
        }
        monoio::spawn(watch_silence(link.clone()));
        Ok(link)
    }

    /// The context length every engine of the group accepts.
    pub fn max_model_len(&self) -> u32 {
        self.engines.iter().map(|e| e.registration.max_model_len).min().unwrap_or(0)
    }

    pub fn is_open(&self) -> bool {
        !self.closed.get()
    }

    pub fn in_flight(&self) -> usize {
        self.requests.borrow().len()
    }

    fn identity(&self, rank: usize) -> [u8; 2] {
        self.engines[rank].identity.to_le_bytes()
    }

    /// Sends an ADD. The returned `Submission` aborts the request on the engine if it is dropped
    /// before the engine finished it. Errors: a request this engine cannot take (400) or a full
    /// relay queue (503), which are the client's answer, or a fault of the link, which
    /// `pipeline::retry` may route around. `lockstep`: the model is MoE, so the group's engines
    /// only step together (see `wake_group`).
    pub async fn submit(self: &Rc<Self>, req: &EngineRequest, lockstep: bool) -> Result<Submission, SubmitError> {
        if self.closed.get() {
            return Err(SubmitError::Fault(EngineFault::new(
                FaultSource::Gateway,
                "engine connection is closed",
                true,
            )));
        }
        if self.requests.borrow().contains_key(&req.request_id) {
            // A duplicate live id kills a vLLM engine; ids are unique by construction.
            return Err(SubmitError::Fault(EngineFault::new(FaultSource::Gateway, "duplicate live request id", true)));
        }
        let payload = {
            let mut buf = self.scratch.borrow_mut();
            buf.clear();
            match self.backend {
                Backend::Vllm => vllm::request::encode_add(req, self.client_index, &mut buf),
                Backend::Tokenspeed => tokenspeed::request::encode_add(req, true, &mut buf)
                    .map_err(|u| SubmitError::Refused(ApiError::invalid_param(u.param(), u.to_string())))?,
            }
            buf.clone()
        };
        let rank = {
            let mut cursor = self.rank_cursor.get();
            let rank = self.ranks.select(&mut cursor);
            self.rank_cursor.set(cursor);
            rank
        };
        let slot = Rc::new(RequestSlot::default());
        let finish =
            (self.backend == Backend::Tokenspeed).then(|| tokenspeed::finish::RequestFinish::new(&req.sampling));
        self.requests.borrow_mut().insert(req.request_id.clone(), Live { slot: slot.clone(), rank, finish });
        self.ranks.dispatched(rank);
        self.worker.in_flight.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if lockstep && self.backend == Backend::Vllm && self.engines.len() > 1 {
            self.wake_group();
        }
        if let Err(e) = self.send_add(rank, payload).await {
            self.retire(&req.request_id);
            return Err(e);
        }
        if self.requests.borrow().len() == 1 {
            // Silence is measured from the moment work is outstanding.
            self.last_output.set(Instant::now());
        }
        Ok(Submission { link: self.clone(), request_id: req.request_id.clone(), slot, rank })
    }

    /// A MoE group steps in lockstep (every step ends in a collective all ranks must join), and
    /// an idle rank joins only when told to start a wave: what vLLM's DP coordinator does, which
    /// does not run here. So every ADD to such a group is preceded by START_DP_WAVE to every rank,
    /// for a wave number above any the engines can have reached: they advance one wave per
    /// completed wave, and a wave completes only after one of our wake-ups, so the last number
    /// sent plus one bounds them. An engine already running just relabels its wave.
    fn wake_group(&self) {
        let wave = self.worker.dp_wave.fetch_add(1, std::sync::atomic::Ordering::AcqRel) + 1;
        for rank in 0..self.engines.len() {
            let mut payload = Vec::with_capacity(12);
            vllm::request::encode_start_dp_wave(wave, None, &mut payload);
            if let Err(e) = self.send_control(rank, vllm::REQUEST_START_DP_WAVE, payload) {
                tracing::warn!("cannot send START_DP_WAVE to {} rank {rank}: {e}", self.worker.url());
            }
        }
    }

    async fn send_add(&self, rank: usize, payload: Vec<u8>) -> Result<(), SubmitError> {
        let input = match &self.transport {
            Transport::Direct(input) | Transport::Owner(input, _) => input,
            Transport::Relay(hub) => {
                return hub.push_request(Outgoing { rank, kind: REQUEST_ADD, payload }).map_err(|_| {
                    tracing::warn!("worker {}: relay queue to the owner shard is full", self.worker.url());
                    SubmitError::Refused(ApiError::overloaded("The engine's request queue is full; try again later", 1))
                });
            }
        };
        let identity = self.identity(rank);
        let sent = input
            .send_multipart_within(
                &[&identity, &[REQUEST_ADD], &payload],
                Duration::from_millis(limits::send_block_ms_max),
            )
            .await;
        sent.map_err(|e| {
            self.fail(LinkLoss::SendFailed(e));
            SubmitError::Fault(
                EngineFault::new(FaultSource::Transport, format!("cannot send request to engine: {e}"), true)
                    .on_rank(rank),
            )
        })
    }

    /// Sends a message that must not wait (ABORT, ping); through the owner for a relay.
    fn send_control(&self, rank: usize, kind: u8, payload: Vec<u8>) -> Result<(), SendError> {
        match &self.transport {
            Transport::Direct(input) | Transport::Owner(input, _) => {
                input.send_multipart(&[&self.identity(rank), &[kind], &payload])
            }
            Transport::Relay(hub) => {
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

    /// Takes a request out of the map and counts it finished; `None` if it already left.
    fn retire(&self, request_id: &str) -> Option<Live> {
        let live = self.requests.borrow_mut().remove(request_id)?;
        self.ranks.finished(live.rank);
        self.worker.request_finished();
        Some(live)
    }

    fn abort(&self, request_id: &str) {
        let Some(live) = self.retire(request_id) else { return };
        self.send_abort(live.rank, request_id);
    }

    /// Tells the engine to drop a request that has already left the map.
    fn send_abort(&self, rank: usize, request_id: &str) {
        if self.closed.get() {
            return;
        }
        let payload = self.encode_abort(&[request_id]);
        if let Err(e) = self.send_control(rank, REQUEST_ABORT, payload) {
            tracing::warn!("cannot send ABORT for {request_id} to {}: {e}", self.worker.url());
            if e == SendError::Unreachable {
                self.fail(LinkLoss::Unreachable(e));
            }
        }
    }

    /// Sends a cheap message to every engine: a send to an engine that went away fails (no
    /// connection holds its identity). The closed connection itself is usually seen first
    /// (`drive_input`); this is the backstop. vLLM gets a utility call; TokenSpeed, which has
    /// none, an empty ABORT (a no-op there).
    pub fn ping(&self) -> Result<(), LinkLoss> {
        if self.closed.get() {
            return Err(LinkLoss::Closed);
        }
        for rank in 0..self.engines.len() {
            let mut payload = Vec::with_capacity(32);
            let kind = match self.backend {
                Backend::Vllm => {
                    let call_id = self.next_call_id.get();
                    self.next_call_id.set(call_id + 1);
                    vllm::request::encode_utility(self.client_index, call_id, "is_sleeping", &mut payload);
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

    /// Aborts every live request on its engine rank (one ABORT per rank), fails them for their
    /// clients, and closes the link without reporting the worker lost.
    pub fn abort_all(&self, reason: LinkLoss) {
        if self.closed.get() {
            return;
        }
        let mut by_rank: Vec<Vec<String>> = vec![Vec::new(); self.engines.len()];
        for (id, live) in self.requests.borrow().iter() {
            by_rank[live.rank].push(id.clone());
        }
        for (rank, ids) in by_rank.iter().enumerate().filter(|(_, ids)| !ids.is_empty()) {
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let payload = self.encode_abort(&ids);
            if let Err(e) = self.send_control(rank, REQUEST_ABORT, payload) {
                tracing::warn!("cannot send ABORT for {} request(s) to {}: {e}", ids.len(), self.worker.url());
            }
        }
        self.close(&reason);
    }

    /// Closes the link: every live request gets a fault, nothing more is sent, and the worker
    /// is reported lost (the supervisor re-binds).
    pub fn fail(&self, reason: LinkLoss) {
        self.close(&reason);
        self.worker.report_lost(self.epoch, reason);
    }

    /// Closes without reporting (the supervisor asked).
    pub fn close(&self, reason: &LinkLoss) {
        if self.closed.replace(true) {
            return;
        }
        let ids: Vec<String> = self.requests.borrow().keys().cloned().collect();
        for id in ids {
            let Some(Live { slot, rank, .. }) = self.retire(&id) else { continue };
            let fault = EngineFault::new(
                FaultSource::Transport,
                format!("engine connection lost: {reason}"),
                reason.retry_safe(),
            );
            slot.push(SlotEvent::Fault(fault.on_rank(rank)), Instant::now());
        }
        self.close_signal.raise();
    }

    fn deliver(&self, request_id: &str, mut ev: TokenEvent) {
        let (slot, cut, rank) = {
            let mut requests = self.requests.borrow_mut();
            let Some(live) = requests.get_mut(request_id) else { return };
            let cut = live.finish.as_mut().is_some_and(|f| f.apply(&mut ev));
            (live.slot.clone(), cut, live.rank)
        };
        if ev.finish.is_some() {
            self.retire(request_id);
        }
        slot.push(SlotEvent::Tokens(ev), self.batch_arrived.get());
        if cut {
            // The gateway finished it at a stop token the engine does not watch for.
            self.send_abort(rank, request_id);
        }
    }

    /// Owner shard: an output for any shard's request.
    fn route(&self, request_id: &str, ev: TokenEvent) {
        match (shard_of(request_id), &self.transport) {
            (Some(shard), _) if shard == self.client_index as usize => self.deliver(request_id, ev),
            (Some(shard), Transport::Owner(_, hub)) if hub.route(shard, request_id.to_string(), ev) => {}
            _ => tracing::warn!("worker {}: output for unknown request {request_id}", self.worker.url()),
        }
    }

    /// Publishes an engine's load report; `engine_index` is its identity value.
    fn report_load(&self, engine_index: u32, running: u32, waiting: u32, kv_cache_usage: f64) {
        let Some(rank) = self.engines.iter().position(|e| u32::from(e.identity) == engine_index) else {
            tracing::warn!("worker {}: load report from unknown engine {engine_index}", self.worker.url());
            return;
        };
        let _ = self.ranks.report(rank, running.into(), waiting.into(), kv_cache_usage);
    }

    /// Delivers one output message (Err: it could not be decoded). True when it shows requests
    /// progressing (outputs, finishes or a scheduler report): a reply to our own liveness ping
    /// proves the process is up, not that it still serves, so it must not hold off the silence
    /// watchdog.
    fn on_output(&self, frames: &Frames) -> Result<bool, DecodeError> {
        let progress;
        match self.backend {
            Backend::Vllm => {
                let aux: Vec<&[u8]> = frames.iter().skip(1).collect();
                let batch = vllm::output::decode_batch(&frames[0], &aux)?;
                // Before the batch's finishes, so a last finish resets this report, not the
                // reverse.
                progress = !batch.outputs.is_empty() || !batch.finished_requests.is_empty() || batch.load.is_some();
                if let Some(load) = &batch.load {
                    self.report_load(batch.engine_index, load.running, load.waiting, load.kv_cache_usage);
                }
                for (id, ev) in batch.outputs {
                    self.deliver(id, ev);
                }
            }
            Backend::Tokenspeed => {
                let batch = tokenspeed::output::decode_batch(&frames[0])?;
                progress = true;
                if let Some(load) = &batch.load {
                    self.report_load(batch.engine_index, load.running, load.waiting, load.kv_cache_usage());
                }
                for (id, ev) in batch.outputs {
                    self.route(id, ev);
                }
            }
        }
        Ok(progress)
    }
}

/// Why an ADD was not sent.
#[derive(Debug)]
pub enum SubmitError {
    /// The link failed or was closed: the request never reached an engine (`retry_safe`).
    Fault(EngineFault),
    /// This engine cannot take the request as it is (TokenSpeed's limits), or its relay queue
    /// is full: the client's answer, never routed around.
    Refused(ApiError),
}

impl SubmitError {
    pub fn to_api_error(&self) -> ApiError {
        match self {
            SubmitError::Fault(f) => f.to_api_error(),
            SubmitError::Refused(e) => e.clone(),
        }
    }
}

impl From<ApiError> for SubmitError {
    fn from(e: ApiError) -> Self {
        SubmitError::Refused(e)
    }
}

/// A request in flight on a link. Dropping it before the engine finished aborts it there.
pub struct Submission {
    link: Rc<EngineLink>,
    request_id: String,
    slot: Rc<RequestSlot>,
    /// The engine rank (position in the worker's group) it was sent to.
    rank: usize,
}

impl Submission {
    pub async fn next(&self) -> SlotEvent {
        self.slot.next().await
    }

    pub fn slot(&self) -> &RequestSlot {
        &self.slot
    }

    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// The engine rank it was sent to.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The link it is on.
    pub fn link(&self) -> &Rc<EngineLink> {
        &self.link
    }
}

impl Drop for Submission {
    fn drop(&mut self) {
        if !self.slot.is_closed() {
            self.link.abort(&self.request_id);
        }
    }
}

/// Reads the outputs of this shard's socket until the link closes.
async fn read_outputs(link: Rc<EngineLink>, output: Attached) {
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
        link.batch_arrived.set(arrived);
        match link.on_output(&frames) {
            Ok(progress) => {
                decode_failures = 0;
                if progress {
                    link.last_output.set(arrived);
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
async fn drive_input(link: Rc<EngineLink>) {
    let (Transport::Direct(input) | Transport::Owner(input, _)) = &link.transport else { return };
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

/// Owner shard: sends what the other shards queued, in order, until the link closes.
async fn pump(link: Rc<EngineLink>) {
    let Transport::Owner(input, hub) = &link.transport else { return };
    loop {
        monoio::select! {
            _ = hub.outgoing_ready() => {},
            _ = link.close_signal.wait() => return,
        }
        while let Some(msg) = hub.pop_outgoing() {
            let identity = link.identity(msg.rank.min(link.engines.len() - 1));
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
async fn relay_inbox(link: Rc<EngineLink>, hub: Arc<Hub>) {
    let shard = link.client_index as usize;
    loop {
        monoio::select! {
            _ = hub.output_ready(shard) => {},
            _ = link.close_signal.wait() => return,
        }
        let arrived = Instant::now();
        link.last_output.set(arrived);
        link.batch_arrived.set(arrived);
        while let Some((id, ev)) = hub.take_output(shard) {
            link.deliver(&id, ev);
        }
    }
}

/// Fails the link when requests are outstanding and the engine has said nothing for the
/// silence limit (a deaf or hung engine never says anything again).
async fn watch_silence(link: Rc<EngineLink>) {
    let limit = Duration::from_secs(link.silence_s);
    let tick = Duration::from_secs(1);
    loop {
        monoio::select! {
            _ = monoio::time::sleep(tick) => {},
            _ = link.close_signal.wait() => return,
        }
        if link.in_flight() > 0 && link.last_output.get().elapsed() >= limit {
            tracing::error!(
                "worker {}: no output for {} s with {} requests in flight",
                link.worker.url(),
                limit.as_secs(),
                link.in_flight()
            );
            link.fail(LinkLoss::Silent { secs: limit.as_secs() });
            return;
        }
    }
}
