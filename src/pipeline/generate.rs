//! Running a generation: submit one engine request per (prompt, sample), merge their events,
//! and write either an SSE stream or one JSON body. Every exit path leaves no request running
//! on the engine (dropping a `Submission` aborts it) and every stream ends with `[DONE]`.

use std::future::poll_fn;
use std::rc::Rc;
use std::task::Poll;

use super::choice::{ChoiceState, TokenLogprob};
use super::params::RequestParams;
use super::parse::{OutputParser, ParseSpec, ParsedDelta};
use super::retry::Retry;
use crate::engine::slot::SlotEvent;
use crate::engine::zmq::connection::{EngineLink, Submission, SubmitError};
use crate::engine::EngineRequest;
use crate::error::ApiError;
use crate::http::response::Responder;
use crate::metrics::{Endpoint, ErrorType};
use crate::shard::ShardCtx;
use shardgate_text::ModelAssets;
use shardgate_util::ids::engine_request_id;
use std::time::Instant;

/// One prompt to generate from.
pub struct Prompt {
    pub token_ids: Rc<[u32]>,
    /// The prompt text, for completions `echo`.
    pub text: Option<String>,
}

/// Token accounting for `usage`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
}

/// How an API renders the pipeline's events (chat and completions implement it).
pub trait Format {
    /// Payloads that open a choice's stream (chat's role chunk, an echoed prompt); may push
    /// nothing.
    fn stream_open(&self, out: &mut Vec<String>, choice: u32, prompt: &Prompt);
    /// A delta of a choice's output (with its tokens' logprobs when requested).
    fn stream_delta(
        &self,
        out: &mut Vec<String>,
        choice: &ChoiceState,
        delta: &ParsedDelta,
        logprobs: &[TokenLogprob],
        usage: Option<&Usage>,
    );
    /// The finishing chunk of a finished choice.
    fn stream_finish(&self, out: &mut Vec<String>, choice: &ChoiceState, usage: Option<&Usage>);
    /// The final usage-only chunk.
    fn stream_usage(&self, out: &mut Vec<String>, usage: &Usage);
    /// The complete non-streamed response.
    fn full(&self, choices: &[ChoiceState], prompts: &[Prompt], usage: &Usage) -> String;
}

/// Everything `run` needs.
pub struct Generation {
    pub ctx: Rc<ShardCtx>,
    pub endpoint: Endpoint,
    /// When the request arrived (TTFT and duration are measured from here).
    pub started: Instant,
    pub response_id: String,
    pub model: std::sync::Arc<ModelAssets>,
    pub link: Rc<EngineLink>,
    pub prompts: Vec<Prompt>,
    pub params: RequestParams,
    /// The chat parse stage (inactive for completions).
    pub parse: ParseSpec,
}

/// Waits for an admission slot; on refusal answers the client (429/503) and returns `None`.
pub async fn admit(ctx: &ShardCtx, endpoint: Endpoint, r: &mut Responder<'_>) -> Option<super::admission::Permit> {
    match super::admission::acquire(&ctx.shared.admission, &ctx.admission_waiters, ctx.index).await {
        Ok(permit) => Some(permit),
        Err(e) => {
            ctx.metrics().error(endpoint, ErrorType::of(&e));
            tracing::warn!("shard {}: request refused by admission: {}", ctx.index, e.message);
            let _ = r.send_error(&e).await;
            None
        }
    }
}

pub async fn run(g: Generation, format: &dyn Format, r: &mut Responder<'_>) {
    let metrics = g.ctx.metrics();
    metrics.request(g.endpoint, g.params.stream);
    let mut states = Vec::new();
    let mut subs: Vec<Option<Submission>> = Vec::new();
    let mut retry = Retry::new(g.link.clone());
    if let Err(e) = retry.submit(&g, &mut states, &mut subs).await {
        metrics.error(g.endpoint, ErrorType::BackendError);
        let _ = r.send_error(&e).await;
        return;
    }
    let prompt_tokens: u64 = g.prompts.iter().map(|p| p.token_ids.len() as u64).sum();
    let outcome = if g.params.stream {
        stream(&g, format, r, states, subs, prompt_tokens, &mut retry).await
    } else {
        collect(&g, format, r, states, subs, prompt_tokens, &mut retry).await
    };
    match outcome {
        Outcome::Done { completion_tokens, first_token, last_token, gateway_ttft } => {
            metrics.tokens(g.endpoint, prompt_tokens, completion_tokens);
            metrics.duration[g.endpoint as usize].observe(g.started.elapsed().as_secs_f64());
            if let (Some(first), Some(last)) = (first_token, last_token) {
                metrics.ttft[g.endpoint as usize].observe((first - g.started).as_secs_f64());
                if let Some(own) = gateway_ttft {
                    metrics.gateway_ttft[g.endpoint as usize].observe(own.as_secs_f64());
                }
                if completion_tokens > 1 {
                    metrics.tpot[g.endpoint as usize]
                        .observe((last - first).as_secs_f64() / (completion_tokens - 1) as f64);
                }
            }
        }
        Outcome::Failed => metrics.error(g.endpoint, ErrorType::BackendError),
        Outcome::ClientGone => {}
    }
}

