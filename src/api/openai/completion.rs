//! `POST /v1/completions`: prompts as a string, a list of strings, token ids, or a list of
//! token-id lists (`len(prompts) × n` choices) → the pipeline's neutral `GenerateRequest`;
//! the response is `CompletionFormat`'s.

use std::rc::Rc;
use std::time::Instant;

use serde_json::Value;

use super::completion_format::CompletionFormat;
use super::sampling::{self, Api, Sampling};
use crate::api::fields::Body;
use crate::api::invalid::Names;
use crate::api::sink::serve;
use crate::error::ApiError;
use crate::http::response::Responder;
use crate::limits;
use crate::metrics::Endpoint;
use crate::pipeline::parse::ParseSpec;
use crate::pipeline::plan::{plan, Generation};
use crate::pipeline::request::{GenerateRequest, Prompt};
use crate::shard::ShardCtx;
use shardgate_text::ModelAssets;

pub async fn handle(ctx: &Rc<ShardCtx>, body: &[u8], r: &mut Responder<'_>) {
    serve(ctx, Endpoint::Completions, r, async |started| prepare(ctx, body, started)).await
}

fn prepare(ctx: &Rc<ShardCtx>, body: &[u8], started: Instant) -> Result<(Generation, CompletionFormat), ApiError> {
    let names = Names::COMPLETIONS;
    let body = Body::parse(body)?;
    let f = body.fields();
    let model = crate::api::model::resolve(ctx, &f)?;
    let Sampling { request: sampling, include_usage } = sampling::read(&f, Api::Completion)?;
    let raw = f.get("prompt").ok_or_else(|| ApiError::invalid_param("prompt", "'prompt' is required"))?;
    let prompts = parse_prompts(ctx, raw, &model, sampling.echo, &names)?;
    let id = shardgate_util::ids::response_id("cmpl");
    let request = GenerateRequest {
        endpoint: Endpoint::Completions,
        id: id.clone(),
        started,
        model: model.clone(),
        prompts,
        sampling,
        parse: ParseSpec::default(),
    };
    let g = plan(ctx, request).map_err(|e| names.refusal(e))?;
    let format = CompletionFormat::new(
        id,
        shardgate_util::time::unix_time_s(),
        model.served_name.clone(),
        include_usage,
        &g.params,
        g.prompts.iter().map(|p| p.text.clone().unwrap_or_default()).collect(),
    );
    Ok((g, format))
}

/// The prompt field's forms. Token ids must be non-negative integers; whether they lie inside
/// the vocabulary is the pipeline's check (`Prompt::from_ids`).
fn parse_prompts(
    ctx: &ShardCtx,
    raw: &Value,
    model: &ModelAssets,
    echo: bool,
    names: &Names,
) -> Result<Vec<Prompt>, ApiError> {
    let bad = |m: &str| ApiError::invalid_param("prompt", m.to_string());
    let from_ids = |items: &[Value]| -> Result<Prompt, ApiError> {
        let ids = items
            .iter()
            .map(|v| v.as_u64().ok_or_else(|| bad("token-id prompts must contain only non-negative integers")))
            .collect::<Result<Vec<u64>, _>>()?;
        Prompt::from_ids(model, &ids, echo).map_err(|e| names.refusal(e))
    };
    let from_text = |s: &str| Prompt::from_text(ctx, model, s, true, echo);
    let prompts = match raw {
        Value::String(s) => vec![from_text(s)?],
        Value::Array(items) if items.is_empty() => return Err(bad("'prompt' must not be empty")),
        Value::Array(items) if items.len() > limits::prompts_per_request_max => {
            return Err(bad(&format!("at most {} prompts per request", limits::prompts_per_request_max)))
        }
        Value::Array(items) => match &items[0] {
            Value::Number(_) => vec![from_ids(items)?],
            Value::String(_) => items
                .iter()
                .map(|v| {
                    v.as_str()
                        .ok_or_else(|| bad("a list prompt must be all strings or all token-id lists"))
                        .and_then(from_text)
                })
                .collect::<Result<_, _>>()?,
            Value::Array(_) => items
                .iter()
                .map(|v| {
                    v.as_array()
                        .ok_or_else(|| bad("a list prompt must be all strings or all token-id lists"))
                        .and_then(|a| from_ids(a))
                })
                .collect::<Result<_, _>>()?,
            _ => return Err(bad("'prompt' must be a string, a list of strings, or token ids")),
        },
        _ => return Err(bad("'prompt' must be a string, a list of strings, or token ids")),
    };
    Ok(prompts)
}
