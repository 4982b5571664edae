//! `POST /v1/tokenize` and `/v1/detokenize` (vLLM's shapes).

use std::rc::Rc;

use crate::api::fields::Body;
use crate::error::ApiError;
use crate::pipeline::request::Prompt;
use crate::shard::ShardCtx;
use shardgate_util::json::{push_int, push_str};

/// `{"prompt": "..."}` or `{"messages": [...]}` → `{"count","max_model_len","tokens"}`.
pub async fn tokenize(ctx: &Rc<ShardCtx>, body: &[u8]) -> Result<String, ApiError> {
    let body = Body::parse(body)?;
    let f = body.fields();
    let model = crate::api::model::resolve(ctx, &f)?;
    let add_special_tokens = f.bool("add_special_tokens")?;
    let ids = if f.has("messages") {
        // The prompt chat completions would send for the same messages: like vLLM's, each image
        // processed (on the media pool) and its placeholder expanded.
        let renderer = ctx.renderer(&model).map_err(ApiError::bad_request)?;
        let vision = ctx.shared.vision();
        let mut media = crate::media::Collector::new(vision, &model.served_name);
        let rendered = super::chat::render_prompt(&model, &renderer, &f, &mut media)?.prompt;
        let ids =
            ctx.encode_rendered(&model, &rendered, add_special_tokens.unwrap_or(false)).map_err(ApiError::internal)?;
        match vision {
            Ok(v) if !media.items.is_empty() => {
                let prompt = Prompt { token_ids: Rc::from(ids), text: None, mm_features: Rc::from([]) };
                crate::media::attach(ctx, v, &media.items, prompt).await?.token_ids.to_vec()
            }
            _ => ids,
        }
    } else {
        let prompt =
            f.str("prompt")?.ok_or_else(|| ApiError::invalid_param("prompt", "'prompt' or 'messages' is required"))?;
        ctx.encode(&model, prompt, add_special_tokens.unwrap_or(true)).map_err(ApiError::internal)?
    };
    let max_model_len = ctx.max_model_len();
    let mut out = String::from("{\"count\":");
    push_int(&mut out, ids.len());
    out.push_str(",\"max_model_len\":");
    match max_model_len {
        Some(n) => push_int(&mut out, n),
        None => out.push_str("null"),
    }
    out.push_str(",\"tokens\":[");
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_int(&mut out, *id);
    }
    out.push_str("],\"token_strs\":null}");
    Ok(out)
}

/// `{"tokens": [...]}` → `{"prompt": "..."}`.
pub fn detokenize(ctx: &Rc<ShardCtx>, body: &[u8]) -> Result<String, ApiError> {
    let body = Body::parse(body)?;
    let f = body.fields();
    let model = crate::api::model::resolve(ctx, &f)?;
    let ids = f.ids("tokens")?.ok_or_else(|| ApiError::invalid_param("tokens", "'tokens' is required"))?;
    let mut checked = Vec::with_capacity(ids.len());
    for id in ids {
        if id < 0 || id as u64 >= model.vocab_size as u64 {
            return Err(ApiError::invalid_param("tokens", format!("token id {id} is out of vocabulary")));
        }
        checked.push(id as u32);
    }
    let text = model.tokenizer.decode(&checked, true).map_err(ApiError::internal)?;
    let mut out = String::from("{\"prompt\":");
    push_str(&mut out, &text);
    out.push('}');
    Ok(out)
}
