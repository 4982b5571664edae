//! `POST /v1/completions`: prompts as a string, a list of strings, token ids, or a list of
//! token-id lists; `len(prompts) × n` choices.

use std::rc::Rc;

use serde_json::Value;

use super::render::{push_completion_logprobs, push_header, push_stop_reason, push_usage};
use crate::api::fields::Fields;
use crate::error::ApiError;
use crate::http::response::Responder;
use crate::limits;
use crate::pipeline::choice::{ChoiceState, Finish, TokenLogprob};
use crate::pipeline::generate::Generation;
use crate::pipeline::params::{self, Endpoint};
use crate::pipeline::parse::{ParseSpec, ParsedDelta};
use crate::pipeline::{generate, Format, Prompt, Usage};
use crate::shard::ShardCtx;
use crate::text::ModelAssets;
use crate::util::json::{push_int, push_str};

pub async fn handle(ctx: &Rc<ShardCtx>, body: &[u8], r: &mut Responder<'_>) {
    match prepare(ctx, body) {
        Ok((g, format)) => generate::run(g, &format, r).await,
        Err(e) => {
            tracing::info!("completion rejected: {}", e.message);
            let _ = r.send_error(&e).await;
        }
    }
}

fn prepare(ctx: &Rc<ShardCtx>, body: &[u8]) -> Result<(Generation, CompletionFormat), ApiError> {
    let v = Fields::parse_body(body)?;
    let f = Fields::new(&v);
    let model = super::models::resolve(ctx, &f)?;
    let params = params::parse(&f, Endpoint::Completion, &model)?;
    let raw = f.get("prompt").ok_or_else(|| ApiError::invalid_param("prompt", "'prompt' is required"))?;
    let link = ctx.pick_link().ok_or_else(|| ApiError::unavailable("no healthy worker is available"))?;
    let mut prompts = parse_prompts(raw, &model, params.output.echo)?;
    if prompts.len() * params.n as usize > limits::choices_per_request_max as usize * 8 {
        return Err(ApiError::invalid_param("n", "too many choices (prompts × n) in one request"));
    }
    for p in &mut prompts {
        params::check_prompt_len(p.token_ids.len(), link.max_model_len(), "prompt")?;
    }
    let response_id = crate::util::ids::response_id("cmpl");
    let format = CompletionFormat {
        id: response_id.clone(),
        created: crate::util::time::unix_time_s(),
        model: model.served_name.clone(),
        usage_field: params.include_usage,
        logprobs: params.output.logprobs.is_some(),
        echo: params.output.echo,
        n: params.n,
    };
    let parse = ParseSpec::default();
    Ok((Generation { shard: ctx.index, response_id, model, link, prompts, params, parse }, format))
}

