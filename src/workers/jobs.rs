//! Registering and removing workers, on the control shard, one at a time (so two requests cannot
//! both pass the duplicate check). Everything that needs no engine is checked before a worker is
//! registered, and a refused worker is never registered: `POST /workers` answers 400 with the
//! reason, and the log says `Failed job: type=AddWorker, worker=<url> <reason>` with SMG's
//! reason texts, client-given text escaped.

use std::rc::Rc;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::add_worker::AddWorker;
use super::refusal::WorkerRefusal;
use super::{Worker, WorkerMeta};
use crate::config::{Backend, WorkerConfig};
use crate::shard::ShardCtx;
use shardgate_parsers::{reasoning, tool};
use shardgate_util::log_escape::Escaped;
use shardgate_wire::sockdir;

/// Checks a request against the gateway and the registered workers.
pub fn validate(ctx: &ShardCtx, req: &AddWorker) -> Result<(WorkerConfig, WorkerMeta), WorkerRefusal> {
    let url = &req.url;
    if crate::upstream::target::is_http_url(url) {
        return validate_http(ctx, req);
    }
    if crate::config::is_grpc_url(url)
        && req.zmq_handshake_address.is_none()
        && req.connection_mode.as_deref() != Some("zmq")
    {
        return validate_grpc(ctx, req);
    }
    let tcp = if url.starts_with("tcp://") {
        if req.zmq_handshake_address.is_some() {
            return Err(WorkerRefusal::TcpHandshakeAddress { url: url.clone() });
        }
        Some(super::tcp::parse(url, ctx.shared.config.allow_public_engine_bind)?)
    } else {
        None
    };
    let path = match (tcp, url.strip_prefix("ipc://")) {
        (Some(_), _) => String::new(),
        (None, Some(raw_path)) => sockdir::normalize(raw_path)?,
        (None, None) => return Err(not_zmq(req)),
    };
    let backend = match req.runtime.as_deref() {
        None => {
            tracing::info!("runtime_type unspecified for ZMQ worker; defaulting to vLLM EngineCore");
            Backend::Vllm
        }
        Some(runtime) => crate::config::parse_backend(runtime, url)?,
    };
    if let Some(addr) = &req.zmq_handshake_address {
        if !addr.starts_with("tcp://") {
            return Err(WorkerRefusal::HandshakeAddressNotTcp);
        }
    }
    if let Some(t) = req.worker_type.as_deref().filter(|t| *t != "regular") {
        return Err(WorkerRefusal::WorkerType { url: url.clone(), worker_type: t.to_string() });
    }
    if req.dp_rank.is_some() {
        return Err(WorkerRefusal::DpRank { url: url.clone() });
    }
    let engine_count = req.dp_size.unwrap_or(1);
    if engine_count == 0 || engine_count > crate::limits::engines_per_worker_max {
        return Err(WorkerRefusal::DpSize { url: url.clone(), dp_size: engine_count });
    }
    let config = &ctx.shared.config;
    if engine_count > 1 && config.dp_aware {
        return Err(WorkerRefusal::DpAware { url: url.clone(), setting: "dp_size", count: engine_count });
    }
    check_model_identity(ctx, url, &req.labels)?;
    check_parser_labels(url, &config.served_model_name, &req.labels)?;
    let registry = &ctx.shared.registry;
    if tcp.is_none() {
        let ipc = |w: &&std::sync::Arc<Worker>| w.config.tcp.is_none() && sockdir::same_files(&w.config.path, &path);
        if let Some(other) = registry.snapshot().iter().find(ipc) {
            return Err(WorkerRefusal::Duplicate { url: url.clone(), other: other.url().to_string() });
        }
        let pairs = backend.socket_pairs(ctx.shared.shards);
        sockdir::check(&path, pairs, config.worker_socket_root.as_deref())?;
    }
    let worker = WorkerConfig {
        url: tcp.map_or_else(|| format!("ipc://{path}"), |addr| format!("tcp://{addr}")),
        path,
        tcp,
        backend,
        engine_count,
        handshake_address: req.zmq_handshake_address.clone(),
        engine: None,
        upstream: None,
        grpc_addr: None,
    };
    let addr = crate::config::handshake_address(&worker);
    if let Some(other) = registry.snapshot().iter().find(|w| w.handshake_address == addr) {
        return Err(WorkerRefusal::HandshakeAddressTaken { address: addr, other: other.url().to_string() });
    }
    Ok((worker, WorkerMeta { labels: req.labels.clone(), priority: req.priority }))
}

