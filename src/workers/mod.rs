//! Workers: the engines (or engine groups) the gateway serves, and their lifecycle.
//!
//! The registry is fixed at startup here and shared read-only by every shard. A worker's
//! mutable state is a handful of atomics (status, connection epoch, loss reason flag) so any
//! shard can read it without locks. Connection work (binding, handshake, re-binding after an
//! engine is lost) happens on the control shard in `supervisor`.

pub mod supervisor;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use crate::config::{Backend, WorkerConfig};

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
}

impl WorkerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerStatus::Pending => "pending",
            WorkerStatus::Ready => "ready",
            WorkerStatus::Dead => "dead",
        }
    }
}

pub struct Worker {
    /// Position in the registry; shards index their links by it.
    pub index: usize,
    pub config: WorkerConfig,
    pub handshake_address: String,
    status: AtomicU8,
    /// Incremented per connection attempt; messages about an older epoch are stale.
    epoch: AtomicU64,
    /// Set by any shard that saw the engine die; the supervisor reacts.
    lost: AtomicBool,
    lost_reason: Mutex<String>,
    /// Requests in flight on this worker, all shards together (a gauge, for health and tests).
    pub in_flight: AtomicI64,
}

impl Worker {
    pub fn new(index: usize, config: WorkerConfig) -> Self {
        let handshake_address = crate::config::handshake_address(&config);
        Worker {
            index,
            config,
            handshake_address,
            status: AtomicU8::new(WorkerStatus::Pending as u8),
            epoch: AtomicU64::new(0),
            lost: AtomicBool::new(false),
            lost_reason: Mutex::new(String::new()),
            in_flight: AtomicI64::new(0),
        }
    }

    pub fn url(&self) -> &str {
        &self.config.url
    }

    pub fn backend(&self) -> Backend {
        self.config.backend
    }

    pub fn status(&self) -> WorkerStatus {
        match self.status.load(Ordering::Acquire) {
            1 => WorkerStatus::Ready,
            2 => WorkerStatus::Dead,
            _ => WorkerStatus::Pending,
        }
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
}
