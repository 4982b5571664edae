//! One shard's connection to one worker for one epoch: the shard's input ROUTER (requests go
//! out here as client index = shard index) and output PULL (the engine routes this shard's
//! outputs here), the map of this shard's live requests, and the tasks that read outputs and
//! watch for silence.
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

use super::socket::{AsyncSocket, SendError};
use super::vllm::{self, handshake::EngineRegistration, output::decode_batch};
use crate::engine::slot::{RequestSlot, SlotEvent};
use crate::engine::EngineRequest;
use crate::error::{EngineFault, FaultSource};
use crate::limits;
use crate::routing::RankTable;
use crate::workers::Worker;

/// A request this shard has on the engine group: where its outputs go and which rank has it.
struct Live {
    slot: Rc<RequestSlot>,
    /// Position in `engines` (and in the rank table).
    rank: usize,
}

pub struct EngineLink {
    pub worker: Arc<Worker>,
    pub epoch: u64,
    client_index: u32,
    input: AsyncSocket,
    engines: Arc<[EngineRegistration]>,
    ranks: Arc<RankTable>,
    requests: RefCell<HashMap<String, Live>>,
    closed: Cell<bool>,
    close_signal: crate::util::signal::LocalSignal,
    last_output: Cell<Instant>,
    rank_cursor: Cell<usize>,
    scratch: RefCell<Vec<u8>>,
    next_call_id: Cell<u64>,
}

impl EngineLink {
    /// Takes over a shard's socket pair after the handshake and starts its reader tasks.
    pub fn start(
        worker: Arc<Worker>,
        epoch: u64,
        client_index: u32,
        input: zmq::Socket,
        output: zmq::Socket,
        engines: Arc<[EngineRegistration]>,
        ranks: Arc<RankTable>,
    ) -> Result<Rc<EngineLink>, String> {
        let input = AsyncSocket::attach(input).map_err(|e| format!("cannot watch input socket: {e}"))?;
        let output = AsyncSocket::attach(output).map_err(|e| format!("cannot watch output socket: {e}"))?;
        assert!(!engines.is_empty() && engines.len() == ranks.len());
        let link = Rc::new(EngineLink {
            worker,
            epoch,
            client_index,
            input,
            engines,
            // Shards start their rotation at different ranks so that ties spread.
            rank_cursor: Cell::new(client_index as usize),
            ranks,
            requests: RefCell::new(HashMap::new()),
            closed: Cell::new(false),
            close_signal: Default::default(),
            last_output: Cell::new(Instant::now()),
            scratch: RefCell::new(Vec::with_capacity(4096)),
            next_call_id: Cell::new(1),
        });
        monoio::spawn(read_outputs(link.clone(), output));
        monoio::spawn(watch_silence(link.clone()));
        Ok(link)
    }

    /// The context length every engine of the group accepts.
    pub fn max_model_len(&self) -> u32 {
        self.engines.iter().map(|e| e.max_model_len).min().unwrap_or(0)
    }

    pub fn is_open(&self) -> bool {
        !self.closed.get()
    }

    pub fn in_flight(&self) -> usize {
        self.requests.borrow().len()
    }

