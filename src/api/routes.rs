//! Routing: method + path → handler. The one place that maps every endpoint, and the only
//! place a handler's `Result` becomes an HTTP response.

use std::rc::Rc;

use crate::error::ApiError;
use crate::http::request::Request;
use crate::http::response::Responder;
use crate::shard::ShardCtx;
use crate::workers::{api as workers_api, WorkerStatus};

use super::{anthropic, openai, security};

/// A handler's answer: status and JSON body (empty body: plain 200 with no content).
type Answer = Result<(u16, String), ApiError>;

fn ok(body: String) -> Answer {
    Ok((200, body))
}

pub async fn dispatch(ctx: &Rc<ShardCtx>, req: Request, r: &mut Responder<'_>) {
    // A large body is parsed into many times its size (a JSON array of small numbers: about 30
    // times); once the request is over, that memory goes back to the OS instead of staying
    // with the shard's heap for the life of the process.
    let large = req.body.len() >= crate::limits::http_body_release_bytes_min;
    route(ctx, req, r).await;
    if large {
        shardgate_util::memory::release_freed();
    }
}

async fn route(ctx: &Rc<ShardCtx>, req: Request, r: &mut Responder<'_>) {
    let method = req.head.method.as_str();
    let path = req.head.path.trim_end_matches('/');
    let path = if path.is_empty() { "/" } else { path };
    r.envelope = crate::error::Envelope::of_path(path);
    let security_config = &ctx.shared.config.security;
    if !security_config.cors_allow_origins.is_empty() {
        if let Some(headers) = security::preflight(security_config, &req.head).filter(|_| is_known(path)) {
            r.extra_headers = headers;
            let _ = r.send(204, "text/plain", b"", &[]).await;
            return;
        }
        r.extra_headers = security::cors_headers(security_config, &req.head);
    }
    if let Err(e) = security::authorize(security_config, &req.head, security::access_of(path)) {
        tracing::info!("shard {}: {method} {path} refused: {}", ctx.index, e.message);
        let _ = r.send_error(&e).await;
        return;
    }
    if ctx.shared.draining.load(std::sync::atomic::Ordering::Acquire)
        && security::access_of(path) != security::Access::Open
    {
        r.close_after();
        let _ = r.send_error(&ApiError::unavailable("the server is shutting down")).await;
        return;
    }
    if method == "POST" && relay_to_http(ctx, path, &req, r).await {
        return;
    }
    let answer: Answer = match (method, path) {
        ("POST", "/v1/chat/completions") => return openai::chat::handle(ctx, &req.body, r).await,
        ("POST", "/v1/completions") => return openai::completion::handle(ctx, &req.body, r).await,
        ("POST", "/v1/messages") => return anthropic::messages::handle(ctx, &req.body, r).await,
        ("POST", "/v1/messages/count_tokens") => anthropic::count_tokens::count(ctx, &req.body).await.and_then(ok),
        ("POST", "/v1/responses") if openai::responses::tool_loop::wanted(&req.body) => {
            return openai::responses::tool_loop::handle(ctx, &req.body, r).await
        }
        ("POST", "/v1/responses") => return openai::responses::create::handle(ctx, &req.body, r).await,
        ("GET", "/v1/models") => openai::models::list(ctx).and_then(ok),
        ("GET", p) if p.starts_with("/v1/models/") => openai::models::get(ctx, &p["/v1/models/".len()..]).and_then(ok),
        ("POST", "/v1/tokenize") | ("POST", "/tokenize") => {
            openai::tokenize::tokenize(ctx, &req.body).await.and_then(ok)
        }
        ("POST", "/v1/detokenize") | ("POST", "/detokenize") => {
            openai::tokenize::detokenize(ctx, &req.body).and_then(ok)
        }
        ("POST", "/v1/embeddings") => {
            Err(ApiError::not_implemented("unsupported_backend", "ZMQ backend does not support embeddings yet"))
        }
        ("GET", "/health") | ("GET", "/liveness") | ("GET", "/health_generate") => Ok((200, String::new())),
        ("GET", "/readiness") => readiness(ctx).and_then(ok),
        ("POST", "/workers") => workers_api::add(ctx, &req.body).await,
        ("GET", "/workers") => ok(workers_api::list(ctx)),
        ("GET", p) if p.starts_with("/workers/") => workers_api::get(ctx, &p["/workers/".len()..]).and_then(ok),
        ("PATCH", p) if p.starts_with("/workers/") => {
            workers_api::patch(ctx, &p["/workers/".len()..], &req.body).and_then(ok)
        }
        ("DELETE", p) if p.starts_with("/workers/") => workers_api::delete(ctx, &p["/workers/".len()..]),
        ("POST", "/flush_cache") => ok(flush_cache(ctx)),
        (m, p) if is_stored_state(p) => match stored(ctx, m, p, &req).await {
            Some(answer) => answer,
            None => Err(ApiError::method_not_allowed(format!("method {method} is not allowed on {p}"))),
        },
        ("POST", "/start_profile") | ("POST", "/stop_profile") => {
            let op = path.trim_start_matches('/');
            Err(ApiError::not_implemented("unsupported_backend", format!("{op} is not supported over ZMQ")))
        }
        (_, p) if is_known(p) => Err(ApiError::method_not_allowed(format!("method {method} is not allowed on {p}"))),
        (_, p) => Err(ApiError::not_found(format!("no route for {method} {p}"))),
    };
    let _ = match answer {
        Ok((status, body)) if body.is_empty() => r.send(status, "text/plain", b"", &[]).await,
        Ok((status, body)) => r.send_json(status, body.as_bytes()).await,
        Err(e) => r.send_error(&e).await,
    };
}

