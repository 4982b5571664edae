//! A one-shot answer from another thread: the asking shard awaits what the answering shard sends
//! (`POST /workers` waits for the control shard's verdict), or what a media pool thread made of
//! an image (`media::pool`).

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

struct Slot<T> {
    value: Mutex<Option<T>>,
    /// Set when the sender is gone, with or without an answer.
    closed: AtomicBool,
    waker: atomic_waker::AtomicWaker,
}

/// The answering side; dropping it unanswered ends the wait with `None`.
pub struct ReplyTx<T>(Arc<Slot<T>>);

/// The asking side.
pub struct ReplyRx<T>(Arc<Slot<T>>);

pub fn channel<T>() -> (ReplyTx<T>, ReplyRx<T>) {
    let slot = Arc::new(Slot { value: Mutex::new(None), closed: AtomicBool::new(false), waker: Default::default() });
    (ReplyTx(slot.clone()), ReplyRx(slot))
}

impl<T> ReplyTx<T> {
    pub fn send(self, value: T) {
        if let Ok(mut v) = self.0.value.lock() {
            *v = Some(value);
        }
    }
}

impl<T> Drop for ReplyTx<T> {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Release);
        self.0.waker.wake();
    }
}

impl<T> ReplyRx<T> {
    /// The answer, or `None` when the sender went away without one.
    pub async fn recv(self) -> Option<T> {
        poll_fn(|cx| {
            self.0.waker.register(cx.waker());
            if self.0.closed.load(Ordering::Acquire) {
                Poll::Ready(self.0.value.lock().ok().and_then(|mut v| v.take()))
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shardgate_util::wake_count::WakeCount;
    use std::future::Future;
    use std::task::{Context, Waker};

    #[test]
    fn the_answer_arrives_and_a_dropped_sender_ends_the_wait() {
        let count = Arc::new(WakeCount::default());
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);

        let (tx, rx) = channel::<u32>();
        let mut wait = std::pin::pin!(rx.recv());
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        tx.send(7);
        assert_eq!(count.get(), 1, "the answer wakes the asker");
        assert_eq!(wait.as_mut().poll(&mut cx), Poll::Ready(Some(7)));

        let (tx, rx) = channel::<u32>();
        let mut wait = std::pin::pin!(rx.recv());
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        drop(tx);
        assert_eq!(wait.as_mut().poll(&mut cx), Poll::Ready(None));
    }
}
