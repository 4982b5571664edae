//! The worker admin API: `POST /workers` (validated and registered by the control shard before
//! the answer: 400 with the reason, or 202 while the handshake runs in the background),
//! `GET /workers`, `GET /workers/{id}`, `PATCH /workers/{id}` (labels and priority; the live
//! connection stays), `DELETE /workers/{id}` (drain, then remove).

use std::rc::Rc;

use serde_json::{Map, Value};

use super::add_worker::AddWorker;
use super::{Worker, WorkerMeta};
use crate::api::fields::Body;
use crate::error::ApiError;
use crate::shard::mailbox::ShardMsg;
use crate::shard::{reply, ShardCtx};
use shardgate_util::json::{push_int, push_str};

/// Parses a `POST /workers` body. Only the shape is checked here; the control shard validates
/// the rest.
pub fn parse_add(body: &[u8]) -> Result<AddWorker, ApiError> {
    let body = Body::parse(body)?;
    let f = body.fields();
    let url = f.str("url")?.ok_or_else(|| ApiError::invalid_param("url", "'url' is required"))?.to_string();
    let runtime = match f.str("runtime_type")? {
        Some(r) => Some(r.to_string()),
        None => f.str("runtime")?.map(str::to_string),
    };
    let dp_size = match f.i64("dp_size")? {
        Some(n) if n < 1 => return Err(ApiError::invalid_param("dp_size", "'dp_size' must be a positive integer")),
        Some(n) => Some(n as usize),
        None => None,
    };
    Ok(AddWorker {
        url,
        runtime,
        zmq_handshake_address: f.str("zmq_handshake_address")?.map(str::to_string),
        dp_size,
        dp_rank: f.i64("dp_rank")?,
        worker_type: f.str("worker_type")?.map(str::to_string),
        connection_mode: f.str("connection_mode")?.map(str::to_string),
        labels: f.object("labels")?.cloned().unwrap_or_default(),
        priority: f.i64("priority")?.unwrap_or(0),
        api_key: f.str("api_key")?.map(str::to_string),
        model_id: match f.array("models")? {
            Some(models) => models.first().and_then(|m| m.get("id")).and_then(Value::as_str).map(str::to_string),
            None => None,
        },
    })
}

pub async fn add(ctx: &Rc<ShardCtx>, body: &[u8]) -> Result<(u16, String), ApiError> {
    let req = parse_add(body)?;
    let (tx, rx) = reply::channel();
    ctx.shared.mailboxes[0].post(ShardMsg::AddWorker(Box::new(req), tx));
    match rx.recv().await {
        Some(Ok((id, url))) => {
            let mut out = String::from("{\"status\":\"accepted\",\"id\":");
            push_str(&mut out, &id);
            out.push_str(",\"url\":");
            push_str(&mut out, &url);
            out.push_str(
                ",\"message\":\"worker registered; its engine handshake runs in the background (see GET /workers)\"}",
            );
            Ok((202, out))
        }
        Some(Err(reason)) => Err(ApiError::bad_request(reason)),
        None => Err(ApiError::internal("the control shard dropped the registration")),
    }
}

pub fn list(ctx: &Rc<ShardCtx>) -> String {
    let workers = ctx.shared.registry.snapshot();
    let mut out = String::from("{\"workers\":[");
    for (i, w) in workers.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_worker(&mut out, w, ctx);
    }
    out.push_str("],\"total\":");
    push_int(&mut out, workers.len());
    out.push('}');
    out
}

pub fn get(ctx: &Rc<ShardCtx>, id: &str) -> Result<String, ApiError> {
    let w = find(ctx, id)?;
    let mut out = String::new();
    push_worker(&mut out, &w, ctx);
    Ok(out)
}

