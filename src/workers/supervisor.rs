//! The control loop of one ZMQ worker, on the control shard (shard 0): bind and handshake, hand
//! each shard its socket pair, watch the engine, and after a loss tear down and start over on
//! the next health probe, so a restarted engine reconnects without restarting the gateway. A
//! worker whose engine process `serve` supervises binds afresh as soon as that process exits
//! (a handshake in progress is dropped), so the restarted engine finds fresh sockets.
//! A removal request (`DELETE /workers/{id}`) cancels a handshake in progress at once, or
//! drains a connected worker (no new requests; in-flight ones finish) before releasing it.

use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Worker, WorkerStatus};
use crate::engine::link::Attachment;
use crate::engine::loss::LinkLoss;
use crate::engine::zmq::bringup::{self, HandshakeError};
use crate::engine::zmq::hub::Hub;
use crate::engine::zmq::transport::{LinkSockets, ZmqAttachment};
use crate::limits;
use crate::routing::RankTable;
use crate::shard::mailbox::ShardMsg;
use crate::shard::{ShardCtx, Shared};
use shardgate_wire::{sockdir, zmtp};

/// How a connected period ended.
pub(super) enum Ended {
    /// The engine was lost after the handshake.
    Lost(LinkLoss),
    /// The handshake did not complete.
    Failed(HandshakeError),
    Removed,
    /// The supervised engine process exited during the handshake.
    EngineExited,
}

/// How a handshake attempt ended.
enum Attempt {
    Done(Result<bringup::Connected, HandshakeError>),
    Removed,
    EngineExited,
}

pub async fn supervise(ctx: Rc<ShardCtx>, worker: Arc<Worker>) {
    let shared = ctx.shared.clone();
    let probe_interval = Duration::from_secs(shared.config.health_check_interval_s);
    while let Some(epoch) = next_period(&shared, &worker).await {
        let exits_seen = worker.config.engine.as_ref().map(|e| e.0.exit_count());
        let attempt = match sharing_files(&ctx, &worker) {
            Some(other) => Attempt::Done(Err(HandshakeError::SharedFiles { other: other.url().to_string() })),
            None => monoio::select! {
                r = bringup::connect(
                    &shared.zmq,
                    &worker.config,
                    &worker.handshake_address,
                    shared.shards,
                    shared.config.worker_socket_root.as_deref(),
                    Duration::from_secs(limits::handshake_timeout_s),
                ) => Attempt::Done(r),
                _ = removal_requested(&worker) => Attempt::Removed,
                // What the engine sent so far is gone with it; its restart starts over.
                _ = engine_exited(&worker, exits_seen) => Attempt::EngineExited,
            },
        };
        let ended = match attempt {
            // Cancelled mid-handshake: the sockets were dropped with the future; their files
            // are removed below.
            Attempt::Removed => Ended::Removed,
            Attempt::EngineExited => {
                worker.set_status(WorkerStatus::Dead);
                tracing::warn!(
                    "ZMQ worker {}: its engine exited during the handshake; binding afresh for its restart",
                    worker.url()
                );
                Ended::EngineExited
            }
            Attempt::Done(Ok(connected)) => serve_connection(&ctx, &worker, epoch, connected).await,
            Attempt::Done(Err(e)) => {
                worker.set_status(WorkerStatus::Dead);
                tracing::warn!(
                    "ZMQ backend handshake failed for {}: {e}; will retry on the next health probe",
                    worker.url()
                );
                Ended::Failed(e)
            }
        };
        match ended {
            Ended::Removed => break,
            Ended::Lost(_) | Ended::Failed(_) if shared.config.remove_unhealthy_workers => {
                let reason: &dyn std::fmt::Display = match &ended {
                    Ended::Lost(loss) => loss,
                    Ended::Failed(e) => e,
                    Ended::Removed | Ended::EngineExited => unreachable!(),
                };
                tracing::warn!("removing unhealthy worker {} (--remove-unhealthy-workers): {reason}", worker.url());
                break;
            }
            Ended::Lost(_) | Ended::Failed(_) | Ended::EngineExited => {}
        }
        // Released between attempts, so no stale file outlives a connection.
        release_sockets(&ctx, &worker);
        monoio::select! {
            _ = monoio::time::sleep(probe_interval) => {},
            _ = removal_requested(&worker) => break,
            // The supervised engine exited (before this loss was seen, or since): `serve`
            // starts it again after a backoff, and it dials the sockets bound now.
            _ = engine_exited(&worker, exits_seen) => {},
        }
    }
    release_sockets(&ctx, &worker);
    forget(&ctx, &worker);
}

/// Takes a worker whose supervisor ends out of the registry and out of every shard.
pub(super) fn forget(ctx: &ShardCtx, worker: &Worker) {
    let shared = &ctx.shared;
    shared.registry.remove(worker.key);
    for mailbox in &shared.mailboxes {
        mailbox.post(ShardMsg::Forget(worker.key));
    }
    shared.refresh_parsers();
    tracing::info!("Removed worker {} (id {})", worker.url(), worker.id);
}