/// Sends a generation (or embeddings) request to an HTTP worker when the routing policy
/// picks one for its model; true when it was answered that way.
async fn relay_to_http(ctx: &Rc<ShardCtx>, path: &str, req: &Request, r: &mut Responder<'_>) -> bool {
    use crate::upstream::{choose, peek, relay};
    let Some(endpoint) = relay::relayed_path(path) else { return false };
    if !choose::any_http(ctx) {
        return false;
    }
    let Some(peek) = peek::peek(&req.body) else { return false };
    match choose::choose(ctx, &peek, &req.body, None) {
        choose::Route::Engine => false,
        choose::Route::Unavailable => {
            let _ = r.send_error(&ApiError::unavailable("no healthy worker is available")).await;
            true
        }
        choose::Route::Http(worker) => relay::relay(ctx, worker, endpoint, req, &peek, r).await == relay::Outcome::Done,
    }
}

/// The stored-state routes of the Responses and Conversations APIs (`None`: the path exists
/// but not for this method).
async fn stored(ctx: &Rc<ShardCtx>, method: &str, path: &str, req: &Request) -> Option<Answer> {
    use openai::{conversations, responses::stored as responses};
    let query = req.head.query.as_deref();
    let body = &req.body;
    if let Some(rest) = path.strip_prefix("/v1/responses/") {
        let answer = match (method, rest.split('/').collect::<Vec<_>>().as_slice()) {
            ("GET", [id]) => responses::get(ctx, id).await,
            ("DELETE", [id]) => responses::delete(ctx, id).await,
            ("GET", [id, "input_items"]) => responses::input_items(ctx, id, query).await,
            ("POST", [id, "cancel"]) => responses::cancel(ctx, id).await,
            _ => return None,
        };
        return Some(answer.and_then(ok));
    }
    let rest = path.strip_prefix("/v1/conversations").unwrap_or_default();
    let answer = match (method, rest.split('/').skip(1).collect::<Vec<_>>().as_slice()) {
        ("POST", []) => conversations::create(ctx, body).await,
        ("GET", [id]) => conversations::get(ctx, id).await,
        ("POST", [id]) => conversations::update(ctx, id, body).await,
        ("DELETE", [id]) => conversations::delete(ctx, id).await,
        ("POST", [id, "items"]) => conversations::add_items(ctx, id, body).await,
        ("GET", [id, "items"]) => conversations::list_items(ctx, id, query).await,
        ("GET", [id, "items", item]) => conversations::get_item(ctx, id, item).await,
        ("DELETE", [id, "items", item]) => conversations::delete_item(ctx, id, item).await,
        _ => return None,
    };
    Some(answer.and_then(ok))
}