/// An HTTP worker: a usable upstream URL, not registered yet, and no ZMQ-only field.
fn validate_http(ctx: &ShardCtx, req: &AddWorker) -> Result<(WorkerConfig, WorkerMeta), WorkerRefusal> {
    let url = &req.url;
    if req.zmq_handshake_address.is_some() {
        return Err(WorkerRefusal::HandshakeAddressWithoutZmq);
    }
    if let Some(mode) = req.connection_mode.as_deref().filter(|m| *m != "http") {
        return Err(WorkerRefusal::ConnectionMode { url: url.clone(), mode: mode.to_string() });
    }
    if let Some(t) = req.worker_type.as_deref().filter(|t| *t != "regular") {
        return Err(WorkerRefusal::WorkerType { url: url.clone(), worker_type: t.to_string() });
    }
    let upstream = crate::upstream::Upstream::parse(url, req.api_key.clone(), req.model_id.clone())
        .map_err(|reason| WorkerRefusal::Upstream { url: url.clone(), reason })?;
    check_tls(ctx, url)?;
    if let Some(other) = ctx.shared.registry.snapshot().iter().find(|w| w.url() == upstream.url) {
        return Err(WorkerRefusal::Duplicate { url: url.clone(), other: other.url().to_string() });
    }
    Ok((WorkerConfig::http(upstream), WorkerMeta { labels: req.labels.clone(), priority: req.priority }))
}

/// A TLS worker needs the gateway's TLS configurations, loaded here the first time.
fn check_tls(ctx: &ShardCtx, url: &str) -> Result<(), WorkerRefusal> {
    if !super::tls::is_tls_url(url) {
        return Ok(());
    }
    ctx.shared.config.worker_tls.get().map(|_| ()).map_err(|reason| WorkerRefusal::Tls { url: url.to_string(), reason })
}

/// Why a URL that is neither `ipc://` nor `tcp://` is refused (SMG's reasons).
fn not_zmq(req: &AddWorker) -> WorkerRefusal {
    if req.zmq_handshake_address.is_some() {
        WorkerRefusal::HandshakeAddressWithoutZmq
    } else if req.connection_mode.as_deref() == Some("zmq") {
        WorkerRefusal::NotIpc
    } else {
        WorkerRefusal::NotZmq { url: req.url.clone() }
    }
}

fn check_model_identity(ctx: &ShardCtx, url: &str, labels: &Map<String, Value>) -> Result<(), WorkerRefusal> {
    let ours = ctx.shared.config.model_path.display().to_string();
    match labels.get("model_path").and_then(Value::as_str) {
        Some(theirs) if theirs != ours && theirs != ctx.shared.config.served_model_name => {
            Err(WorkerRefusal::OtherModel { url: url.to_string(), theirs: theirs.to_string(), ours })
        }
        _ => Ok(()),
    }
}