/// How a generation ended, for metrics.
enum Outcome {
    Done {
        completion_tokens: u64,
        first_token: Option<Instant>,
        last_token: Option<Instant>,
        /// Of the time to first token, the gateway's own part (streaming only).
        gateway_ttft: Option<std::time::Duration>,
    },
    Failed,
    ClientGone,
}

/// Submits every sample of every prompt on `link` (the generation's, or `retry`'s choice).
pub(super) async fn submit_all(
    g: &Generation,
    link: &Rc<EngineLink>,
    states: &mut Vec<ChoiceState>,
    subs: &mut Vec<Option<Submission>>,
) -> Result<(), SubmitError> {
    let n = g.params.n;
    let max_model_len = link.max_model_len();
    let arrival_time = shardgate_util::time::unix_time_f64();
    for (p, prompt) in g.prompts.iter().enumerate() {
        let mut sampling = g.params.sampling.clone();
        sampling.max_tokens =
            super::params::resolve_max_tokens(g.params.max_tokens_requested, max_model_len, prompt.token_ids.len());
        for i in 0..n {
            let index = p as u32 * n + i;
            let mut s = sampling.clone();
            // n samples with an explicit seed: seed + i keeps them distinct and reproducible.
            s.seed = sampling.seed.map(|seed| seed.wrapping_add(i as i64));
            let req = EngineRequest {
                request_id: engine_request_id(&g.response_id, index, g.ctx.index),
                prompt_token_ids: prompt.token_ids.clone(),
                sampling: s,
                arrival_time,
                cache_salt: g.params.cache_salt.clone(),
                priority: g.params.priority,
            };
            let mut state = ChoiceState::new(index, &g.model.tokenizer, &prompt.token_ids, &g.params.output);
            if g.parse.is_active() {
                state.parser = Some(OutputParser::new(&g.parse)?);
            }
            let sub = link.submit(&req, g.model.is_moe).await.map_err(|mut e| {
                // Completions ask for top logprobs with `logprobs`.
                if let SubmitError::Refused(e) = &mut e {
                    if g.endpoint == Endpoint::Completions && e.param.as_deref() == Some("top_logprobs") {
                        e.param = Some("logprobs".into());
                    }
                }
                e
            })?;
            states.push(state);
            subs.push(Some(sub));
        }
    }
    Ok(())
}

/// The next event from any live submission, rotating the starting point for fairness.
async fn next_any(subs: &[Option<Submission>], start: &mut usize) -> (usize, SlotEvent) {
    poll_fn(|cx| {
        let n = subs.len();
        for k in 0..n {
            let i = (*start + k) % n;
            if let Some(sub) = &subs[i] {
                if let Poll::Ready(ev) = sub.slot().poll_next(cx) {
                    *start = i + 1;
                    return Poll::Ready((i, ev));
                }
            }
        }
        Poll::Pending
    })
    .await
}

/// The next queued event without waiting.
fn try_next_any(subs: &[Option<Submission>]) -> Option<(usize, SlotEvent)> {
    subs.iter().enumerate().find_map(|(i, s)| s.as_ref().and_then(|s| s.slot().try_next()).map(|ev| (i, ev)))
}

/// What applying an event meant for the response as a whole.
enum Step {
    Continue,
    Failed(ApiError),
    /// The engine failed before any output: send the generation elsewhere (`retry`).
    Resend(crate::error::EngineFault),
}

