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

pub fn list(ctx: &Rc<ShardCtx>) -> Result<String, ApiError> {
    let m = loaded(ctx)?;
    let mut out = String::from("{\"object\":\"list\",\"data\":[");
    model_object(ctx, &m, &mut out);
    out.push_str("]}");
    Ok(out)
}

pub fn get(ctx: &Rc<ShardCtx>, id: &str) -> Result<String, ApiError> {
    let m = loaded(ctx)?;
    if id != m.served_name {
        return Err(ApiError::model_not_found(id));
    }
    let mut out = String::new();
    model_object(ctx, &m, &mut out);
    Ok(out)
}