    /// Sends an ADD. The returned `Submission` aborts the request on the engine if it is dropped
    /// before the engine finished it.
    pub async fn submit(self: &Rc<Self>, req: &EngineRequest) -> Result<Submission, EngineFault> {
        if self.closed.get() {
            return Err(EngineFault::new(FaultSource::Gateway, "engine connection is closed", true));
        }
        if self.requests.borrow().contains_key(&req.request_id) {
            // A duplicate live id kills a vLLM engine; ids are unique by construction.
            return Err(EngineFault::new(FaultSource::Gateway, "duplicate live request id", true));
        }
        let rank = {
            let mut cursor = self.rank_cursor.get();
            let rank = self.ranks.select(&mut cursor);
            self.rank_cursor.set(cursor);
            rank
        };
        let identity = vllm::engine_identity(self.engines[rank].data_parallel_rank as u16);
        let payload = {
            let mut buf = self.scratch.borrow_mut();
            buf.clear();
            vllm::request::encode_add(req, self.client_index, &mut buf);
            buf.clone()
        };
        let slot = Rc::new(RequestSlot::default());
        self.requests.borrow_mut().insert(req.request_id.clone(), Live { slot: slot.clone(), rank });
        self.ranks.dispatched(rank);
        self.worker.in_flight.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let sent = self
            .input
            .send_multipart_within(
                &[&identity, &[vllm::REQUEST_ADD], &payload],
                Duration::from_millis(limits::send_block_ms_max),
            )
            .await;
        if let Err(e) = sent {
            self.retire(&req.request_id);
            let fault = EngineFault::new(FaultSource::Transport, format!("cannot send request to engine: {e}"), true);
            self.fail(&format!("request send failed: {e}"));
            return Err(fault);
        }
        if self.requests.borrow().len() == 1 {
            // Silence is measured from the moment work is outstanding.
            self.last_output.set(Instant::now());
        }
        Ok(Submission { link: self.clone(), request_id: req.request_id.clone(), slot })
    }

    /// Takes a request out of the map and counts it finished; `None` if it already left.
    fn retire(&self, request_id: &str) -> Option<Live> {
        let live = self.requests.borrow_mut().remove(request_id)?;
        self.ranks.finished(live.rank);
        self.worker.in_flight.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        Some(live)
    }

    fn abort(&self, request_id: &str) {
        let Some(live) = self.retire(request_id) else { return };
        if self.closed.get() {
            return;
        }
        let rank = self.engines[live.rank].data_parallel_rank;
        let mut payload = Vec::with_capacity(request_id.len() + 4);
        vllm::request::encode_abort(&[request_id], &mut payload);
        let identity = vllm::engine_identity(rank as u16);
        if let Err(e) = self.input.send_multipart(&[&identity, &[vllm::REQUEST_ABORT], &payload]) {
            tracing::warn!("cannot send ABORT for {request_id} to {}: {e}", self.worker.url());
            if e == SendError::Unreachable {
                self.fail(&format!("engine unreachable: {e}"));
            }
        }
    }

    /// Sends a cheap utility call to every engine: a send to an engine that went away fails
    /// (ROUTER_MANDATORY), which is how a silent death of an idle engine is noticed.
    pub fn ping(&self) -> Result<(), String> {
        if self.closed.get() {
            return Err("connection closed".into());
        }
        for e in self.engines.iter() {
            let call_id = self.next_call_id.get();
            self.next_call_id.set(call_id + 1);
            let mut payload = Vec::with_capacity(32);
            vllm::request::encode_utility(self.client_index, call_id, "is_sleeping", &mut payload);
            let identity = vllm::engine_identity(e.data_parallel_rank as u16);
            match self.input.send_multipart(&[&identity, &[vllm::REQUEST_UTILITY], &payload]) {
                Ok(()) | Err(SendError::Full) => {}
                Err(err) => return Err(format!("engine rank {} unreachable: {err}", e.data_parallel_rank)),
            }
        }
        Ok(())
    }

    /// Aborts every live request on its engine rank (one ABORT per rank), fails them for their
    /// clients, and closes the link without reporting the worker lost.
    pub fn abort_all(&self, reason: &str) {
        if self.closed.get() {
            return;
        }
        let mut by_rank: Vec<Vec<String>> = vec![Vec::new(); self.engines.len()];
        for (id, live) in self.requests.borrow().iter() {
            by_rank[live.rank].push(id.clone());
        }
        for (rank, ids) in by_rank.iter().enumerate().filter(|(_, ids)| !ids.is_empty()) {
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let mut payload = Vec::with_capacity(64 * ids.len());
            vllm::request::encode_abort(&ids, &mut payload);
            let identity = vllm::engine_identity(self.engines[rank].data_parallel_rank as u16);
            if let Err(e) = self.input.send_multipart(&[&identity, &[vllm::REQUEST_ABORT], &payload]) {
                tracing::warn!("cannot send ABORT for {} request(s) to {}: {e}", ids.len(), self.worker.url());
            }
        }
        self.close(reason);
    }