/// Applies one event to its choice; drops the submission once the choice is finished (a stop
/// string match aborts the still-running request on the engine).
fn apply(
    g: &Generation,
    retry: &mut Retry,
    states: &mut [ChoiceState],
    subs: &mut [Option<Submission>],
    i: usize,
    ev: SlotEvent,
) -> Step {
    match ev {
        SlotEvent::Fault(f) if retry.allows(&f) => Step::Resend(f),
        SlotEvent::Fault(f) => {
            tracing::warn!("request {} failed: {f}", g.response_id);
            Step::Failed(f.to_api_error())
        }
        SlotEvent::Tokens(ev) => {
            retry.saw_output();
            let applied = states[i].apply(&g.model.tokenizer, &g.params.output, ev);
            if let Some(e) = applied.error {
                tracing::warn!("request {}: engine error: {e}", g.response_id);
                return Step::Failed(
                    ApiError::internal(format!("the engine failed the request: {e}")).with_code("engine_error"),
                );
            }
            if applied.finished {
                subs[i] = None;
            }
            Step::Continue
        }
    }
}

fn usage_of(states: &[ChoiceState], prompt_tokens: u64) -> Usage {
    Usage {
        prompt_tokens,
        completion_tokens: states.iter().map(|s| s.token_ids.len() as u64).sum(),
        cached_tokens: states.iter().filter_map(|s| s.cached_tokens).max().unwrap_or(0) as u64,
    }
}

async fn collect(
    g: &Generation,
    format: &dyn Format,
    r: &mut Responder<'_>,
    mut states: Vec<ChoiceState>,
    mut subs: Vec<Option<Submission>>,
    prompt_tokens: u64,
    retry: &mut Retry,
) -> Outcome {
    let watch = r.watch();
    let gone = crate::http::response::client_gone(watch);
    let mut gone = std::pin::pin!(gone);
    let mut start = 0;
    while subs.iter().any(Option::is_some) {
        let (i, ev) = monoio::select! {
            next = next_any(&subs, &mut start) => next,
            _ = &mut gone => {
                tracing::info!("request {}: client disconnected; aborting", g.response_id);
                return Outcome::ClientGone;
            }
        };
        let step = match apply(g, retry, &mut states, &mut subs, i, ev) {
            Step::Resend(f) => {
                retry.resend(g, f, &mut states, &mut subs).await.map_or_else(Step::Failed, |()| Step::Continue)
            }
            step => step,
        };
        if let Step::Failed(e) = step {
            drop(subs);
            let _ = r.send_error(&e).await;
            return Outcome::Failed;
        }
    }
    for s in &mut states {
        // One-shot through the parse stage: streamed and one-shot parsing agree.
        s.take_parsed_delta(&g.params.output);
    }
    let usage = usage_of(&states, prompt_tokens);
    let body = format.full(&states, &g.prompts, &usage);
    let _ = r.send_json(200, body.as_bytes()).await;
    Outcome::Done {
        completion_tokens: usage.completion_tokens,
        first_token: None,
        last_token: None,
        gateway_ttft: None,
    }
}

