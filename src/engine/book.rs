//! The book of one shard's live requests on one worker for one epoch: which rank each went to,
//! its event slot, the rank table's counts, and the close that faults whatever is still live.
//! Every transport writes into it (decoded outputs, load reports, losses); none owns it.
//!
//! Invariants: a request id is in `requests` from its ADD until its final output, its ABORT, or
//! the close, never longer; every request in the map gets exactly one terminal event. Leaving
//! the map (`retire`) is the one place that counts a request finished, on the worker and on its
//! rank, so each dispatch is finished exactly once.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::loss::LinkLoss;
use super::slot::{RequestSlot, SlotEvent};
use super::TokenEvent;
use crate::error::{EngineFault, FaultSource};
use crate::routing::RankTable;
use crate::workers::Worker;
use shardgate_util::signal::LocalSignal;
use shardgate_wire::tokenspeed;

/// A request this shard has on the worker.
pub struct Live {
    pub slot: Rc<RequestSlot>,
    /// Position in the worker's rank table.
    pub rank: usize,
    /// TokenSpeed: restores vLLM's finish semantics on its outputs.
    pub finish: Option<tokenspeed::finish::RequestFinish>,
}

pub struct RequestBook {
    pub worker: Arc<Worker>,
    pub epoch: u64,
    /// This shard's index: the client index its requests carry.
    pub client_index: u32,
    pub ranks: Arc<RankTable>,
    requests: RefCell<HashMap<String, Live>>,
    closed: Cell<bool>,
    pub close_signal: LocalSignal,
    last_output: Cell<Instant>,
    /// When the output batch being delivered arrived (stamped once per batch).
    batch_arrived: Cell<Instant>,
    rank_cursor: Cell<usize>,
}

impl RequestBook {
    pub fn new(worker: Arc<Worker>, epoch: u64, client_index: u32, ranks: Arc<RankTable>) -> Self {
        RequestBook {
            worker,
            epoch,
            client_index,
            ranks,
            requests: RefCell::new(HashMap::new()),
            closed: Cell::new(false),
            close_signal: Default::default(),
            last_output: Cell::new(Instant::now()),
            batch_arrived: Cell::new(Instant::now()),
            // Shards start their rotation at different ranks so that ties spread.
            rank_cursor: Cell::new(client_index as usize),
        }
    }

    pub fn is_open(&self) -> bool {
        !self.closed.get()
    }

    pub fn in_flight(&self) -> usize {
        self.requests.borrow().len()
    }

    pub fn contains(&self, request_id: &str) -> bool {
        self.requests.borrow().contains_key(request_id)
    }

    /// Enters a request, on `preferred` or else the rank the table picks by load, and counts it
    /// dispatched: its slot and rank.
    pub fn enter(
        &self,
        request_id: &str,
        finish: Option<tokenspeed::finish::RequestFinish>,
        preferred: Option<usize>,
    ) -> (Rc<RequestSlot>, usize) {
        let rank = if let Some(rank) = preferred.filter(|&r| r < self.ranks.len()) {
            rank
        } else {
            let mut cursor = self.rank_cursor.get();
            let rank = self.ranks.select(&mut cursor);
            self.rank_cursor.set(cursor);
            rank
        };
        let slot = Rc::new(RequestSlot::default());
        let was_idle = self.requests.borrow().is_empty();
        self.requests.borrow_mut().insert(request_id.to_string(), Live { slot: slot.clone(), rank, finish });
        self.ranks.dispatched(rank);
        self.worker.in_flight.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if was_idle {
            // Silence is measured from the moment work is outstanding.
            self.last_output.set(Instant::now());
        }
        (slot, rank)
    }

    /// Takes a request out of the map and counts it finished; `None` if it already left.
    pub fn retire(&self, request_id: &str) -> Option<Live> {
        let live = self.requests.borrow_mut().remove(request_id)?;
        self.ranks.finished(live.rank);
        self.worker.request_finished();
        Some(live)
    }

    /// The live request ids, by rank.
    pub fn ids_by_rank(&self) -> Vec<Vec<String>> {
        let mut by_rank: Vec<Vec<String>> = vec![Vec::new(); self.ranks.len()];
        for (id, live) in self.requests.borrow().iter() {
            by_rank[live.rank].push(id.clone());
        }
        by_rank
    }

    /// Closes the book: every live request gets a fault and the transport's tasks stop.
    /// False if it was closed already.
    pub fn close(&self, reason: &LinkLoss) -> bool {
        if self.closed.replace(true) {
            return false;
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
        true
    }

    /// Closes the book and reports the worker lost (the supervisor re-binds).
    pub fn fail(&self, reason: LinkLoss) {
        self.close(&reason);
        self.worker.report_lost(self.epoch, reason);
    }

    /// Hands one decoded output to its request (stamped with its batch's arrival); a finish
    /// retires it. Returns the rank to ABORT it on when the gateway finished it at a stop token
    /// the engine does not watch for.
    #[must_use]
    pub fn deliver(&self, request_id: &str, mut ev: TokenEvent) -> Option<usize> {
        let (slot, cut, rank) = {
            let mut requests = self.requests.borrow_mut();
            let live = requests.get_mut(request_id)?;
            let cut = live.finish.as_mut().is_some_and(|f| f.apply(&mut ev));
            (live.slot.clone(), cut, live.rank)
        };
        if ev.finish.is_some() {
            self.retire(request_id);
        }
        slot.push(SlotEvent::Tokens(ev), self.batch_arrived.get());
        cut.then_some(rank)
    }

    /// The output batch about to be delivered arrived at `arrived`.
    pub fn batch_arrived(&self, arrived: Instant) {
        self.batch_arrived.set(arrived);
    }

    /// Output that shows requests progressing arrived at `arrived` (not only a reply to our own
    /// liveness ping, which proves the process is up, not that it still serves): it holds off
    /// the silence watchdog.
    pub fn progressed(&self, arrived: Instant) {
        self.last_output.set(arrived);
    }

    /// Publishes rank `rank`'s load report.
    pub fn report_load(&self, rank: usize, running: u32, waiting: u32, kv_cache_usage: f64) {
        let _ = self.ranks.report(rank, running.into(), waiting.into(), kv_cache_usage);
    }
}

/// Fails the book when requests are outstanding and the engine has said nothing for
/// `silence_s` (a deaf or hung engine never says anything again).
pub async fn watch_silence(book: Rc<RequestBook>, silence_s: u64) {
    let limit = Duration::from_secs(silence_s);
    let tick = Duration::from_secs(1);
    loop {
        monoio::select! {
            _ = monoio::time::sleep(tick) => {},
            _ = book.close_signal.wait() => return,
        }
        if book.in_flight() > 0 && book.last_output.get().elapsed() >= limit {
            tracing::error!(
                "worker {}: no output for {} s with {} requests in flight",
                book.worker.url(),
                limit.as_secs(),
                book.in_flight()
            );
            book.fail(LinkLoss::Silent { secs: limit.as_secs() });
            return;
        }
    }
}
