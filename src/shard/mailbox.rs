//! Cross-shard messages: a lock-free queue per shard plus a waker, so any thread can hand a
//! shard work and wake its runtime. Control-plane traffic only (socket hand-over, detach);
//! the token path never crosses a shard.

use std::future::poll_fn;
use std::task::Poll;

use crossbeam::queue::SegQueue;

/// What one shard can ask of another.
pub enum ShardMsg {
    /// Take over this shard's connection to `worker` (by key; connected and ready).
    Attach {
        worker: u64,
        epoch: u64,
        attachment: crate::engine::link::Attachment,
        ranks: std::sync::Arc<crate::routing::RankTable>,
        done: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    },
    /// Drop the connection to `worker` for `epoch`, failing its in-flight requests.
    Detach {
        worker: u64,
        epoch: u64,
        reason: crate::engine::loss::LinkLoss,
        done: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    },
    /// `worker` (by key) left the registry: forget what routing remembers of it.
    Forget(u64),
    /// An admission slot for this shard's queued request `id`.
    Grant(u64),
    /// Shutdown, first step: close the listener; running requests continue.
    StopAccepting,
    /// Shutdown, last step: abort every request still on an engine.
    AbortAll,
    /// Control shard: validate and register a worker (`POST /workers`), answering the
    /// registered worker's id and URL, or why it was refused.
    AddWorker(
        Box<crate::workers::add_worker::AddWorker>,
        super::reply::ReplyTx<Result<(String, String), crate::workers::refusal::WorkerRefusal>>,
    ),
    /// Control shard: drain and remove a worker (`DELETE /workers/{id}`).
    RemoveWorker(String),
}

pub struct Mailbox {
    queue: SegQueue<ShardMsg>,
    waker: atomic_waker::AtomicWaker,
}

impl Default for Mailbox {
    fn default() -> Self {
        Mailbox { queue: SegQueue::new(), waker: atomic_waker::AtomicWaker::new() }
    }
}

impl Mailbox {
    pub fn post(&self, msg: ShardMsg) {
        self.queue.push(msg);
        self.waker.wake();
    }

    /// Waits for the next message (only the owning shard calls this).
    pub async fn next(&self) -> ShardMsg {
        poll_fn(|cx| {
            if let Some(m) = self.queue.pop() {
                return Poll::Ready(m);
            }
            self.waker.register(cx.waker());
            match self.queue.pop() {
                Some(m) => Poll::Ready(m),
                None => Poll::Pending,
            }
        })
        .await
    }
}