/// Another registered worker whose socket files are this one's too. Registration refuses two
/// spellings of one path, but a symlinked directory made afterwards can still join them; then
/// neither binds (binding unlinks stale files) nor unlinks them, so a live worker's sockets
/// are never taken away.
fn sharing_files(ctx: &ShardCtx, worker: &Worker) -> Option<Arc<Worker>> {
    let workers = ctx.shared.registry.snapshot();
    let ipc = |w: &Worker| w.config.tcp.is_none();
    workers
        .iter()
        .find(|w| {
            w.key != worker.key && ipc(w) && ipc(worker) && sockdir::same_files(&w.config.path, &worker.config.path)
        })
        .cloned()
}

fn release_sockets(ctx: &ShardCtx, worker: &Worker) {
    if worker.config.tcp.is_some() {
        return;
    }
    if let Some(other) = sharing_files(ctx, worker) {
        tracing::warn!(
            "ZMQ worker {}: keeping its socket files, which are also worker {}'s",
            worker.url(),
            other.url()
        );
        return;
    }
    let files: Vec<(String, String)> =
        (0..ctx.shared.shards).map(|k| sockdir::socket_paths(&worker.config.path, k)).collect();
    sockdir::remove_sockets(&files);
}

/// Resolves once the worker's engine process, which `serve` supervises, has exited more often
/// than `seen` (never for an engine started by hand).
pub(crate) async fn engine_exited(worker: &Worker, seen: Option<u64>) {
    match (&worker.config.engine, seen) {
        (Some(engine), Some(seen)) => engine.0.exited_after(seen).await,
        _ => std::future::pending().await,
    }
}

pub(super) async fn removal_requested(worker: &Worker) {
    worker.supervisor_event(Worker::is_removing).await
}

/// Hands out the sockets, marks the worker ready, and returns once the engine is lost or the
/// worker has been drained for removal.
async fn serve_connection(
    ctx: &Rc<ShardCtx>,
    worker: &Arc<Worker>,
    epoch: u64,
    mut connected: bringup::Connected,
) -> Ended {
    let shared = &ctx.shared;
    let engines: Arc<[_]> = connected.engines.into();
    let max_model_len = engines.iter().map(|e| e.registration.max_model_len).min().unwrap_or(0);
    let version = engines.first().map(|e| e.registration.vllm_version.clone()).unwrap_or_default();
    let Some(rank_count) = std::num::NonZeroUsize::new(engines.len()) else {
        return Ended::Failed(HandshakeError::NoEngines);
    };
    let ranks = new_ranks(worker, rank_count);
    worker.set_kv_cache(super::KvCacheShape {
        block_size: engines.first().map_or(0, |e| e.registration.block_size),
        gpu_blocks: engines.iter().map(|e| e.registration.num_gpu_blocks).sum(),
    });
    let stale = discard_queued_outputs(&mut connected.pairs);
    if stale > 0 {
        tracing::warn!(
            "ZMQ worker {}: discarded {stale} output messages queued before the handshake (a previous engine's)",
            worker.url()
        );
    }
    let attachments = link_sockets(worker, shared.shards, connected.pairs)
        .into_iter()
        .map(|sockets| Attachment::Zmq(ZmqAttachment { sockets, zmq: shared.zmq.clone(), engines: engines.clone() }));
    let ended = if let Some(reason) = attach_all(shared, worker, epoch, &ranks, attachments).await {
        tracing::warn!("ZMQ worker {} lost while attaching: {reason}", worker.url());
        Ended::Lost(reason)
    } else {
        worker.set_status(WorkerStatus::Ready);
        tracing::info!(
            "ZMQ worker {} ready (engines={}, max_model_len={max_model_len}, version {version})",
            worker.url(),
            engines.len()
        );
        let ended = watch(ctx, worker).await;
        if let Ended::Lost(reason) = &ended {
            tracing::error!("ZMQ worker {} lost: {reason}", worker.url());
        }
        ended
    };
    detach_all(shared, worker, epoch, &ended).await;
    ended
}

/// Marks the worker dead and has every shard drop its link of `epoch`, failing what is in
/// flight there with the period's end as the cause; waits until all have.
pub(super) async fn detach_all(shared: &Shared, worker: &Worker, epoch: u64, ended: &Ended) {
    worker.set_status(WorkerStatus::Dead);
    // Every shard's requests learn the cause, not only those of the shard that saw it first
    // (an ENGINE_CORE_DEAD reaches each shard's socket, but the detach may get there first).
    let reason = match ended {
        Ended::Lost(why) => LinkLoss::Reset(Box::new(why.clone())),
        // Only the attach check and `watch` end a connected period: never a failed handshake.
        Ended::Removed | Ended::Failed(_) | Ended::EngineExited => LinkLoss::Removed,
    };
    let done = Arc::new(AtomicUsize::new(shared.shards));
    for mailbox in &shared.mailboxes {
        mailbox.post(ShardMsg::Detach { worker: worker.key, epoch, reason: reason.clone(), done: done.clone() });
    }
    wait_for_shards(&done).await;
}

