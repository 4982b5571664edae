//! Workers: the engines (or engine groups) the gateway serves, and their lifecycle.
//!
//! `registry` holds the worker list, swapped whole on change and read lock-free by every
//! shard. A worker's mutable state is a handful of atomics (status, connection epoch, in-flight
//! count, loss and removal flags), so any shard reads it without locks; labels and priority
//! (control plane only) sit behind a lock nobody on the request path takes. Connection work
//! (binding, handshake, re-binding after a loss, draining) runs on the control shard in
//! `supervisor`; `jobs` validates and registers workers; `api` serves `/workers`.

pub mod api;
pub mod jobs;
pub mod registry;
pub mod supervisor;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use arc_swap::ArcSwapOption;

use serde_json::{Map, Value};

use crate::config::{Backend, WorkerConfig};
use crate::routing::RankTable;

/// Lifecycle states (seed 000 "Worker Lifecycle").
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
    lost_reason: Mutex<String>,
    /// Set by `DELETE /workers/{id}`: the supervisor drains, then removes the worker.
    removing: AtomicBool,
    /// Requests in flight on this worker, all shards together.
    pub in_flight: AtomicI64,
    /// The load of each engine rank of the current connection (absent before the first
    /// handshake); replaced whole on each connection, since a restarted group may differ.
    ranks: ArcSwapOption<RankTable>,
    /// The last DP wave the gateway started on a lockstep (MoE) group; see `EngineLink::submit`.
    pub dp_wave: AtomicU64,
}

impl Worker {
    pub fn new(key: u64, config: WorkerConfig, meta: WorkerMeta) -> Self {
        let handshake_address = crate::config::handshake_address(&config);
        Worker {
            id: format!("w{key:x}"),
            key,
            config,
            handshake_address,
            meta: RwLock::new(meta),
            status: AtomicU8::new(WorkerStatus::Pending as u8),
            epoch: AtomicU64::new(0),
            lost: AtomicBool::new(false),
            lost_reason: Mutex::new(String::new()),
            removing: AtomicBool::new(false),
            in_flight: AtomicI64::new(0),
            ranks: ArcSwapOption::empty(),
            dp_wave: AtomicU64::new(0),
        }
    }

    pub fn url(&self) -> &str {
        &self.config.url
    }

    pub fn backend(&self) -> Backend {
        self.config.backend
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
    pub fn report_lost(&self, epoch: u64, reason: &str) {
        if epoch != self.epoch() {
            return;
        }
        if !self.lost.swap(true, Ordering::AcqRel) {
            if let Ok(mut r) = self.lost_reason.lock() {
                *r = reason.to_string();
            }
        }
    }

    pub(crate) fn take_lost(&self) -> Option<String> {
        if self.lost.swap(false, Ordering::AcqRel) {
            Some(self.lost_reason.lock().map(|r| r.clone()).unwrap_or_default())
        } else {
            None
        }
    }

    pub(crate) fn request_removal(&self) {
        self.removing.store(true, Ordering::Release);
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
