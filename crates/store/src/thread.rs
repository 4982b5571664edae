//! The storage thread, the bounded queue in front of it, and `Reply`, the future of one answer.
//!
//! Shards never wait on storage: offering an operation is a `try_send` into a bounded queue,
//! which fails at once with `Busy` when the queue is full, and the answer comes back as a
//! future that any executor can poll (a flume receive future: it needs no runtime, so monoio
//! shards await it as they are). The storage thread is the only user of the backend, so the
//! backends need no locks and SQLite sees a single connection.
//!
//! A storage thread that dies (a panic, where panics unwind) leaves no reply waiting: as it
//! ends it marks itself dead and drops every job still queued, which resolves their replies to
//! `Unavailable`, and an operation queued after that is refused with `Unavailable` (`submit`
//! looks at the mark after queueing, so no job slips in unanswered between the two).
//!
//! Dropping the `Worker` closes the queue, lets the thread answer what is queued, and joins it,
//! so the backend (the database file) is closed when the drop returns.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread::JoinHandle;

use flume::r#async::RecvFut;
use flume::TrySendError;

use crate::error::StoreError;
use crate::storage::Storage;

/// One operation, with the sender of its answer inside.
type Job = Box<dyn FnOnce(&mut dyn Storage) + Send>;

/// The future of one operation's answer. It resolves to `Unavailable` if the storage thread
/// ended without answering, so awaiting it never hangs on a dead thread.
pub struct Reply<T: 'static> {
    answer: RecvFut<'static, Result<T, StoreError>>,
}

impl<T: 'static> Future for Reply<T> {
    type Output = Result<T, StoreError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.answer).poll(cx).map(|answer| answer.unwrap_or(Err(StoreError::Unavailable)))
    }
}

impl<T: 'static> fmt::Debug for Reply<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Reply")
    }
}

/// The storage thread and its queue.
pub(crate) struct Worker {
    /// `None` only while dropping: taking it closes the queue.
    queue: Option<flume::Sender<Job>>,
    /// Set by the storage thread as it ends, before it drops what is still queued.
    dead: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Starts the thread `shardgate-store`, owning `storage`, behind a queue of
    /// `queue_capacity` operations (0 counts as 1).
    pub(crate) fn start(storage: Box<dyn Storage>, queue_capacity: usize) -> Result<Worker, StoreError> {
        let (queue, jobs) = flume::bounded::<Job>(queue_capacity.max(1));
        let dead = Arc::new(AtomicBool::new(false));
        let closing = Closing { jobs, dead: Arc::clone(&dead) };
        let thread = std::thread::Builder::new()
            .name("shardgate-store".into())
            .spawn(move || run(storage, closing))
            .map_err(|e| StoreError::Io(format!("cannot start the storage thread: {e}")))?;
        Ok(Worker { queue: Some(queue), dead, thread: Some(thread) })
    }

    /// Queues `op` for the storage thread, or refuses it at once: `Busy` when the queue is full,
    /// `Unavailable` when the thread is gone.
    pub(crate) fn submit<T, F>(&self, op: F) -> Result<Reply<T>, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut dyn Storage) -> Result<T, StoreError> + Send + 'static,
    {
        let Some(queue) = &self.queue else { return Err(StoreError::Unavailable) };
        let (answer, reply) = flume::bounded(1);
        let job: Job = Box::new(move |storage| {
            // The caller may have dropped its `Reply`: the operation is done all the same.
            let _ = answer.send(op(storage));
        });
        match queue.try_send(job) {
            // The thread may have ended without seeing it: it will never run, and its reply
            // might never resolve, so the caller gets no reply.
            Ok(()) if self.dead.load(Ordering::SeqCst) => Err(StoreError::Unavailable),
            Ok(()) => Ok(Reply { answer: reply.into_recv_async() }),
            Err(TrySendError::Full(_)) => Err(StoreError::Busy),
            Err(TrySendError::Disconnected(_)) => Err(StoreError::Unavailable),
        }
    }

    #[cfg(test)]
    fn thread_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.queue = None;
        let Some(thread) = self.thread.take() else { return };
        // A job never holds a handle to its own store, so this is never the storage thread;
        // checked anyway, as joining oneself would hang.
        if thread.thread().id() != std::thread::current().id() {
            // A thread that died has already answered `Unavailable` to everything it held.
            let _ = thread.join();
        }
    }
}

fn run(mut storage: Box<dyn Storage>, closing: Closing) {
    // `recv` hands out what is queued even after the queue is closed, and fails only once it
    // is closed and empty: a store that is dropped answers everything it accepted.
    while let Ok(job) = closing.jobs.recv() {
        job(storage.as_mut());
    }
}

