//! Workers: the engines (or engine groups) the gateway serves, and their lifecycle.
//!
//! `registry` holds the worker list, swapped whole on change and read lock-free by every
//! shard. A worker's mutable state is a handful of atomics (status, connection epoch, in-flight
//! count, loss and removal flags), so any shard reads it without locks; labels and priority
//! (control plane only) sit behind a lock nobody on the request path takes. Connection work
//! (binding, handshake, re-binding after a loss, draining) runs on the control shard in
//! `supervisor` (ZMQ) and `grpc` (the gRPC workers' supervisor); `jobs` validates and registers workers; `api` serves `/workers`.

pub mod add_worker;
pub mod api;
pub mod grpc;
pub mod jobs;
pub mod refusal;
pub mod registry;
pub mod supervisor;
pub mod tcp;
pub mod tls;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use arc_swap::ArcSwapOption;

use serde_json::{Map, Value};

use crate::config::{Backend, WorkerConfig};
use crate::engine::loss::LinkLoss;
use crate::routing::RankTable;

/// Lifecycle states (SMG's "Worker Lifecycle").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum WorkerStatus {
    /// Registered; sockets bound; waiting for the engine's handshake.
    Pending = 0,
    /// Handshake complete and every shard holds its socket pair.
    Ready = 1,
    /// The engine was lost; the next probe re-binds.
    Dead = 2,
    /// Removal requested: no new requests; in-flight ones finish, then the worker goes.
    Draining = 3,
}

impl WorkerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerStatus::Pending => "pending",
            WorkerStatus::Ready => "ready",
            WorkerStatus::Dead => "dead",
            WorkerStatus::Draining => "draining",
        }
    }
}

/// Labels and priority: read by the admin API, changed by `PATCH /workers/{id}`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkerMeta {
    pub labels: Map<String, Value>,
    pub priority: i64,
}

/// A worker's KV cache as its engines registered it: what a scheduler's prefix-cache scorer
/// sizes its estimate of this host by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvCacheShape {
    /// Tokens per KV block (the first rank's; the ranks of one group share the model config).
    pub block_size: u32,
    /// Blocks over all ranks.
    pub gpu_blocks: u64,
}

pub struct Worker {
    /// Stable id for the admin API (`GET /workers/{id}`).
    pub id: String,
    /// Numeric identity for per-shard maps.
    pub key: u64,
    pub config: WorkerConfig,
    pub handshake_address: String,
    meta: RwLock<WorkerMeta>,
    status: AtomicU8,
    /// Incremented per connection attempt; messages about an older epoch are stale.
    epoch: AtomicU64,
    /// Set by any shard that saw the engine die; the supervisor reacts.
    lost: AtomicBool,
    lost_reason: Mutex<Option<LinkLoss>>,
    /// Set by `DELETE /workers/{id}`: the supervisor drains, then removes the worker.
    removing: AtomicBool,
    /// Requests in flight on this worker, all shards together (`request_finished` counts down).
    pub in_flight: AtomicI64,
    /// The supervisor's waker, woken when it has something to do (`lost`, `removing`, or the
    /// last request of a draining worker finished): it sleeps between events instead of
    /// polling, since every wake-up of an idle gateway costs CPU.
    supervisor: atomic_waker::AtomicWaker,
    /// The load of each engine rank of the current connection (absent before the first
    /// handshake); replaced whole on each connection, since a restarted group may differ.
    ranks: ArcSwapOption<RankTable>,
    /// The KV cache the current (or last) connection's engines registered.
    kv_cache: Mutex<Option<KvCacheShape>>,
    /// The last DP wave the gateway started on a lockstep (MoE) group; see `EngineLink::submit`.
    pub dp_wave: AtomicU64,
}

