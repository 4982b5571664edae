//! The model a request is for: the loaded one, if the request names it (or names none).
//! Every API resolves its `model` field here.

use std::sync::Arc;

use crate::api::fields::Fields;
use crate::error::ApiError;
use crate::shard::ShardCtx;
use shardgate_text::ModelAssets;

/// The loaded model, if the request names it (or names none).
pub fn resolve(ctx: &ShardCtx, f: &Fields<'_>) -> Result<Arc<ModelAssets>, ApiError> {
    let model = loaded(ctx)?;
    match f.str("model")? {
        Some(name) if name != model.served_name => Err(ApiError::model_not_found(name)),
        _ => Ok(model),
    }
}

/// The model once its tokenizer has loaded; 503 before that (or if loading failed).
pub fn loaded(ctx: &ShardCtx) -> Result<Arc<ModelAssets>, ApiError> {
    match ctx.shared.model() {
        Some(Ok(m)) => Ok(m.clone()),
        Some(Err(e)) => Err(ApiError::unavailable(format!("the model failed to load: {e}"))),
        None => Err(ApiError::unavailable("tokenizer not yet registered")),
    }
}
