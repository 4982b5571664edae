//! The cross-shard relay for a worker whose engine serves one client socket pair (TokenSpeed):
//! one owner shard holds the pair; the other shards hand it their messages through bounded
//! lock-free queues and get their requests' outputs back the same way, each side woken on its
//! own runtime.
//!
//! Invariants: an ADD that does not fit `requests` is refused at once (backpressure to the HTTP
//! client as a 503, never an unbounded buffer); ABORTs and pings go through `control`, which is
//! never refused, since each belongs to a request already counted (so it is bounded by the
//! requests in flight); an output is never dropped: each shard's inbox holds what the engine
//! produced for that shard's requests until the shard takes it.

use std::future::poll_fn;
use std::task::Poll;

use atomic_waker::AtomicWaker;
use crossbeam::queue::{ArrayQueue, SegQueue};

use crate::engine::TokenEvent;

/// A message for the engine, built by any shard and sent by the owner.
pub struct Outgoing {
    /// Position of the target engine in the group.
    pub rank: usize,
    pub kind: u8,
    pub payload: Vec<u8>,
}

/// One shard's outputs, routed to it by the owner.
#[derive(Default)]
struct Inbox {
    queue: SegQueue<(String, TokenEvent)>,
    waker: AtomicWaker,
}

pub struct Hub {
    pub owner: usize,
    requests: ArrayQueue<Outgoing>,
    control: SegQueue<Outgoing>,
    owner_waker: AtomicWaker,
    inboxes: Vec<Inbox>,
}

/// `Hub::push_request` found the queue full.
#[derive(Debug)]
pub struct QueueFull;

impl Hub {
    pub fn new(owner: usize, shards: usize, request_queue_depth: usize) -> Self {
        assert!(owner < shards && request_queue_depth > 0);
        Hub {
            owner,
            requests: ArrayQueue::new(request_queue_depth),
            control: SegQueue::new(),
            owner_waker: AtomicWaker::new(),
            inboxes: (0..shards).map(|_| Inbox::default()).collect(),
        }
    }

    pub fn push_request(&self, msg: Outgoing) -> Result<(), QueueFull> {
        self.requests.push(msg).map_err(|_| QueueFull)?;
        self.owner_waker.wake();
        Ok(())
    }

    pub fn push_control(&self, msg: Outgoing) {
        self.control.push(msg);
        self.owner_waker.wake();
    }

    /// Owner: the next message to send (control first: an ABORT frees engine capacity).
    pub fn pop_outgoing(&self) -> Option<Outgoing> {
        self.control.pop().or_else(|| self.requests.pop())
    }

    /// Owner: waits until a message may be queued.
    pub async fn outgoing_ready(&self) {
        poll_fn(|cx| {
            if !self.control.is_empty() || !self.requests.is_empty() {
                return Poll::Ready(());
            }
            self.owner_waker.register(cx.waker());
            if !self.control.is_empty() || !self.requests.is_empty() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// Owner: an output for a request of `shard`.
    pub fn route(&self, shard: usize, request_id: String, ev: TokenEvent) -> bool {
        let Some(inbox) = self.inboxes.get(shard) else { return false };
        inbox.queue.push((request_id, ev));
        inbox.waker.wake();
        true
    }

    /// A shard's next routed output, if any.
    pub fn take_output(&self, shard: usize) -> Option<(String, TokenEvent)> {
        self.inboxes.get(shard)?.queue.pop()
    }

    /// A shard: waits until an output for it is queued.
    pub async fn output_ready(&self, shard: usize) {
        let Some(inbox) = self.inboxes.get(shard) else { return std::future::pending().await };
        poll_fn(|cx| {
            if !inbox.queue.is_empty() {
                return Poll::Ready(());
            }
            inbox.waker.register(cx.waker());
            if !inbox.queue.is_empty() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

/// The shard that created an engine request id (`util::ids::engine_request_id` puts it there),
/// so the owner can route an output without any shared map.
pub fn shard_of(request_id: &str) -> Option<usize> {
    let mut parts = request_id.rsplitn(3, '-');
    parts.next()?;
    let shard_seq = parts.next()?;
    shard_seq.split_once('.')?.0.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_of_reads_the_id_the_gateway_makes() {
        let id = shardgate_util::ids::engine_request_id("chatcmpl-abc", 3, 7);
        assert_eq!(shard_of(&id), Some(7));
        for bad in ["", "x", "a-b", "a-b-c", "a-7x.1-ff", "cmpl-1-.2-ff"] {
            assert_eq!(shard_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_full_request_queue_refuses_and_control_never_does() {
        let hub = Hub::new(0, 2, 2);
        let msg = |k| Outgoing { rank: 0, kind: k, payload: Vec::new() };
        assert!(hub.push_request(msg(0)).is_ok());
        assert!(hub.push_request(msg(0)).is_ok());
        assert!(hub.push_request(msg(0)).is_err());
        for _ in 0..100 {
            hub.push_control(msg(1));
        }
        // Control goes first.
        assert_eq!(hub.pop_outgoing().map(|m| m.kind), Some(1));
        let mut n = 1;
        while hub.pop_outgoing().is_some() {
            n += 1;
        }
        assert_eq!(n, 102);
    }
}