    /// Closes the link: every live request gets a fault, nothing more is sent, and the worker
    /// is reported lost (the supervisor re-binds).
    pub fn fail(&self, reason: &str) {
        self.close(reason);
        self.worker.report_lost(self.epoch, reason);
    }

    /// Closes without reporting (the supervisor asked).
    pub fn close(&self, reason: &str) {
        if self.closed.replace(true) {
            return;
        }
        let ids: Vec<String> = self.requests.borrow().keys().cloned().collect();
        for id in ids {
            let Some(Live { slot, .. }) = self.retire(&id) else { continue };
            slot.push(SlotEvent::Fault(EngineFault::new(
                FaultSource::Transport,
                format!("engine connection lost: {reason}"),
                false,
            )));
        }
        self.close_signal.raise();
    }

    fn deliver(&self, request_id: &str, ev: crate::engine::TokenEvent) {
        let slot = if ev.finish.is_some() {
            self.retire(request_id).map(|live| live.slot)
        } else {
            self.requests.borrow().get(request_id).map(|live| live.slot.clone())
        };
        if let Some(slot) = slot {
            slot.push(SlotEvent::Tokens(ev));
        }
    }

    /// Publishes an engine's load report; `engine_index` is its data-parallel rank.
    fn report_load(&self, engine_index: u32, load: &vllm::output::SchedulerLoad) {
        let Some(position) = self.engines.iter().position(|e| e.data_parallel_rank == engine_index) else {
            tracing::warn!("worker {}: load report from unknown engine rank {engine_index}", self.worker.url());
            return;
        };
        let _ = self.ranks.report(position, load.running.into(), load.waiting.into(), load.kv_cache_usage);
    }
}

/// A request in flight on a link. Dropping it before the engine finished aborts it there.
pub struct Submission {
    link: Rc<EngineLink>,
    request_id: String,
    slot: Rc<RequestSlot>,
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
}

impl Drop for Submission {
    fn drop(&mut self) {
        if !self.slot.is_closed() {
            self.link.abort(&self.request_id);
        }
    }
}

/// Reads this shard's outputs until the link closes.
async fn read_outputs(link: Rc<EngineLink>, output: AsyncSocket) {
    let mut frames: Vec<zmq::Message> = Vec::with_capacity(4);
    let mut decode_failures = 0u32;
    loop {
        let received = monoio::select! {
            r = output.recv_multipart(&mut frames) => r,
            _ = link.close_signal.wait() => return,
        };
        if let Err(e) = received {
            link.fail(&format!("output socket failed: {e}"));
            return;
        }
        link.last_output.set(Instant::now());
        if frames.len() == 1 && &frames[0][..] == vllm::ENGINE_CORE_DEAD {
            tracing::error!("engine of worker {} sent ENGINE_CORE_DEAD", link.worker.url());
            link.fail("the engine reported a fatal error (ENGINE_CORE_DEAD)");
            return;
        }
        let aux: Vec<&[u8]> = frames[1..].iter().map(|m| &m[..]).collect();
        match decode_batch(&frames[0], &aux) {
            Ok(batch) => {
                decode_failures = 0;
                // Before the batch's finishes, so a last finish resets this report, not the
                // reverse.
                if let Some(load) = &batch.load {
                    link.report_load(batch.engine_index, load);
                }
                for (id, ev) in batch.outputs {
                    link.deliver(id, ev);
                }
            }
            Err(e) => {
                decode_failures += 1;
                tracing::warn!(
                    "undecodable output from worker {} ({decode_failures} in a row): {e}",
                    link.worker.url()
                );
                if decode_failures >= limits::output_decode_failures_max {
                    link.fail(&format!("{decode_failures} outputs in a row could not be decoded: {e}"));
                    return;
                }
            }
        }
    }
}

/// Fails the link when requests are outstanding and the engine has said nothing for the
/// silence limit (a deaf or hung engine never says anything again).
async fn watch_silence(link: Rc<EngineLink>) {
    let limit = Duration::from_secs(limits::engine_silence_s_max);
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
            link.fail(&format!("no output for {} s while requests were in flight", limit.as_secs()));
            return;
        }
    }
}
