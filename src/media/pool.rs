//! The media side pool: a few threads that fetch, decode and process images, behind a bounded
//! queue, so an image (tens to hundreds of milliseconds of one core) never stalls the other
//! requests of a shard. A shard offers a job with `try_send` (a full queue is refused at once,
//! never waited on) and awaits its answer on a one-shot channel its runtime can poll.

use crossbeam::channel::{self, Sender, TrySendError};

use crate::shard::reply::{self, ReplyRx};

type Job = Box<dyn FnOnce() + Send>;

pub struct MediaPool {
    queue: Sender<Job>,
}

/// The queue is full: every thread busy and `queue` jobs waiting.
#[derive(Debug)]
pub struct Busy;

impl MediaPool {
    /// Starts `threads` threads (`shardgate-media-N`) behind a queue of `queue` jobs. They
    /// end when the pool is dropped.
    pub fn start(threads: usize, queue: usize) -> std::io::Result<MediaPool> {
        let (tx, rx) = channel::bounded::<Job>(queue.max(1));
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            std::thread::Builder::new().name(format!("shardgate-media-{i}")).spawn(move || {
                for job in rx {
                    job();
                }
            })?;
        }
        Ok(MediaPool { queue: tx })
    }

    /// Runs `work` on a pool thread; its answer, or `None` if the thread could not give one.
    pub fn submit<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> Result<ReplyRx<T>, Busy> {
        let (tx, rx) = reply::channel();
        let job: Job = Box::new(move || tx.send(work()));
        match self.queue.try_send(job) {
            Ok(()) => Ok(rx),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => Err(Busy),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_off_the_caller_and_a_full_queue_is_refused_at_once() {
        let pool = MediaPool::start(1, 1).unwrap();
        let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
        let blocker = pool.submit(move || hold_rx.recv().ok()).unwrap();
        // The thread holds the first job; the next fills the queue (it may take a moment to be
        // picked up), and one more finds it full.
        let mut queued = Vec::new();
        while let Ok(rx) = pool.submit(|| std::thread::current().name().map(str::to_string)) {
            queued.push(rx);
            assert!(queued.len() <= 2, "a bounded queue of 1 took {} jobs", queued.len());
        }
        hold_tx.send(()).unwrap();
        let ran_on = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().build().unwrap().block_on(async move {
            assert_eq!(blocker.recv().await, Some(Some(())));
            let mut names = Vec::new();
            for rx in queued {
                names.push(rx.recv().await.flatten());
            }
            names
        });
        assert!(ran_on.iter().all(|n| n.as_deref() == Some("shardgate-media-0")), "{ran_on:?}");
    }
}
