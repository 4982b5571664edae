//! `POST /v1/completions`: prompts as a string, a list of strings, token ids, or a list of
//! token-id lists; `len(prompts) × n` choices.

use std::rc::Rc;

use serde_json::Value;

use super::render::{next_text_offset, push_completion_logprobs, push_header, push_stop_reason, push_usage};
use crate::api::fields::Body;
use crate::error::ApiError;
use crate::http::response::Responder;
use crate::limits;
use crate::pipeline::choice::{ChoiceState, Finish, TokenLogprob};
use crate::pipeline::generate::Generation;
use crate::pipeline::params::{self, Endpoint};
use crate::pipeline::parse::{ParseSpec, ParsedDelta};
use crate::pipeline::{generate, Format, Prompt, Usage};
use crate::shard::ShardCtx;
use shardgate_text::ModelAssets;
use shardgate_util::json::{push_int, push_str};

pub async fn handle(ctx: &Rc<ShardCtx>, body: &[u8], r: &mut Responder<'_>) {
    let started = std::time::Instant::now();
    let Some(_permit) = generate::admit(ctx, crate::metrics::Endpoint::Completions, r).await else { return };
    match prepare(ctx, body, started) {
        Ok((g, format)) => generate::run(g, &format, r).await,
        Err(e) => {
            ctx.metrics().error(crate::metrics::Endpoint::Completions, crate::metrics::ErrorType::of(&e));
            tracing::info!("completion rejected: {}", e.message);
            let _ = r.send_error(&e).await;
        }
    }
}

fn prepare(
    ctx: &Rc<ShardCtx>,
    body: &[u8],
    started: std::time::Instant,
) -> Result<(Generation, CompletionFormat), ApiError> {
    let body = Body::parse(body)?;
    let f = body.fields();
    let model = super::models::resolve(ctx, &f)?;
    let params = params::parse(&f, Endpoint::Completion, &model)?;
    let raw = f.get("prompt").ok_or_else(|| ApiError::invalid_param("prompt", "'prompt' is required"))?;
    let mut prompts = parse_prompts(ctx, raw, &model, params.output.echo)?;
    let link = ctx
        .pick_link(prompts.first().map_or(&[][..], |p| &p.token_ids))
        .ok_or_else(|| ApiError::unavailable("no healthy worker is available"))?;
    if prompts.len() * params.n as usize > limits::choices_per_request_max as usize * 8 {
        return Err(ApiError::invalid_param("n", "too many choices (prompts × n) in one request"));
    }
    params::check_max_tokens(&params, link.max_model_len())?;
    for p in &mut prompts {
        params::check_prompt_len(p.token_ids.len(), link.max_model_len(), "prompt")?;
    }
    let response_id = shardgate_util::ids::response_id("cmpl");
    let format = CompletionFormat {
        id: response_id.clone(),
        created: shardgate_util::time::unix_time_s(),
        model: model.served_name.clone(),
        usage_field: params.include_usage,
        logprobs: params.output.logprobs.map(|k| k as usize),
        echo: params.output.echo,
        n: params.n,
        prompt_texts: prompts.iter().map(|p| p.text.clone().unwrap_or_default()).collect(),
        streams: std::cell::RefCell::new(vec![StreamPosition::default(); prompts.len() * params.n as usize]),
    };
    let parse = ParseSpec::default();
    Ok((
        Generation {
            ctx: ctx.clone(),
            endpoint: crate::metrics::Endpoint::Completions,
            started,
            response_id,
            model,
            link,
            prompts,
            params,
            parse,
        },
        format,
    ))
}

/// Token-id prompts are validated against the vocabulary: an out-of-range id reaching the
/// engine's embedding lookup would take the engine down.
fn parse_prompts(ctx: &ShardCtx, raw: &Value, model: &ModelAssets, echo: bool) -> Result<Vec<Prompt>, ApiError> {
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
        let ids = ctx.encode(model, s, true).map_err(ApiError::internal)?;
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
    /// `logprobs` (top count) when asked for.
    logprobs: Option<usize>,
    echo: bool,
    n: u32,
    /// Prompt texts, for echo.
    prompt_texts: Vec<String>,
    /// Per choice: whether the echo went out, and the next logprobs text offset.
    streams: std::cell::RefCell<Vec<StreamPosition>>,
}

#[derive(Debug, Clone, Copy, Default)]
struct StreamPosition {
    echoed: bool,
    text_offset: usize,
}

impl CompletionFormat {
    fn chunk(
        &self,
        choice: u32,
        text: &str,
        logprobs: Option<&str>,
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
        s.push_str(logprobs.unwrap_or("null"));
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

impl CompletionFormat {
    /// The text and logprobs a stream chunk carries: the first one of a choice also carries the
    /// echoed prompt (vLLM sends prompt and first output together). Advances the choice's
    /// text offset.
    fn stream_piece(&self, choice: &ChoiceState, text: &str, logprobs: &[TokenLogprob]) -> (String, Option<String>) {
        let mut streams = self.streams.borrow_mut();
        let st = &mut streams[choice.index as usize];
        let (text, rows): (String, Vec<TokenLogprob>) = if self.echo && !st.echoed {
            st.echoed = true;
            let prompt = self.prompt_texts[(choice.index / self.n.max(1)) as usize].as_str();
            let rows = choice.prompt_logprobs.iter().chain(logprobs).cloned().collect();
            (format!("{prompt}{text}"), rows)
        } else {
            (text.to_string(), logprobs.to_vec())
        };
        let lp = self.logprobs.map(|top| {
            let mut s = String::new();
            push_completion_logprobs(&mut s, &rows, st.text_offset, top);
            st.text_offset = next_text_offset(&rows, st.text_offset);
            s
        });
        (text, lp)
    }
}

impl Format for CompletionFormat {
    fn stream_open(&self, _out: &mut Vec<String>, _choice: u32, _prompt: &Prompt) {}

    fn stream_delta(
        &self,
        out: &mut Vec<String>,
        choice: &ChoiceState,
        delta: &ParsedDelta,
        logprobs: &[TokenLogprob],
        usage: Option<&Usage>,
    ) {
        let (text, lp) = self.stream_piece(choice, &delta.content, logprobs);
        out.push(self.chunk(choice.index, &text, lp.as_deref(), None, usage));
    }

    fn stream_finish(&self, out: &mut Vec<String>, choice: &ChoiceState, usage: Option<&Usage>) {
        let (text, _) = self.stream_piece(choice, "", &[]);
        out.push(self.chunk(choice.index, &text, None, choice.finish.as_ref(), usage));
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
            match self.logprobs {
                Some(top) => {
                    let rows: Vec<TokenLogprob> = if self.echo {
                        c.prompt_logprobs.iter().chain(&c.pending_logprobs).cloned().collect()
                    } else {
                        c.pending_logprobs.clone()
                    };
                    push_completion_logprobs(&mut s, &rows, 0, top)
                }
                None => s.push_str("null"),
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
