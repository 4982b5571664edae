//! The control loop of one gRPC worker, on the control shard: connect, detect the service,
//! read the model's facts, hand every shard a gRPC attachment (each opens its own
//! connection), mark the worker ready, and watch it; after a loss, reconnect with backoff
//! until it answers again. A removal request drains it as for a ZMQ worker.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use shardgate_grpc::{Backoff, Channel, Fault, ModelInfo, Service, WorkerClient};
use shardgate_tls::ClientTls;

use crate::engine::grpc::transport::GrpcAttachment;
use crate::engine::link::Attachment;
use crate::engine::loss::LinkLoss;
use crate::shard::ShardCtx;
use crate::workers::supervisor::{
    attach_all, detach_all, forget, new_ranks, next_period, removal_requested, watch, Ended,
};
use crate::workers::{Worker, WorkerStatus};

pub async fn supervise(ctx: Rc<ShardCtx>, worker: Arc<Worker>) {
    let shared = ctx.shared.clone();
    let Some(addr) = worker.config.grpc_addr.clone() else { return };
    // Checked when the worker was added: a grpcs:// worker has a configuration.
    let tls = if worker.config.tls() { shared.config.worker_tls.get().ok() } else { None };
    let probe_interval_ms = shared.config.health_check_interval_s * 1000;
    let mut backoff = Backoff::default();
    while let Some(epoch) = next_period(&shared, &worker).await {
        let checked = monoio::select! {
            r = check(&addr, tls.as_ref()) => r,
            _ = removal_requested(&worker) => break,
        };
        let lost = match checked {
            Ok((service, info)) => {
                backoff.succeeded();
                match serve_connection(&ctx, &worker, epoch, (&addr, &tls), service, &info).await {
                    Ended::Removed => break,
                    Ended::Lost(loss) => Some(loss.to_string()),
                    Ended::Failed(e) => Some(e.to_string()),
                    Ended::EngineExited => None,
                }
            }
            Err(e) => {
                worker.set_status(WorkerStatus::Dead);
                tracing::warn!("gRPC worker {} unreachable: {e}; will retry", worker.url());
                Some(e.to_string())
            }
        };
        if let Some(reason) = lost.filter(|_| shared.config.remove_unhealthy_workers) {
            tracing::warn!("removing unhealthy worker {} (--remove-unhealthy-workers): {reason}", worker.url());
            break;
        }
        // A restarted server is found within the backoff, never later than the probe interval.
        let delay = Duration::from_millis(backoff.failed().min(probe_interval_ms));
        monoio::select! {
            _ = monoio::time::sleep(delay) => {},
            _ = removal_requested(&worker) => break,
        }
    }
    forget(&ctx, &worker);
}

/// Connects once, detects the service, reads what the gateway needs from the worker, and asks
/// whether its engine is alive.
async fn check(addr: &str, tls: Option<&ClientTls>) -> Result<(Service, ModelInfo), Fault> {
    let channel = Rc::new(Channel::connect(addr, tls).await?);
    let service = Service::detect(&channel).await?;
    let client = WorkerClient::new(service, channel);
    let info = client.model_info().await?;
    // A servicer whose engine is dead answers everything but HealthCheck: not ready yet.
    client.health_check().await?;
    Ok((service, info))
}

/// Asks the worker's HealthCheck every `interval_s` on a connection of its own, and returns
/// once `limits::grpc_health_failures_max` answers in a row failed.
async fn health(addr: &str, tls: Option<&ClientTls>, service: Service, interval_s: u64) -> LinkLoss {
    let mut failures = 0;
    let mut client: Option<WorkerClient> = None;
    loop {
        monoio::time::sleep(Duration::from_secs(interval_s.max(1))).await;
        let answer = match client.as_ref().filter(|c| c.channel().ended().is_none()) {
            Some(c) => c.health_check().await,
            None => match Channel::connect(addr, tls).await {
                Ok(channel) => {
                    let c = WorkerClient::new(service, Rc::new(channel));
                    let answer = c.health_check().await;
                    client = Some(c);
                    answer
                }
                Err(e) => Err(e),
            },
        };
        match answer {
            Ok(()) => failures = 0,
            Err(e) => {
                failures += 1;
                tracing::warn!("gRPC worker at {addr}: HealthCheck failed ({failures} in a row): {e}");
                if failures >= crate::limits::grpc_health_failures_max {
                    return LinkLoss::Grpc(Arc::new(e));
                }
            }
        }
    }
}

/// Hands out the attachments, marks the worker ready, and returns once it is lost or drained.
async fn serve_connection(
    ctx: &Rc<ShardCtx>,
    worker: &Arc<Worker>,
    epoch: u64,
    (addr, tls): (&str, &Option<ClientTls>),
    service: Service,
    info: &ModelInfo,
) -> Ended {
    let shared = &ctx.shared;
    // SMG's service pins data-parallel ranks, so the gateway balances them; vLLM's front end
    // balances its own, so it is one rank here.
    let rank_count = match service {
        Service::Smg => info.data_parallel_size.max(1) as usize,
        Service::Vllm => 1,
    };
    let ranks = new_ranks(worker, std::num::NonZeroUsize::new(rank_count).unwrap_or(std::num::NonZeroUsize::MIN));
    let attachment =
        GrpcAttachment { addr: addr.to_string(), tls: tls.clone(), service, max_model_len: info.max_model_len };
    let attachments = std::iter::repeat_with(|| Attachment::Grpc(attachment.clone())).take(shared.shards);
    let ended = if let Some(reason) = attach_all(shared, worker, epoch, &ranks, attachments).await {
        tracing::warn!("gRPC worker {} lost while attaching: {reason}", worker.url());
        Ended::Lost(reason)
    } else {
        worker.set_status(WorkerStatus::Ready);
        tracing::info!(
            "gRPC worker {} ready (service {service:?}, ranks={rank_count}, max_model_len={}, server {})",
            worker.url(),
            info.max_model_len,
            info.server
        );
        // The connection's keep-alive finds a vanished host; HealthCheck finds a servicer whose
        // engine died under it.
        let ended = monoio::select! {
            ended = watch(ctx, worker) => ended,
            why = health(addr, tls.as_ref(), service, shared.config.health_check_interval_s) => Ended::Lost(why),
        };
        if let Ended::Lost(reason) = &ended {
            tracing::error!("gRPC worker {} lost: {reason}", worker.url());
        }
        ended
    };
    detach_all(shared, worker, epoch, &ended).await;
    ended
}