fn is_stored_state(path: &str) -> bool {
    path.starts_with("/v1/responses/") || path == "/v1/conversations" || path.starts_with("/v1/conversations/")
}

/// A connection taken while its shard is at the connection cap: health probes are answered, so
/// orchestrators still see a live gateway; anything else is told to retry.
pub async fn over_cap(ctx: &Rc<ShardCtx>, req: Request, r: &mut Responder<'_>) {
    let path = req.head.path.trim_end_matches('/');
    if req.head.method == "GET" && security::access_of(path) == security::Access::Open {
        return dispatch(ctx, req, r).await;
    }
    let _ = r.send_error(&ApiError::unavailable("the server is at its connection limit")).await;
}

/// The Prometheus listener's one route.
pub async fn metrics(ctx: &Rc<ShardCtx>, req: Request, r: &mut Responder<'_>) {
    let _ = match (req.head.method.as_str(), req.head.path.as_str()) {
        ("GET", "/metrics") => {
            let body = crate::metrics::exposition::render(&ctx.shared);
            r.send(200, "text/plain; version=0.0.4; charset=utf-8", body.as_bytes(), &[]).await
        }
        (m, p) => r.send_error(&ApiError::not_found(format!("no route for {m} {p}"))).await,
    };
}

fn is_known(path: &str) -> bool {
    path.starts_with("/workers/")
        || is_stored_state(path)
        || matches!(
            path,
            "/v1/chat/completions"
                | "/v1/completions"
                | "/v1/messages"
                | "/v1/messages/count_tokens"
                | "/v1/responses"
                | "/v1/models"
                | "/v1/tokenize"
                | "/v1/detokenize"
                | "/tokenize"
                | "/detokenize"
                | "/v1/embeddings"
                | "/health"
                | "/liveness"
                | "/readiness"
                | "/workers"
                | "/flush_cache"
                | "/start_profile"
                | "/stop_profile"
        )
}

/// Ready when at least one worker has completed its handshake and the tokenizer has loaded.
fn readiness(ctx: &Rc<ShardCtx>) -> Result<String, ApiError> {
    if ctx.shared.draining.load(std::sync::atomic::Ordering::Acquire) {
        return Err(ApiError::unavailable("shutting down"));
    }
    let workers = ctx.shared.registry.snapshot();
    let ready = workers.iter().filter(|w| w.status() == WorkerStatus::Ready).count();
    if ready == 0 {
        return Err(ApiError::unavailable("insufficient healthy workers"));
    }
    match ctx.shared.model() {
        Some(Ok(_)) => {}
        _ => return Err(ApiError::unavailable("tokenizer not yet registered")),
    }
    Ok(format!("{{\"status\":\"ready\",\"healthy_workers\":{ready},\"total_workers\":{}}}", workers.len()))
}

/// ZMQ engines have no cache-flush RPC over this path: every worker is skipped, by name.
fn flush_cache(ctx: &Rc<ShardCtx>) -> String {
    let workers = ctx.shared.registry.snapshot();
    let skipped: Vec<serde_json::Value> =
        workers.iter().map(|w| serde_json::Value::String(w.url().to_string())).collect();
    tracing::info!("flush_cache: skipping {} ZMQ worker(s)", skipped.len());
    serde_json::json!({"status": "ok", "flushed": [], "skipped_zmq_workers": skipped}).to_string()
}
