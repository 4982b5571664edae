//! The worker list, published whole: readers (every shard, per request) load an `Arc` snapshot
//! without locks; the only writer is the control shard, so load-modify-store needs no CAS.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::Worker;

pub struct Registry {
    workers: ArcSwap<Vec<Arc<Worker>>>,
    next_key: AtomicU64,
}

impl Default for Registry {
    fn default() -> Self {
        Registry { workers: ArcSwap::from_pointee(Vec::new()), next_key: AtomicU64::new(1) }
    }
}

impl Registry {
    pub fn snapshot(&self) -> Arc<Vec<Arc<Worker>>> {
        self.workers.load_full()
    }

    /// A fresh worker key (never reused, so a stale message can never hit a newer worker).
    pub fn next_key(&self) -> u64 {
        self.next_key.fetch_add(1, Ordering::Relaxed)
    }

    pub fn find(&self, id: &str) -> Option<Arc<Worker>> {
        self.workers.load().iter().find(|w| w.id == id).cloned()
    }

    /// Control shard only.
    pub(crate) fn insert(&self, worker: Arc<Worker>) {
        let mut next: Vec<Arc<Worker>> = self.workers.load().as_ref().clone();
        next.push(worker);
        self.workers.store(Arc::new(next));
    }

    /// Control shard only.
    pub(crate) fn remove(&self, key: u64) {
        let next: Vec<Arc<Worker>> = self.workers.load().iter().filter(|w| w.key != key).cloned().collect();
        self.workers.store(Arc::new(next));
    }
}