/// Token-id prompts are validated against the vocabulary: an out-of-range id reaching the
/// engine's embedding lookup would take the engine down.
fn parse_prompts(raw: &Value, model: &ModelAssets, echo: bool) -> Result<Vec<Prompt>, ApiError> {
    let bad = |m: &str| ApiError::invalid_param("prompt", m.to_string());
    let from_ids = |ids: &[Value]| -> Result<Prompt, ApiError> {
        let mut out = Vec::with_capacity(ids.len());
        for v in ids {
            let id = v.as_u64().ok_or_else(|| bad("token-id prompts must contain only non-negative integers"))?;
            if id >= model.vocab_size as u64 {
                return Err(bad(&format!("Token id {id} is out of vocabulary (vocabulary size {})", model.vocab_size)));
            }
            out.push(id as u32);
        }
        let text = if echo { Some(model.tokenizer.decode(&out, false).map_err(ApiError::internal)?) } else { None };
        Ok(Prompt { token_ids: Rc::from(out), text })
    };
    let from_text = |s: &str| -> Result<Prompt, ApiError> {
        let ids = model.tokenizer.encode(s, true).map_err(ApiError::internal)?;
        Ok(Prompt { token_ids: Rc::from(ids), text: echo.then(|| s.to_string()) })
    };
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

pub struct CompletionFormat {
    id: String,
    created: u64,
    model: String,
    usage_field: bool,
    logprobs: bool,
    echo: bool,
    n: u32,
}

impl CompletionFormat {
    fn chunk(
        &self,
        choice: u32,
        text: &str,
        logprobs: Option<&[TokenLogprob]>,
        finish: Option<&Finish>,
        usage: Option<&Usage>,
    ) -> String {
        let mut s = String::with_capacity(192 + text.len());
        s.push('{');
        push_header(&mut s, &self.id, "text_completion", self.created, &self.model);
        s.push_str(",\"choices\":[{\"index\":");
        push_int(&mut s, choice);
        s.push_str(",\"text\":");
        push_str(&mut s, text);
        s.push_str(",\"logprobs\":");
        match logprobs {
            Some(rows) if self.logprobs => push_completion_logprobs(&mut s, rows, 0),
            _ => s.push_str("null"),
        }
        s.push_str(",\"finish_reason\":");
        match finish {
            Some(f) => push_str(&mut s, f.reason),
            None => s.push_str("null"),
        }
        s.push(',');
        push_stop_reason(&mut s, finish.and_then(|f| f.stop_reason.as_ref()));
        s.push_str("}]");
        if self.usage_field {
            s.push_str(",\"usage\":");
            match usage {
                Some(u) => push_usage(&mut s, u),
                None => s.push_str("null"),
            }
        }
        s.push('}');
        s
    }
}

impl Format for CompletionFormat {
    fn stream_open(&self, out: &mut Vec<String>, choice: u32, prompt: &Prompt) {
        if self.echo {
            if let Some(text) = &prompt.text {
                out.push(self.chunk(choice, text, None, None, None));
            }
        }
    }

    fn stream_delta(
        &self,
        out: &mut Vec<String>,
        choice: &ChoiceState,
        delta: &ParsedDelta,
        logprobs: &[TokenLogprob],
        usage: Option<&Usage>,
    ) {
        out.push(self.chunk(choice.index, &delta.content, Some(logprobs), None, usage));
    }

    fn stream_finish(&self, out: &mut Vec<String>, choice: &ChoiceState, usage: Option<&Usage>) {
        out.push(self.chunk(choice.index, "", None, choice.finish.as_ref(), usage));
    }

    fn stream_usage(&self, out: &mut Vec<String>, usage: &Usage) {
        let mut s = String::with_capacity(256);
        s.push('{');
        push_header(&mut s, &self.id, "text_completion", self.created, &self.model);
        s.push_str(",\"choices\":[],\"usage\":");
        push_usage(&mut s, usage);
        s.push('}');
        out.push(s);
    }

    fn full(&self, choices: &[ChoiceState], prompts: &[Prompt], usage: &Usage) -> String {
        let mut s = String::with_capacity(256 + choices.iter().map(|c| c.text.len() + 128).sum::<usize>());
        s.push('{');
        push_header(&mut s, &self.id, "text_completion", self.created, &self.model);
        s.push_str(",\"choices\":[");
        for (k, c) in choices.iter().enumerate() {
            if k > 0 {
                s.push(',');
            }
            let echoed =
                if self.echo { prompts[(c.index / self.n.max(1)) as usize].text.as_deref().unwrap_or("") } else { "" };
            s.push_str("{\"index\":");
            push_int(&mut s, c.index);
            s.push_str(",\"text\":");
            if echoed.is_empty() {
                push_str(&mut s, &c.text);
            } else {
                push_str(&mut s, &format!("{echoed}{}", c.text));
            }
            s.push_str(",\"logprobs\":");
            if self.logprobs {
                push_completion_logprobs(&mut s, &c.pending_logprobs, echoed.chars().count());
            } else {
                s.push_str("null");
            }
            s.push_str(",\"finish_reason\":");
            let finish = c.finish.as_ref();
            push_str(&mut s, finish.map_or("stop", |f| f.reason));
            s.push(',');
            push_stop_reason(&mut s, finish.and_then(|f| f.stop_reason.as_ref()));
            s.push('}');
        }
        s.push_str("],\"usage\":");
        push_usage(&mut s, usage);
        s.push('}');
        s
    }
}
