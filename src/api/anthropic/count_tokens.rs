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
pub fn count(ctx: &Rc<ShardCtx>, body: &[u8]) -> Result<String, ApiError> {
    count_prompt(ctx, body)
        .map(|n| {
            let mut out = String::from("{\"input_tokens\":");
            push_int(&mut out, n);
            out.push('}');
            out
        })
        .map_err(named)
}

fn count_prompt(ctx: &ShardCtx, body: &[u8]) -> Result<usize, ApiError> {
    let body = Body::parse(body)?;
    let f = body.fields();
    refuse_other_apis(&f)?;
    let model = crate::api::model::resolve(ctx, &f)?;
    // An image counts as its one placeholder token: expanding it takes the image's processing.
    let mut media = crate::media::Collector::new(ctx.shared.vision(), &model.served_name);
    let (_, prompt) = render_prompt(ctx, &model, &f, &mut media)?;
    Ok(prompt.token_ids.len())
}