impl Worker {
    pub fn new(key: u64, config: WorkerConfig, meta: WorkerMeta) -> Self {
        // An HTTP or gRPC worker binds nothing.
        let handshake_address = if config.upstream.is_some() || config.grpc_addr.is_some() {
            String::new()
        } else {
            crate::config::handshake_address(&config)
        };
        Worker {
            id: format!("w{key:x}"),
            key,
            config,
            handshake_address,
            meta: RwLock::new(meta),
            status: AtomicU8::new(WorkerStatus::Pending as u8),
            epoch: AtomicU64::new(0),
            lost: AtomicBool::new(false),
            lost_reason: Mutex::new(None),
            removing: AtomicBool::new(false),
            in_flight: AtomicI64::new(0),
            supervisor: atomic_waker::AtomicWaker::new(),
            ranks: ArcSwapOption::empty(),
            kv_cache: Mutex::new(None),
            dp_wave: AtomicU64::new(0),
        }
    }

    pub fn url(&self) -> &str {
        &self.config.url
    }

    pub fn backend(&self) -> Backend {
        self.config.backend
    }

    /// SMG's `connection_mode`: how the gateway reaches the worker.
    pub fn connection_mode(&self) -> &'static str {
        self.config.connection_mode()
    }

    /// SMG's `runtime_type`: the engine's wire for a ZMQ worker; an HTTP worker's server is
    /// whatever speaks the OpenAI API.
    pub fn runtime_type(&self) -> &'static str {
        if self.config.upstream.is_some() {
            "external"
        } else {
            self.config.backend.as_str()
        }
    }

    pub fn status(&self) -> WorkerStatus {
        if self.removing.load(Ordering::Acquire) {
            return WorkerStatus::Draining;
        }
        match self.status.load(Ordering::Acquire) {
            1 => WorkerStatus::Ready,
            2 => WorkerStatus::Dead,
            _ => WorkerStatus::Pending,
        }
    }

    /// Ready and not being removed: may take new requests.
    pub fn is_routable(&self) -> bool {
        self.status() == WorkerStatus::Ready
    }

    pub(crate) fn set_status(&self, s: WorkerStatus) {
        self.status.store(s as u8, Ordering::Release);
    }

    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    pub(crate) fn next_epoch(&self) -> u64 {
        self.epoch.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Reports the engine lost (first report wins). Called from any shard.
    pub fn report_lost(&self, epoch: u64, reason: LinkLoss) {
        if epoch != self.epoch() {
            return;
        }
        if !self.lost.swap(true, Ordering::AcqRel) {
            if let Ok(mut r) = self.lost_reason.lock() {
                *r = Some(reason);
            }
        }
        self.supervisor.wake();
    }

    fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    pub(crate) fn take_lost(&self) -> Option<LinkLoss> {
        if self.lost.swap(false, Ordering::AcqRel) {
            // Set before the flag; a poisoned lock (a panicking reporter) still reads as lost.
            Some(self.lost_reason.lock().ok().and_then(|mut r| r.take()).unwrap_or(LinkLoss::Closed))
        } else {
            None
        }
    }

    pub(crate) fn request_removal(&self) {
        self.removing.store(true, Ordering::SeqCst);
        self.supervisor.wake();
    }

    /// One request left this worker (any shard). SeqCst with `drained`: the last request of a
    /// draining worker always sees the removal flag, or the supervisor sees the count at zero.
    pub(crate) fn request_finished(&self) {
        if self.in_flight.fetch_sub(1, Ordering::SeqCst) <= 1 && self.removing.load(Ordering::SeqCst) {
            self.supervisor.wake();
        }
    }

    /// Being removed, and no request is left on it.
    pub(crate) fn drained(&self) -> bool {
        self.removing.load(Ordering::SeqCst) && self.in_flight.load(Ordering::SeqCst) <= 0
    }

    pub(crate) fn is_lost_or_drained(&self) -> bool {
        self.is_lost() || self.drained()
    }

    /// Resolves once `ready` holds, woken by the events above (only the supervisor waits).
    pub(crate) async fn supervisor_event(&self, ready: impl Fn(&Worker) -> bool) {
        std::future::poll_fn(|cx| {
            self.supervisor.register(cx.waker());
            if ready(self) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await
    }

    pub fn is_removing(&self) -> bool {
        self.removing.load(Ordering::Acquire)
    }

    /// The rank table of the current (or last) connection.
    pub fn ranks(&self) -> Option<Arc<RankTable>> {
        self.ranks.load_full()
    }

    pub(crate) fn set_ranks(&self, table: Arc<RankTable>) {
        self.ranks.store(Some(table));
    }

    /// The KV cache of the current (or last) connection, all ranks together.
    pub fn kv_cache(&self) -> Option<KvCacheShape> {
        self.kv_cache.lock().ok().and_then(|k| *k)
    }

    pub(crate) fn set_kv_cache(&self, shape: KvCacheShape) {
        if let Ok(mut k) = self.kv_cache.lock() {
            *k = Some(shape);
        }
    }

    /// What the replica policy compares: requests the gateway has in flight here plus those the
    /// engines report waiting.
    pub fn load(&self) -> u64 {
        let in_flight = self.in_flight.load(Ordering::Relaxed).max(0) as u64;
        let waiting: u64 = self.ranks.load().as_ref().map_or(0, |t| t.snapshots().map(|r| u64::from(r.waiting)).sum());
        in_flight + waiting
    }

    pub fn meta(&self) -> WorkerMeta {
        self.meta.read().map(|m| m.clone()).unwrap_or_default()
    }

    pub(crate) fn set_meta(&self, meta: WorkerMeta) {
        if let Ok(mut m) = self.meta.write() {
            *m = meta;
        }
    }

    /// A label's string value.
    pub fn label(&self, name: &str) -> Option<String> {
        self.meta.read().ok()?.labels.get(name).and_then(Value::as_str).map(str::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shardgate_util::wake_count::WakeCount;
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    fn worker() -> Worker {
        let config = WorkerConfig {
            url: "ipc:///tmp/w".into(),
            path: "/tmp/w".into(),
            tcp: None,
            backend: Backend::Vllm,
            engine_count: 1,
            handshake_address: None,
            engine: None,
            upstream: None,
            grpc_addr: None,
        };
        Worker::new(1, config, WorkerMeta { labels: Map::new(), priority: 0 })
    }

    /// The supervisor sleeps between events: each event that may end its wait wakes it, and
    /// the wait ends only when its condition holds.
    #[test]
    fn the_supervisor_is_woken_by_loss_removal_and_the_last_request_of_a_drain() {
        let count = Arc::new(WakeCount::default());
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let w = worker();
        w.in_flight.store(2, Ordering::SeqCst);
        let mut drained = std::pin::pin!(w.supervisor_event(Worker::is_lost_or_drained));
        assert!(drained.as_mut().poll(&mut cx).is_pending());
        w.request_finished();
        assert_eq!(count.get(), 0, "a request finishing outside a drain wakes nobody");
        w.request_removal();
        assert_eq!(count.get(), 1, "a removal request wakes the supervisor");
        assert!(drained.as_mut().poll(&mut cx).is_pending(), "one request is still in flight");
        w.request_finished();
        assert_eq!(count.get(), 2, "the drain's last request wakes it");
        assert_eq!(drained.as_mut().poll(&mut cx), Poll::Ready(()));

        let w = worker();
        let mut lost = std::pin::pin!(w.supervisor_event(Worker::is_lost_or_drained));
        assert!(lost.as_mut().poll(&mut cx).is_pending());
        w.report_lost(w.epoch(), LinkLoss::EngineDead);
        assert_eq!(count.get(), 3, "a loss report wakes it");
        assert_eq!(lost.as_mut().poll(&mut cx), Poll::Ready(()));
        assert_eq!(
            w.take_lost().map(|l| l.to_string()).as_deref(),
            Some("the engine reported a fatal error (ENGINE_CORE_DEAD)")
        );
    }
}
