//! `POST /v1/messages/count_tokens`: a Messages request without `max_tokens` → `{"input_tokens":
//! N}`, the token count of the prompt the request would send (system prompt, messages and
//! tools rendered through the chat template), which is what a `message_start` reports.

use std::rc::Rc;

use super::invalid::{named, refuse_other_apis};
use super::messages::render_prompt;
use crate::api::fields::Body;
use crate::error::ApiError;
use crate::shard::ShardCtx;
use shardgate_util::json::push_int;

/// The answer's JSON body.
pub async fn count(ctx: &Rc<ShardCtx>, body: &[u8]) -> Result<String, ApiError> {
    count_prompt(ctx, body)
        .await
        .map(|n| {
            let mut out = String::from("{\"input_tokens\":");
            push_int(&mut out, n);
            out.push('}');
            out
        })
        .map_err(named)
}

async fn count_prompt(ctx: &ShardCtx, body: &[u8]) -> Result<usize, ApiError> {
    let body = Body::parse(body)?;
    let f = body.fields();
    refuse_other_apis(&f)?;
    let model = crate::api::model::resolve(ctx, &f)?;
    // An image counts as the placeholder tokens the engine would see: processed on the media
    // pool, as for the request itself.
    let vision = ctx.shared.vision();
    let mut media = crate::media::Collector::new(vision, &model.served_name);
    let (_, prompt) = render_prompt(ctx, &model, &f, &mut media)?;
    let prompt = match vision {
        Ok(v) => crate::media::attach(ctx, v, &media.items, prompt).await?,
        Err(_) => prompt,
    };
    Ok(prompt.token_ids.len())
}