/// The storage thread's end of the queue. Its drop runs however the thread ends, returning or
/// unwinding.
struct Closing {
    jobs: flume::Receiver<Job>,
    dead: Arc<AtomicBool>,
}

impl Drop for Closing {
    fn drop(&mut self) {
        // Marked before draining: a job queued after the drain finds the mark (`submit`).
        self.dead.store(true, Ordering::SeqCst);
        // A dropped job drops its answer's sender: its reply resolves to `Unavailable`.
        self.jobs.drain().for_each(drop);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::memory::Memory;

    /// Polls `reply` to its end on this thread (the thread is parked between wake-ups), and
    /// fails the test, instead of hanging it, if the reply never resolves.
    fn block_on<T>(mut reply: Reply<T>) -> Result<T, StoreError> {
        struct Unpark(std::thread::Thread);
        impl std::task::Wake for Unpark {
            fn wake(self: std::sync::Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Poll::Ready(answer) = Pin::new(&mut reply).poll(&mut cx) {
                return answer;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "the reply did not resolve");
            std::thread::park_timeout(left);
        }
    }

    /// Holds the storage thread inside a job until the returned sender sends (or is dropped);
    /// returns once the thread is inside it, so the queue is empty and the thread busy.
    fn hold(worker: &Worker) -> (mpsc::Sender<()>, Reply<()>) {
        let (entered, inside) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let reply = worker
            .submit(move |_| {
                let _ = entered.send(());
                let _ = released.recv();
                Ok(())
            })
            .expect("queued");
        inside.recv().expect("the thread runs the job");
        (release, reply)
    }

    #[test]
    fn a_full_queue_is_busy_at_once_and_queued_work_is_still_answered() {
        let worker = Worker::start(Box::new(Memory::default()), 2).expect("start");
        let (release, held) = hold(&worker);
        let queued: Vec<Reply<u32>> = (0..2).map(|n| worker.submit(move |_| Ok(n)).expect("room")).collect();
        let started = Instant::now();
        assert_eq!(worker.submit(|_| Ok(9)).map(drop), Err(StoreError::Busy));
        assert!(started.elapsed() < Duration::from_secs(1), "Busy must not wait for room");
        release.send(()).expect("release");
        assert_eq!(block_on(held), Ok(()));
        let answers: Vec<_> = queued.into_iter().map(block_on).collect();
        assert_eq!(answers, vec![Ok(0), Ok(1)]);
        assert_eq!(block_on(worker.submit(|_| Ok(3)).expect("room again")), Ok(3));
    }

    #[test]
    fn capacity_zero_still_queues_one() {
        let worker = Worker::start(Box::new(Memory::default()), 0).expect("start");
        let (release, held) = hold(&worker);
        let queued = worker.submit(|_| Ok(1)).expect("one place");
        assert_eq!(worker.submit(|_| Ok(2)).map(drop), Err(StoreError::Busy));
        drop(release);
        assert_eq!(block_on(held), Ok(()));
        assert_eq!(block_on(queued), Ok(1));
    }

    #[test]
    fn a_dead_thread_answers_unavailable_and_refuses_more() {
        let worker = Worker::start(Box::new(Memory::default()), 4).expect("start");
        let (release, held) = hold(&worker);
        let dies = worker.submit(|_| -> Result<(), StoreError> { panic!("storage thread dies (planted)") });
        let after = worker.submit(|_| Ok(2)).expect("queued behind it");
        drop(release);
        assert_eq!(block_on(held), Ok(()));
        assert_eq!(block_on(dies.expect("queued")), Err(StoreError::Unavailable));
        assert_eq!(block_on(after), Err(StoreError::Unavailable), "a job queued behind the panic answers too");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !worker.thread_finished() {
            assert!(Instant::now() < deadline, "the storage thread did not end");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(worker.submit(|_| Ok(3)).map(drop), Err(StoreError::Unavailable));
    }

    #[test]
    fn dropping_the_worker_answers_what_is_queued_then_joins() {
        let worker = Worker::start(Box::new(Memory::default()), 8).expect("start");
        let (release, held) = hold(&worker);
        let queued: Vec<Reply<u32>> = (0..5).map(|n| worker.submit(move |_| Ok(n)).expect("room")).collect();
        // The drop below blocks until the thread ends, so release it from another thread.
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            let _ = release.send(());
        });
        drop(worker);
        releaser.join().expect("releaser");
        assert_eq!(block_on(held), Ok(()));
        let answers: Vec<_> = queued.into_iter().map(block_on).collect();
        assert_eq!(answers, (0..5).map(Ok).collect::<Vec<_>>());
    }
}
