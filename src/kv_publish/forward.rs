//! Shard 0's side of the hand-over: one in-process PUSH socket per engine link. A send never
//! waits: when the publisher thread has fallen `kv_publish_handover_batches_max` behind, the
//! batch is dropped and its rank marked, so the host stream says `AllBlocksCleared` for that
//! rank before its next batch instead of silently missing one.

use std::cell::RefCell;

use super::{HANDOVER_ADDRESS, KIND_BATCH, KIND_LOST};
use crate::limits;

pub struct KvForward {
    socket: zmq::Socket,
    /// The worker's URL: with the engine rank, what names a host rank across reconnects.
    worker: String,
    /// Per engine rank: a batch was dropped since the rank's last clear reached the publisher.
    dropped: RefCell<Vec<bool>>,
    message: RefCell<Vec<u8>>,
}

impl KvForward {
    pub fn open(ctx: &zmq::Context, worker: &str, ranks: usize) -> Result<KvForward, zmq::Error> {
        let socket = ctx.socket(zmq::PUSH)?;
        socket.set_linger(0)?;
        socket.set_sndhwm(limits::kv_publish_handover_batches_max)?;
        socket.connect(HANDOVER_ADDRESS)?;
        Ok(KvForward {
            socket,
            worker: worker.to_string(),
            dropped: RefCell::new(vec![false; ranks]),
            message: RefCell::new(Vec::new()),
        })
    }

    /// The rank's next batch, in its engine's sequence order.
    pub fn batch(&self, rank: usize, payload: &[u8]) {
        if self.dropped.borrow()[rank] && !self.send(KIND_LOST, rank, &[]) {
            return;
        }
        let sent = self.send(KIND_BATCH, rank, payload);
        self.dropped.borrow_mut()[rank] = !sent;
    }

    /// Batches of the rank were lost, or its link (re)started: what the host stream said about
    /// the rank no longer holds.
    pub fn lost(&self, rank: usize) {
        let sent = self.send(KIND_LOST, rank, &[]);
        self.dropped.borrow_mut()[rank] = !sent;
    }

    /// One frame (`encode`), so a full queue refuses it whole.
    fn send(&self, kind: u8, rank: usize, payload: &[u8]) -> bool {
        let mut m = self.message.borrow_mut();
        encode(kind, rank as u32, &self.worker, payload, &mut m);
        match self.socket.send(&m[..], zmq::DONTWAIT) {
            Ok(()) => true,
            Err(e) => {
                if !self.dropped.borrow()[rank] {
                    tracing::warn!(
                        "worker {} rank {rank}: KV event batch not re-published ({e}); the host stream clears the rank",
                        self.worker
                    );
                }
                false
            }
        }
    }
}

/// A hand-over message: kind, engine rank (4 bytes, big-endian), worker URL length (4 bytes),
/// worker URL, payload.
pub(super) fn encode(kind: u8, rank: u32, worker: &str, payload: &[u8], m: &mut Vec<u8>) {
    m.clear();
    m.push(kind);
    m.extend_from_slice(&rank.to_be_bytes());
    m.extend_from_slice(&(worker.len() as u32).to_be_bytes());
    m.extend_from_slice(worker.as_bytes());
    m.extend_from_slice(payload);
}

/// A hand-over message read back: (kind, engine rank, worker URL, payload).
pub(super) fn parse(m: &[u8]) -> Option<(u8, u32, &str, &[u8])> {
    let kind = *m.first()?;
    let rank = u32::from_be_bytes(m.get(1..5)?.try_into().ok()?);
    let len = u32::from_be_bytes(m.get(5..9)?.try_into().ok()?) as usize;
    let worker = std::str::from_utf8(m.get(9..9usize.checked_add(len)?)?).ok()?;
    Some((kind, rank, worker, &m[9 + len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_the_batch_and_the_rank_is_cleared_before_its_next() {
        let ctx = zmq::Context::new();
        let handover = ctx.socket(zmq::PULL).unwrap();
        handover.set_rcvhwm(1).unwrap();
        handover.bind(HANDOVER_ADDRESS).unwrap();
        let forward = KvForward::open(&ctx, "ipc:///run/e0", 2).unwrap();
        // Nobody reads: the queue fills, and the first batch it refuses marks rank 1.
        let mut queued = 0;
        while queued <= 4 * limits::kv_publish_handover_batches_max && !forward.dropped.borrow()[1] {
            forward.batch(1, b"old");
            queued += 1;
        }
        assert!(forward.dropped.borrow()[1], "the queue never filled");
        assert!(!forward.dropped.borrow()[0]);
        let mut read = 0;
        while let Ok(m) = handover.recv_bytes(zmq::DONTWAIT) {
            assert_eq!(parse(&m), Some((KIND_BATCH, 1, "ipc:///run/e0", &b"old"[..])));
            read += 1;
        }
        assert_eq!(read, queued - 1);
        // Room again: the rank's clear goes first, then its batch; the mark is gone.
        forward.batch(1, b"new");
        let after: Vec<_> = std::iter::from_fn(|| handover.recv_bytes(zmq::DONTWAIT).ok()).collect();
        let after: Vec<_> = after.iter().map(|m| parse(m).unwrap()).collect();
        let want = [(KIND_LOST, 1, "ipc:///run/e0", &b""[..]), (KIND_BATCH, 1, "ipc:///run/e0", &b"new"[..])];
        assert_eq!(after, want);
        assert!(!forward.dropped.borrow()[1]);
        // A message too short for its fields is not read.
        for bad in [&[][..], &[KIND_BATCH, 0, 0, 0][..], &[KIND_BATCH, 0, 0, 0, 1, 0, 0, 0, 9, b'w'][..]] {
            assert_eq!(parse(bad), None);
        }
    }
}