async fn stream(
    g: &Generation,
    format: &dyn Format,
    r: &mut Responder<'_>,
    mut states: Vec<ChoiceState>,
    mut subs: Vec<Option<Submission>>,
    prompt_tokens: u64,
    retry: &mut Retry,
) -> Outcome {
    // The requests were submitted just before this call: arrival to here is the gateway's part
    // of the time to first token before the engine.
    let submitted = Instant::now();
    let opts = &g.params.output;
    let continuous = g.params.include_usage && g.params.continuous_usage_stats;
    let mut payloads: Vec<String> = Vec::new();
    let n = g.params.n.max(1);
    for s in &states {
        format.stream_open(&mut payloads, s.index, &g.prompts[(s.index / n) as usize]);
    }
    if r.start_sse().await.is_err() || emit(r, &mut payloads).await.is_err() {
        return Outcome::ClientGone;
    }
    let (mut first_token, mut last_token) = (None, None);
    // The gateway's own part of the time to first token: arrival to submission, plus the
    // first output's arrival from the engine to its chunk written.
    let (mut first_output_at, mut gateway_ttft) = (None, None);
    let watch = r.watch();
    let gone = crate::http::response::client_gone(watch);
    let mut gone = std::pin::pin!(gone);
    let mut start = 0;
    let keepalive = std::time::Duration::from_secs(crate::limits::sse_keepalive_interval_s);
    // One timer for the whole stream, not one per chunk: when it fires early (a token or a
    // comment went out since), it is moved to a keep-alive interval after that.
    let mut last_comment = Instant::now();
    let mut silence = std::pin::pin!(monoio::time::sleep(keepalive));
    while subs.iter().any(Option::is_some) {
        let first = monoio::select! {
            next = next_any(&subs, &mut start) => next,
            _ = &mut gone => {
                tracing::info!("request {}: client disconnected mid-stream; aborting", g.response_id);
                return Outcome::ClientGone;
            }
            _ = &mut silence => {
                let due = last_token.map_or(last_comment, |t: Instant| t.max(last_comment)) + keepalive;
                if Instant::now() < due {
                    silence.as_mut().reset(due.into());
                    continue;
                }
                // Waiting for a first token (a long prefill, a queue) or a stalled engine:
                // proxies and clients drop connections that stay silent for 30-60 s.
                last_comment = Instant::now();
                silence.as_mut().reset((last_comment + keepalive).into());
                r.push_sse_comment("keepalive");
                if r.flush().await.is_err() {
                    tracing::info!("request {}: client went away while waiting; aborting", g.response_id);
                    return Outcome::ClientGone;
                }
                continue;
            }
        };
        // Everything already queued goes out in the same write.
        let mut next = Some(first);
        while let Some((i, ev)) = next {
            if first_output_at.is_none() {
                first_output_at = subs[i].as_ref().and_then(|s| s.slot().first_event_at());
            }
            let step = match apply(g, retry, &mut states, &mut subs, i, ev) {
                Step::Resend(f) => {
                    first_output_at = None;
                    retry.resend(g, f, &mut states, &mut subs).await.map_or_else(Step::Failed, |()| Step::Continue)
                }
                step => step,
            };
            if let Step::Failed(e) = step {
                drop(std::mem::take(&mut subs));
                fail_stream(r, &mut payloads, &e).await;
                return Outcome::Failed;
            }
            let usage = continuous.then(|| usage_of(&states, prompt_tokens));
            let state = &mut states[i];
            let logprobs = std::mem::take(&mut state.pending_logprobs);
            let delta = state.take_parsed_delta(opts);
            if !delta.is_empty() {
                let now = Instant::now();
                first_token.get_or_insert(now);
                last_token = Some(now);
            }
            if !delta.is_empty() || !logprobs.is_empty() {
                format.stream_delta(&mut payloads, &states[i], &delta, &logprobs, usage.as_ref());
            }
            if states[i].is_finished() {
                format.stream_finish(&mut payloads, &states[i], usage.as_ref());
            }
            next = try_next_any(&subs);
        }
        if emit(r, &mut payloads).await.is_err() {
            tracing::info!("request {}: client went away mid-stream; aborting", g.response_id);
            return Outcome::ClientGone;
        }
        if let (None, Some(_), Some(arrived)) = (gateway_ttft, first_token, first_output_at) {
            // The first token's chunk is written: the clock is read once per stream here.
            gateway_ttft = Some((submitted - g.started) + arrived.elapsed());
        }
    }
    if g.params.include_usage {
        format.stream_usage(&mut payloads, &usage_of(&states, prompt_tokens));
    }
    for p in payloads.drain(..) {
        r.push_sse(p.as_bytes());
    }
    let _ = r.finish_sse().await;
    let completion_tokens = usage_of(&states, prompt_tokens).completion_tokens;
    Outcome::Done { completion_tokens, first_token, last_token, gateway_ttft }
}

async fn emit(r: &mut Responder<'_>, payloads: &mut Vec<String>) -> Result<(), crate::http::response::ClientGone> {
    for p in payloads.drain(..) {
        r.push_sse(p.as_bytes());
    }
    r.flush().await
}

/// A failure after the stream started: one error event, then `[DONE]`.
async fn fail_stream(r: &mut Responder<'_>, payloads: &mut Vec<String>, e: &ApiError) {
    for p in payloads.drain(..) {
        r.push_sse(p.as_bytes());
    }
    r.push_sse(e.to_json().as_bytes());
    let _ = r.finish_sse().await;
}