/// Per-model parser overrides in labels must name registered parsers.
fn check_parser_labels(url: &str, model: &str, labels: &Map<String, Value>) -> Result<(), WorkerRefusal> {
    let unknown = |label: &'static str, name: &str| WorkerRefusal::UnknownParser {
        url: url.to_string(),
        label,
        name: name.to_string(),
        model: model.to_string(),
    };
    if let Some(name) = labels.get("tool_parser").and_then(Value::as_str) {
        if !tool::tool_parser_names().contains(&name) {
            return Err(unknown("tool_parser", name));
        }
    }
    if let Some(name) = labels.get("reasoning_parser").and_then(Value::as_str) {
        if !reasoning::reasoning_parser_names().contains(&name) {
            return Err(unknown("reasoning_parser", name));
        }
    }
    Ok(())
}

/// Validates and registers a worker, then starts its supervisor. Control shard only.
pub fn add(ctx: &Rc<ShardCtx>, req: AddWorker) -> Result<Arc<Worker>, WorkerRefusal> {
    match validate(ctx, &req) {
        Ok((config, meta)) => Ok(register(ctx, config, meta)),
        Err(reason) => {
            tracing::error!(
                "Failed job: type=AddWorker, worker={} {}",
                Escaped(&req.url),
                Escaped(&reason.to_string())
            );
            Err(reason)
        }
    }
}

/// A `grpc://` worker: what needs no connection is checked here; the supervisor connects.
fn validate_grpc(ctx: &ShardCtx, req: &AddWorker) -> Result<(WorkerConfig, WorkerMeta), WorkerRefusal> {
    let url = &req.url;
    let backend = match req.runtime.as_deref() {
        None => Backend::Vllm,
        Some(runtime) => crate::config::parse_backend(runtime, url)?,
    };
    let worker = crate::config::grpc_worker(url, backend)?;
    check_tls(ctx, url)?;
    if let Some(t) = req.worker_type.as_deref().filter(|t| *t != "regular") {
        return Err(WorkerRefusal::WorkerType { url: url.clone(), worker_type: t.to_string() });
    }
    check_model_identity(ctx, url, &req.labels)?;
    check_parser_labels(url, &ctx.shared.config.served_model_name, &req.labels)?;
    if let Some(other) = ctx.shared.registry.snapshot().iter().find(|w| w.config.grpc_addr == worker.grpc_addr) {
        return Err(WorkerRefusal::Duplicate { url: url.clone(), other: other.url().to_string() });
    }
    Ok((worker, WorkerMeta { labels: req.labels.clone(), priority: req.priority }))
}

pub fn register(ctx: &Rc<ShardCtx>, config: WorkerConfig, meta: WorkerMeta) -> Arc<Worker> {
    let shared = &ctx.shared;
    let worker = Arc::new(Worker::new(shared.registry.next_key(), config, meta));
    if worker.config.grpc_addr.is_some() {
        tracing::info!("Registered gRPC worker {} (id {})", worker.url(), worker.id);
        shared.registry.insert(worker.clone());
        shared.refresh_parsers();
        monoio::spawn(super::grpc::supervisor::supervise(ctx.clone(), worker.clone()));
        return worker;
    }
    if worker.config.upstream.is_some() {
        tracing::info!("Registered HTTP worker {} (id {})", worker.url(), worker.id);
        shared.registry.insert(worker.clone());
        monoio::spawn(crate::upstream::probe::supervise(ctx.clone(), worker.clone()));
        return worker;
    }
    tracing::info!(
        "Registered ZMQ worker {} (id {}, runtime {:?}, engines {})",
        worker.url(),
        worker.id,
        worker.backend(),
        worker.config.engine_count
    );
    shared.registry.insert(worker.clone());
    shared.refresh_parsers();
    monoio::spawn(super::supervisor::supervise(ctx.clone(), worker.clone()));
    worker
}

/// Starts removing a worker: it stops taking requests at once; its supervisor drains it and
/// takes it out of the registry.
pub fn remove(ctx: &ShardCtx, id: &str) -> bool {
    match ctx.shared.registry.find(id) {
        Some(w) => {
            tracing::info!("Removing worker {} (id {}): draining", w.url(), w.id);
            w.request_removal();
            true
        }
        None => false,
    }
}
