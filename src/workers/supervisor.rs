//! The control loop of one ZMQ worker, on the control shard (shard 0): bind and handshake, hand
//! each shard its socket pair, watch the engine, and after a loss tear down and start over on
//! the next health probe, so a restarted engine reconnects without restarting the gateway.

use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Worker, WorkerStatus};
use crate::engine::zmq::{handshake, sockdir};
use crate::limits;
use crate::shard::mailbox::ShardMsg;
use crate::shard::ShardCtx;

/// How often the supervisor looks for loss reports from shards.
const WATCH_TICK: Duration = Duration::from_millis(50);
/// How often a ready worker's engines are pinged (a send to a vanished engine fails at once).
const LIVENESS_PING_INTERVAL: Duration = Duration::from_secs(1);

pub async fn supervise(ctx: Rc<ShardCtx>, worker: Arc<Worker>) {
    let shared = ctx.shared.clone();
    let probe_interval = Duration::from_secs(shared.config.health_check_interval_s);
    loop {
        worker.set_status(WorkerStatus::Pending);
        let epoch = worker.next_epoch();
        let _ = worker.take_lost();
        let attempt = handshake::connect(
            &shared.zmq,
            &worker.config,
            &worker.handshake_address,
            shared.shards,
            Duration::from_secs(limits::handshake_timeout_s),
        )
        .await;
        match attempt {
            Ok(connected) => {
                let files = connected.files.clone();
                serve_connection(&ctx, &worker, epoch, connected).await;
                sockdir::remove_sockets(&files);
            }
            Err(e) => {
                worker.set_status(WorkerStatus::Dead);
                tracing::warn!(
                    "ZMQ backend handshake failed for {}: {e}; will retry on the next health probe",
                    worker.url()
                );
            }
        }
        monoio::time::sleep(probe_interval).await;
    }
}

/// Hands out the sockets, marks the worker ready, and returns once the engine is lost.
async fn serve_connection(ctx: &Rc<ShardCtx>, worker: &Arc<Worker>, epoch: u64, connected: handshake::Connected) {
    let shared = &ctx.shared;
    let engines: Arc<[_]> = connected.engines.into();
    let max_model_len = engines.iter().map(|e| e.max_model_len).min().unwrap_or(0);
    let version = engines.first().map(|e| e.vllm_version.clone()).unwrap_or_default();
    let done = Arc::new(AtomicUsize::new(shared.shards));
    for (k, (input, output)) in connected.pairs.into_iter().enumerate() {
        shared.mailboxes[k].post(ShardMsg::Attach {
            worker: worker.index,
            epoch,
            input,
            output,
            engines: engines.clone(),
            done: done.clone(),
        });
    }
    wait_for_shards(&done).await;
    if let Some(reason) = worker.take_lost() {
        tracing::warn!("ZMQ worker {} lost while attaching: {reason}", worker.url());
    } else {
        worker.set_status(WorkerStatus::Ready);
        tracing::info!(
            "ZMQ worker {} ready (engines={}, max_model_len={max_model_len}, vllm {version})",
            worker.url(),
            engines.len()
        );
        let reason = watch(ctx, worker).await;
        tracing::error!("ZMQ worker {} lost: {reason}", worker.url());
    }
    worker.set_status(WorkerStatus::Dead);
    let done = Arc::new(AtomicUsize::new(shared.shards));
    for mailbox in &shared.mailboxes {
        mailbox.post(ShardMsg::Detach {
            worker: worker.index,
            epoch,
            reason: "worker connection reset".into(),
            done: done.clone(),
        });
    }
    wait_for_shards(&done).await;
}

/// Waits until every shard has processed a hand-over message.
async fn wait_for_shards(done: &AtomicUsize) {
    while done.load(Ordering::Acquire) > 0 {
        monoio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Watches a ready worker until some shard reports it lost or a ping fails.
async fn watch(ctx: &Rc<ShardCtx>, worker: &Arc<Worker>) -> String {
    let mut last_ping = Instant::now();
    loop {
        monoio::time::sleep(WATCH_TICK).await;
        if let Some(reason) = worker.take_lost() {
            return reason;
        }
        if last_ping.elapsed() >= LIVENESS_PING_INTERVAL {
            last_ping = Instant::now();
            match ctx.link(worker.index) {
                Some(link) => {
                    if let Err(e) = link.ping() {
                        link.fail(&e);
                        return e;
                    }
                }
                None => return "the control shard's connection closed".into(),
            }
        }
    }
}
