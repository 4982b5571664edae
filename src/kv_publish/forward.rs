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

    /// One frame: kind, engine rank (4 bytes, big-endian), worker URL length (4 bytes), worker
    /// URL, payload. One frame, so a full queue refuses it whole.
    fn send(&self, kind: u8, rank: usize, payload: &[u8]) -> bool {
        let mut m = self.message.borrow_mut();
        m.clear();
        m.push(kind);
        m.extend_from_slice(&(rank as u32).to_be_bytes());
        m.extend_from_slice(&(self.worker.len() as u32).to_be_bytes());
        m.extend_from_slice(self.worker.as_bytes());
        m.extend_from_slice(payload);
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

/// A hand-over message read back: (kind, engine rank, worker URL, payload).
pub(super) fn parse(m: &[u8]) -> Option<(u8, u32, &str, &[u8])> {
    let kind = *m.first()?;
    let rank = u32::from_be_bytes(m.get(1..5)?.try_into().ok()?);
    let len = u32::from_be_bytes(m.get(5..9)?.try_into().ok()?) as usize;
    let worker = std::str::from_utf8(m.get(9..9usize.checked_add(len)?)?).ok()?;
    Some((kind, rank, worker, &m[9 + len..]))
}