pub fn patch(ctx: &Rc<ShardCtx>, id: &str, body: &[u8]) -> Result<String, ApiError> {
    let w = find(ctx, id)?;
    let body = Body::parse(body)?;
    let f = body.fields();
    let mut meta = w.meta();
    if let Some(labels) = f.object("labels")? {
        check_labels(&w, labels, &ctx.shared.config.served_model_name)?;
        for (k, v) in labels {
            if v.is_null() {
                meta.labels.remove(k);
            } else {
                meta.labels.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(p) = f.i64("priority")? {
        meta.priority = p;
    }
    w.set_meta(meta);
    ctx.shared.refresh_parsers();
    tracing::info!("Updated worker {} (id {})", w.url(), w.id);
    get(ctx, id)
}

fn check_labels(w: &Worker, labels: &Map<String, Value>, model: &str) -> Result<(), ApiError> {
    for (key, names) in [
        ("tool_parser", shardgate_parsers::tool::tool_parser_names()),
        ("reasoning_parser", shardgate_parsers::reasoning::reasoning_parser_names()),
    ] {
        if let Some(name) = labels.get(key).and_then(Value::as_str) {
            if !names.contains(&name) {
                return Err(ApiError::invalid_param(
                    &format!("labels.{key}"),
                    format!("worker {} declares unknown {key} '{name}' for model '{model}'", w.url()),
                ));
            }
        }
    }
    Ok(())
}

pub fn delete(ctx: &Rc<ShardCtx>, id: &str) -> Result<(u16, String), ApiError> {
    let w = find(ctx, id)?;
    ctx.shared.mailboxes[0].post(ShardMsg::RemoveWorker(w.id.clone()));
    let mut out = String::from("{\"status\":\"accepted\",\"id\":");
    push_str(&mut out, &w.id);
    out.push_str(",\"message\":\"worker draining; it is removed once its requests finish\"}");
    Ok((202, out))
}

fn find(ctx: &ShardCtx, id: &str) -> Result<std::sync::Arc<Worker>, ApiError> {
    ctx.shared.registry.find(id).ok_or_else(|| ApiError::not_found(format!("no worker with id {id}")))
}

fn push_worker(out: &mut String, w: &Worker, ctx: &ShardCtx) {
    let WorkerMeta { labels, priority } = w.meta();
    out.push_str("{\"id\":");
    push_str(out, &w.id);
    out.push_str(",\"url\":");
    push_str(out, w.url());
    out.push_str(",\"connection_mode\":");
    push_str(out, w.connection_mode());
    out.push_str(",\"runtime_type\":");
    push_str(out, w.runtime_type());
    if let Some(up) = &w.config.upstream {
        out.push_str(",\"models\":");
        let models: &[String] = &up.models();
        out.push_str(&serde_json::json!(models).to_string());
        if let Some(alias) = &up.alias {
            out.push_str(",\"model_id\":");
            push_str(out, alias);
        }
    }
    out.push_str(",\"worker_type\":\"regular\",\"status\":");
    push_str(out, w.status().as_str());
    out.push_str(",\"dp_size\":");
    push_int(out, w.config.engine_count);
    out.push_str(",\"handshake_address\":");
    push_str(out, &w.handshake_address);
    out.push_str(",\"priority\":");
    push_int(out, priority);
    out.push_str(",\"labels\":");
    out.push_str(&Value::Object(labels).to_string());
    if let Some(engine) = &w.config.engine {
        // The engine process `serve` supervises for this worker.
        out.push_str(",\"engine\":");
        out.push_str(&engine.0.to_json().to_string());
    }
    out.push_str(",\"load\":{\"in_flight\":");
    push_int(out, w.in_flight.load(std::sync::atomic::Ordering::Relaxed).max(0));
    out.push_str(",\"ranks\":[");
    // This shard's view of what each rank holds (every shard follows the same events).
    let kv = ctx.link(w.key).and_then(|l| l.kv_summary()).unwrap_or_default();
    if let Some(table) = w.ranks() {
        for (rank, load) in table.snapshots().enumerate() {
            let mut entry = serde_json::json!({
                "rank": rank,
                "in_flight": load.in_flight,
                "running": load.running,
                "waiting": load.waiting,
                "kv_cache_usage": load.kv_cache_usage,
                "report_age_ms": load.report_age_ms,
                "score": crate::routing::score(&load),
            });
            if let Some(view) = kv.get(rank) {
                entry["kv_events"] = serde_json::json!(view);
            }
            if rank > 0 {
                out.push(',');
            }
            out.push_str(&entry.to_string());
        }
    }
    out.push_str("]}}");
}
