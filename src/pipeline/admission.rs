//! Admission: at most `--max-concurrent-requests` generations run at once, all shards together;
//! up to `--queue-size` more wait in one global FIFO for at most `--queue-timeout-secs`. Beyond
//! the queue: 429; out of time: 503; both with `Retry-After`.
//!
//! A finished request hands its slot straight to the oldest waiter (on whichever shard), through
//! that shard's mailbox: no polling, no lock. Invariants:
//! - `running` counts held slots; a slot is either held by a `Permit`, in flight to a waiter in
//!   a `Grant` message, or free. A grant that finds its waiter gone is released again.
//! - A waiter re-checks for a free slot after queueing itself, and a releaser re-checks for
//!   waiters after freeing one, so a slot never stays free while someone waits.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam::queue::SegQueue;

use crate::config::Admission as AdmissionConfig;
use crate::error::ApiError;
use crate::metrics::{Endpoint, ErrorType};
use crate::shard::mailbox::ShardMsg;
use crate::shard::{ShardCtx, Shared};
use shardgate_util::signal::LocalSignal;

/// A queued request: its shard and its id there.
#[derive(Debug, Clone, Copy)]
struct Waiter {
    shard: usize,
    id: u64,
}

/// The process-wide state (in `Shared`).
pub struct Admission {
    config: AdmissionConfig,
    running: AtomicUsize,
    queued: AtomicUsize,
    waiters: SegQueue<Waiter>,
    /// Requests refused (queue full or timed out), for metrics.
    pub rejected_full: AtomicU64,
    pub rejected_timeout: AtomicU64,
}

impl Admission {
    pub fn new(config: AdmissionConfig) -> Self {
        Admission {
            config,
            running: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            waiters: SegQueue::new(),
            rejected_full: AtomicU64::new(0),
            rejected_timeout: AtomicU64::new(0),
        }
    }

    pub fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }

    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> Option<usize> {
        self.config.max_concurrent_requests
    }

    fn try_take(&self, limit: usize) -> bool {
        self.running.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < limit).then_some(n + 1)).is_ok()
    }

    /// Gives up a slot: to the oldest waiter if there is one, else back to the pool.
    fn release(&self, shared: &Shared) {
        let Some(limit) = self.limit() else { return };
        loop {
            if let Some(w) = self.waiters.pop() {
                shared.mailboxes[w.shard].post(ShardMsg::Grant(w.id));
                return;
            }
            self.running.fetch_sub(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            // A waiter that queued itself after our pop and checked before our decrement would
            // otherwise wait with a slot free.
            if self.waiters.is_empty() || !self.try_take(limit) {
                return;
            }
        }
    }
}

/// This shard's waiting requests (in `ShardCtx`).
#[derive(Default)]
pub struct LocalWaiters {
    next_id: Cell<u64>,
    waiting: RefCell<HashMap<u64, Rc<LocalSignal>>>,
}

impl LocalWaiters {
    /// A `Grant` arrived: wake its waiter, or pass the slot on if the waiter left.
    pub fn grant(&self, shared: &Shared, id: u64) {
        match self.waiting.borrow_mut().remove(&id) {
            Some(signal) => signal.raise(),
            None => shared.admission.release(shared),
        }
    }
}

/// A held slot; dropping it frees the slot.
pub struct Permit {
    shared: Option<Arc<Shared>>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.take() {
            shared.admission.release(&shared);
        }
    }
}

/// Waits for a slot for a generation at `endpoint`. A refusal (the 429 / 503 to send) is
/// counted and logged here; the adapter answers it.
pub async fn admit(ctx: &ShardCtx, endpoint: Endpoint) -> Result<Permit, ApiError> {
    acquire(ctx).await.inspect_err(|e| {
        ctx.metrics().error(endpoint, ErrorType::of(e));
        tracing::warn!("shard {}: request refused by admission: {}", ctx.index, e.message);
    })
}

/// Waits for a slot. Errors are the 429 / 503 to send.
pub async fn acquire(ctx: &ShardCtx) -> Result<Permit, ApiError> {
    let shared = &ctx.shared;
    let a = &shared.admission;
    let Some(limit) = a.limit() else { return Ok(Permit { shared: None }) };
    let granted = || Ok(Permit { shared: Some(shared.clone()) });
    if a.try_take(limit) {
        return granted();
    }
    if a.queued.fetch_add(1, Ordering::SeqCst) >= a.config.queue_size {
        a.queued.fetch_sub(1, Ordering::SeqCst);
        a.rejected_full.fetch_add(1, Ordering::Relaxed);
        return Err(ApiError::too_many_requests(
            format!(
                "Too many requests: {limit} are running and {} are waiting (--max-concurrent-requests, --queue-size)",
                a.config.queue_size
            ),
            1,
        ));
    }
    let waiters = &ctx.admission_waiters;
    let id = waiters.next_id.get();
    waiters.next_id.set(id + 1);
    let signal = Rc::new(LocalSignal::default());
    waiters.waiting.borrow_mut().insert(id, signal.clone());
    let mut wait = Wait { shared, waiters, id, settled: false };
    a.waiters.push(Waiter { shard: ctx.index, id });
    fence(Ordering::SeqCst);
    if a.try_take(limit) {
        // Our queue entry stays behind; its grant finds no waiter and is released again.
        waiters.waiting.borrow_mut().remove(&id);
        wait.settled = true;
        return granted();
    }
    let timeout = Duration::from_secs(a.config.queue_timeout_s);
    monoio::select! {
        _ = signal.wait() => {},
        _ = monoio::time::sleep(timeout) => {},
    }
    wait.settled = true;
    // Still in the map: no grant came. (A grant that landed in the same turn as the timeout
    // removed the entry, and the slot is ours.)
    if waiters.waiting.borrow_mut().remove(&id).is_some() {
        a.rejected_timeout.fetch_add(1, Ordering::Relaxed);
        return Err(ApiError::overloaded(
            format!("The server is overloaded: no slot became free within {} s; try again later", timeout.as_secs()),
            a.config.queue_timeout_s.clamp(1, 60) as u32,
        ));
    }
    granted()
}

/// A request in the queue. Keeps `queued` right however the wait ends, and if the request is
/// dropped while waiting, withdraws it (or frees the slot a grant already gave it).
struct Wait<'a> {
    shared: &'a Arc<Shared>,
    waiters: &'a LocalWaiters,
    id: u64,
    /// The outcome was taken over by `acquire` (a permit or an error).
    settled: bool,
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        self.shared.admission.queued.fetch_sub(1, Ordering::SeqCst);
        if !self.settled && self.waiters.waiting.borrow_mut().remove(&self.id).is_none() {
            self.shared.admission.release(self.shared);
        }
    }
}
