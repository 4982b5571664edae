//! `GET /v1/models` and `GET /v1/models/{id}`.

use std::rc::Rc;

use crate::api::model::loaded;
use crate::error::ApiError;
use crate::shard::ShardCtx;
use shardgate_text::ModelAssets;
use shardgate_util::json::{push_int, push_str};

fn model_object(ctx: &ShardCtx, m: &ModelAssets, out: &mut String) {
    let max_model_len = ctx.max_model_len();
    out.push_str("{\"id\":");
    push_str(out, &m.served_name);
    out.push_str(",\"object\":\"model\",\"created\":");
    push_int(out, shardgate_util::time::unix_time_s());
    out.push_str(",\"owned_by\":\"shardgate\",\"root\":");
    push_str(out, &ctx.shared.config.model_path.display().to_string());
    out.push_str(",\"parent\":null,\"max_model_len\":");
    match max_model_len {
        Some(n) => push_int(out, n),
        None => out.push_str("null"),
    }
    out.push('}');
}

/// A model only HTTP workers serve, and the upstream that serves it.
fn upstream_object(name: &str, upstream: &str, out: &mut String) {
    out.push_str("{\"id\":");
    push_str(out, name);
    out.push_str(",\"object\":\"model\",\"created\":");
    push_int(out, shardgate_util::time::unix_time_s());
    out.push_str(",\"owned_by\":");
    push_str(out, upstream);
    out.push('}');
}

/// The models ready HTTP workers serve under names other than the gateway's own, each once,
/// with the first upstream that serves it.
fn upstream_models(ctx: &ShardCtx, own: &str) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    for w in ctx.shared.registry.snapshot().iter().filter(|w| w.is_routable()) {
        let Some(up) = &w.config.upstream else { continue };
        let names = match &up.alias {
            Some(alias) => vec![alias.clone()],
            None => up.models().to_vec(),
        };
        for name in names {
            if name != own && !found.iter().any(|(n, _)| *n == name) {
                found.push((name, up.url.clone()));
            }
        }
    }
    found
}

/// The gateway's model and every model its HTTP workers serve.
pub fn list(ctx: &Rc<ShardCtx>) -> Result<String, ApiError> {
    let m = loaded(ctx)?;
    let mut out = String::from("{\"object\":\"list\",\"data\":[");
    model_object(ctx, &m, &mut out);
    for (name, upstream) in upstream_models(ctx, &m.served_name) {
        out.push(',');
        upstream_object(&name, &upstream, &mut out);
    }
    out.push_str("]}");
    Ok(out)
}

pub fn get(ctx: &Rc<ShardCtx>, id: &str) -> Result<String, ApiError> {
    let m = loaded(ctx)?;
    let mut out = String::new();
    if id == m.served_name {
        model_object(ctx, &m, &mut out);
    } else {
        let (name, upstream) = upstream_models(ctx, &m.served_name)
            .into_iter()
            .find(|(name, _)| name == id)
            .ok_or_else(|| ApiError::model_not_found(id))?;
        upstream_object(&name, &upstream, &mut out);
    }
    Ok(out)
}
