//! The control shard's loop for one HTTP worker: its `/health` (and `/v1/models`, which names
//! the models it serves) every `--health-check-interval-secs`. A worker is ready while both
//! answer 200, unhealthy otherwise (or after failed requests in a row, `relay`), and ready again
//! as soon as they answer. Removal: no new requests, then gone once its requests finished.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use shardgate_tls::ClientTls;

use super::body::BodyDecoder;
use super::client::Conn;
use super::fault::UpstreamFault;
use super::Upstream;
use crate::limits;
use crate::shard::ShardCtx;
use crate::workers::{Worker, WorkerStatus};

pub async fn supervise(ctx: Rc<ShardCtx>, worker: Arc<Worker>) {
    let Some(up) = worker.config.upstream.clone() else { return };
    let interval = Duration::from_secs(ctx.shared.config.health_check_interval_s);
    // Checked when the worker was added: an https:// worker has a configuration.
    let tls = if up.tls { ctx.shared.config.worker_tls.get().ok() } else { None };
    let mut exits_seen = worker.config.engine.as_ref().map(|e| e.0.exit_count());
    loop {
        if worker.drained() {
            ctx.shared.registry.remove(worker.key);
            ctx.shared.refresh_parsers();
            tracing::info!("Removed worker {} (id {})", up.url, worker.id);
            return;
        }
        if !worker.is_removing() {
            check(&worker, &up, tls.as_ref()).await;
        }
        monoio::select! {
            _ = monoio::time::sleep(interval) => {}
            _ = worker.supervisor_event(Worker::drained) => {}
            // A server `serve` started has exited: unhealthy at once, not at the next probe;
            // its restart is ready when its /health answers again.
            _ = crate::workers::supervisor::engine_exited(&worker, exits_seen) => {
                exits_seen = worker.config.engine.as_ref().map(|e| e.0.exit_count());
                tracing::warn!("HTTP worker {} is unhealthy: its engine exited", up.url);
                worker.set_status(WorkerStatus::Dead);
                ctx.upstreams.forget(worker.key);
            }
        }
    }
}

async fn check(worker: &Worker, up: &Upstream, tls: Option<&ClientTls>) {
    match probe(up, tls).await {
        Ok(models) => {
            if worker.status() != WorkerStatus::Ready {
                tracing::info!("HTTP worker {} is healthy; it serves {:?}", up.url, models);
                up.succeeded();
            }
            up.set_models(models);
            worker.set_status(WorkerStatus::Ready);
        }
        Err(e) => {
            if worker.status() != WorkerStatus::Dead {
                tracing::warn!("HTTP worker {} is unhealthy: {e}", up.url);
            }
            worker.set_status(WorkerStatus::Dead);
        }
    }
}

/// The upstream's model ids, if its `/health` and `/v1/models` answer 200.
async fn probe(up: &Upstream, tls: Option<&ClientTls>) -> Result<Vec<String>, UpstreamFault> {
    let (status, _) = get(up, tls, "/health").await?;
    if status != 200 {
        return Err(UpstreamFault::Status(status));
    }
    let (status, body) = get(up, tls, "/v1/models").await?;
    if status != 200 {
        return Err(UpstreamFault::Status(status));
    }
    let bad = || UpstreamFault::Malformed("/v1/models is not a model list".into());
    let list: serde_json::Value = serde_json::from_slice(&body).map_err(|_| bad())?;
    let data = list.get("data").and_then(serde_json::Value::as_array).ok_or_else(bad)?;
    Ok(data.iter().filter_map(|m| m.get("id")?.as_str().map(str::to_string)).collect())
}

async fn get(up: &Upstream, tls: Option<&ClientTls>, path: &str) -> Result<(u16, Vec<u8>), UpstreamFault> {
    let limit = Duration::from_secs(limits::upstream_probe_timeout_s);
    let mut conn = Conn::connect(up, tls).await?;
    let mut request = format!("GET {path} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n", up.authority);
    if let Some(key) = &up.api_key {
        request.push_str(&format!("authorization: Bearer {key}\r\n"));
    }
    request.push_str("\r\n");
    conn.send(request.into_bytes()).await.0?;
    let head = conn.read_head(limit).await?;
    let mut body = BodyDecoder::new(head.framing);
    let mut out = Vec::new();
    while conn.read_body(&mut body, &mut out, limit).await? {
        if out.len() > limits::upstream_body_bytes_max {
            return Err(UpstreamFault::Malformed("response body too large".into()));
        }
    }
    Ok((head.status, out))
}
