//! Routing: method + path → handler. The one place that maps every endpoint, and the only
//! place a handler's `Result` becomes an HTTP response.

use std::rc::Rc;

use crate::error::ApiError;
use crate::http::request::Request;
use crate::http::response::Responder;
use crate::shard::ShardCtx;
use crate::workers::WorkerStatus;

use super::openai;

pub async fn dispatch(ctx: &Rc<ShardCtx>, req: Request, r: &mut Responder<'_>) {
    let method = req.head.method.as_str();
    let path = req.head.path.trim_end_matches('/');
    let path = if path.is_empty() { "/" } else { path };
    let result: Result<String, ApiError> = match (method, path) {
        ("POST", "/v1/chat/completions") => return openai::chat::handle(ctx, &req.body, r).await,
        ("POST", "/v1/completions") => return openai::completion::handle(ctx, &req.body, r).await,
        ("GET", "/v1/models") => openai::models::list(ctx),
        ("GET", p) if p.starts_with("/v1/models/") => openai::models::get(ctx, &p["/v1/models/".len()..]),
        ("POST", "/v1/tokenize") | ("POST", "/tokenize") => openai::tokenize::tokenize(ctx, &req.body),
        ("POST", "/v1/detokenize") | ("POST", "/detokenize") => openai::tokenize::detokenize(ctx, &req.body),
        ("POST", "/v1/embeddings") => {
            Err(ApiError::not_implemented("unsupported_backend", "ZMQ backend does not support embeddings yet"))
        }
        ("GET", "/health") | ("GET", "/liveness") | ("GET", "/health_generate") => Ok(String::new()),
        ("GET", "/readiness") => readiness(ctx),
        (_, p) if is_known(p) => Err(ApiError::method_not_allowed(format!("method {method} is not allowed on {p}"))),
        (_, p) => Err(ApiError::not_found(format!("no route for {method} {p}"))),
    };
    let _ = match result {
        Ok(body) if body.is_empty() => r.send(200, "text/plain", b"", &[]).await,
        Ok(body) => r.send_json(200, body.as_bytes()).await,
        Err(e) => r.send_error(&e).await,
    };
}

fn is_known(path: &str) -> bool {
    matches!(
        path,
        "/v1/chat/completions"
            | "/v1/completions"
            | "/v1/models"
            | "/v1/tokenize"
            | "/v1/detokenize"
            | "/tokenize"
            | "/detokenize"
            | "/v1/embeddings"
            | "/health"
            | "/liveness"
            | "/readiness"
    )
}

/// Ready when at least one worker has completed its handshake and the tokenizer has loaded.
fn readiness(ctx: &Rc<ShardCtx>) -> Result<String, ApiError> {
    let ready = ctx.shared.workers.iter().filter(|w| w.status() == WorkerStatus::Ready).count();
    if ready == 0 {
        return Err(ApiError::unavailable("insufficient healthy workers"));
    }
    match ctx.shared.model() {
        Some(Ok(_)) => {}
        _ => return Err(ApiError::unavailable("tokenizer not yet registered")),
    }
    Ok(format!("{{\"status\":\"ready\",\"healthy_workers\":{ready},\"total_workers\":{}}}", ctx.shared.workers.len()))
}