/// Each connection binds fresh sockets on the same paths, and an engine that outlived its lost
/// connection (a garbage or stalled one, before its own supervisor kills it) reconnects to them
/// on its own (libzmq retries) and queues frames there. A fresh engine sends nothing before its first request, so whatever is
/// queued now is the old engine's and would fail the new link.
fn discard_queued_outputs(pairs: &mut [(zmtp::Socket, zmtp::Socket)]) -> usize {
    let mut discarded = 0;
    let mut frames = zmtp::Frames::default();
    for (_, output) in pairs {
        while let Ok(true) = output.try_recv(&mut frames) {
            discarded += 1;
        }
    }
    discarded
}

/// What each shard gets: its own pair (vLLM), or, for an engine with one pair, the pair for an
/// owner shard (spread over shards by worker) and a relay through it for the others.
fn link_sockets(worker: &Worker, shards: usize, pairs: Vec<(zmtp::Socket, zmtp::Socket)>) -> Vec<LinkSockets> {
    if pairs.len() == shards {
        return pairs.into_iter().map(|(input, output)| LinkSockets::Pair(input, output)).collect();
    }
    let owner = (worker.key as usize) % shards;
    let hub = Arc::new(Hub::new(owner, shards, limits::relay_request_queue_depth));
    let mut pairs = pairs.into_iter();
    let mut owned = pairs.next();
    (0..shards)
        .map(|k| match owned.take_if(|_| k == owner) {
            Some((input, output)) => LinkSockets::Owner(input, output, hub.clone()),
            None => LinkSockets::Relay(hub.clone()),
        })
        .collect()
}

/// Waits until every shard has processed a hand-over message.
/// The start of a connected period: the worker pending, a new epoch, any loss reported for the
/// last one cleared. `None` when the supervisor stops instead: the worker is being removed,
/// or the gateway is draining (then after the removal that follows; nothing is bound for the
/// worker again, and `serve` is stopping its engines).
pub(super) async fn next_period(shared: &Shared, worker: &Worker) -> Option<u64> {
    if worker.is_removing() {
        return None;
    }
    if shared.draining.load(Ordering::Acquire) {
        removal_requested(worker).await;
        return None;
    }
    worker.set_status(WorkerStatus::Pending);
    let epoch = worker.next_epoch();
    let _ = worker.take_lost();
    Some(epoch)
}

/// A fresh rank table for a connected period, carrying the previous period's request totals.
pub(super) fn new_ranks(worker: &Worker, count: std::num::NonZeroUsize) -> Arc<RankTable> {
    let ranks = RankTable::new(count);
    if let Some(previous) = worker.ranks() {
        ranks.carry_totals(&previous);
    }
    let ranks = Arc::new(ranks);
    worker.set_ranks(ranks.clone());
    ranks
}

/// Hands shard k the k-th of `attachments` and waits until every shard has attached; a loss
/// reported meanwhile comes back (the worker is then not ready).
pub(super) async fn attach_all(
    shared: &Shared,
    worker: &Worker,
    epoch: u64,
    ranks: &Arc<RankTable>,
    attachments: impl Iterator<Item = Attachment>,
) -> Option<LinkLoss> {
    let done = Arc::new(AtomicUsize::new(shared.shards));
    for (mailbox, attachment) in shared.mailboxes.iter().zip(attachments) {
        mailbox.post(ShardMsg::Attach {
            worker: worker.key,
            epoch,
            attachment,
            ranks: ranks.clone(),
            done: done.clone(),
        });
    }
    wait_for_shards(&done).await;
    worker.take_lost()
}

async fn wait_for_shards(done: &AtomicUsize) {
    while done.load(Ordering::Acquire) > 0 {
        monoio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Watches a ready worker until some shard reports it lost, a ping fails, or a removal
/// request has drained it.
pub(super) async fn watch(ctx: &Rc<ShardCtx>, worker: &Arc<Worker>) -> Ended {
    let mut next_ping = Instant::now() + Duration::from_secs(limits::worker_liveness_ping_interval_s);
    loop {
        monoio::select! {
            _ = worker.supervisor_event(Worker::is_lost_or_drained) => {},
            _ = monoio::time::sleep_until(next_ping.into()) => {},
        }
        if let Some(reason) = worker.take_lost() {
            return Ended::Lost(reason);
        }
        if worker.drained() {
            return Ended::Removed;
        }
        if Instant::now() >= next_ping {
            next_ping = Instant::now() + Duration::from_secs(limits::worker_liveness_ping_interval_s);
            match ctx.link(worker.key) {
                Some(link) => {
                    if let Err(e) = link.ping() {
                        link.fail(e.clone());
                        return Ended::Lost(e);
                    }
                }
                None => return Ended::Lost(LinkLoss::ControlLinkClosed),
            }
        }
    }
}
