//! Running a generation: submit one engine request per (prompt, sample), merge their outputs,
//! and hand the adapter's sink the events, as they come (streamed) or once everything finished
//! (one-shot). Every exit path leaves no request running on the engine (dropping a
//! `Submission` aborts it), and every response is ended by the sink (`close` or `fail`) unless
//! the client went away.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use super::choice::ChoiceState;
use super::events::{Delta, Event, Finished, Usage};
use super::params::OutputOptions;
use super::plan::Generation;
use super::retry::Retry;
use super::sink::Sink;
use crate::engine::link::Submission;
use crate::engine::slot::SlotEvent;
use crate::engine::FinishReason;
use crate::error::{ApiError, EngineFault};
use crate::metrics::ErrorType;

/// Runs `g`, its events to `sink`; `gone` resolves when the client goes away (the generation
/// is then aborted).
pub async fn run<S: Sink>(g: Generation, sink: &mut S, gone: impl Future<Output = ()>) {
    // Counted under the mode of the first worker chosen, even if a retry moves the request.
    let metrics = g.ctx.metrics().of(g.link.mode());
    metrics.request(g.endpoint, g.params.stream);
    let mut states = Vec::new();
    let mut subs: Vec<Option<Submission>> = Vec::new();
    let mut retry = Retry::new(g.link.clone());
    if let Err(e) = retry.submit(&g, &mut states, &mut subs).await {
        metrics.error(g.endpoint, ErrorType::BackendError);
        sink.fail(&e).await;
        return;
    }
    let prompt_tokens: u64 = g.prompts.iter().map(|p| p.token_ids.len() as u64).sum();
    let run = Run { g: &g, states, subs, prompt_tokens, retry };
    let gone = std::pin::pin!(gone);
    let outcome = if g.params.stream {
        let submitted = Instant::now();
        stream(run, sink, gone, submitted).await
    } else {
        collect(run, sink, gone).await
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
        gateway_ttft: Option<Duration>,
    },
    Failed,
    ClientGone,
}

/// A submitted generation: its choices and their engine requests (`None` once finished).
struct Run<'g> {
    g: &'g Generation,
    states: Vec<ChoiceState>,
    subs: Vec<Option<Submission>>,
    prompt_tokens: u64,
    retry: Retry,
}

/// Why applying an engine event stopped the generation.
enum Stop {
    /// The engine failed before any output: send the generation to another worker (`retry`).
    Resend(EngineFault),
    /// The client's answer.
    Failed(ApiError),
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

impl Run<'_> {
    fn live(&self) -> bool {
        self.subs.iter().any(Option::is_some)
    }

    /// Applies one engine event to its choice; drops the submission once the choice is
    /// finished (a stop string match aborts the still-running request on the engine).
    fn apply(&mut self, i: usize, ev: SlotEvent) -> Result<(), Stop> {
        let g = self.g;
        match ev {
            SlotEvent::Tokens(ev) if ev.finish == Some(FinishReason::Error) => {
                let rank = self.subs[i].as_ref().map_or(0, Submission::rank);
                self.fault(EngineFault::request_failed(ev.error.as_ref(), rank))
            }
            SlotEvent::Fault(f) => self.fault(f),
            SlotEvent::Tokens(ev) => {
                self.retry.saw_output();
                let applied = self.states[i].apply(&g.model.tokenizer, &g.params.output, ev);
                if applied.finished {
                    self.subs[i] = None;
                }
                Ok(())
            }
        }
    }

    /// A resend when the retry rule allows it, else the client's answer.
    fn fault(&self, f: EngineFault) -> Result<(), Stop> {
        if self.retry.allows(&f) {
            return Err(Stop::Resend(f));
        }
        tracing::warn!("request {} failed: {f}", self.g.response_id);
        Err(Stop::Failed(f.to_api_error()))
    }

    /// After a `Stop`: the generation resent on another worker (`Ok`: it goes on), or the
    /// client's answer.
    async fn recover(&mut self, stop: Stop) -> Result<(), ApiError> {
        match stop {
            Stop::Resend(fault) => self.retry.resend(self.g, fault, &mut self.states, &mut self.subs).await,
            Stop::Failed(e) => Err(e),
        }
    }

    fn usage(&self) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.states.iter().map(|s| s.token_ids.len() as u64).sum(),
            cached_tokens: self.states.iter().filter_map(|s| s.cached_tokens).max().unwrap_or(0) as u64,
        }
    }
}

/// The events of what choice `i` produced since the last call: its prompt's logprobs, its new
/// output, its end. Returns whether there was new output.
fn choice_events<S: Sink>(sink: &mut S, state: &mut ChoiceState, opts: &OutputOptions, usage: Option<Usage>) -> bool {
    let choice = state.index;
    if !state.prompt_logprobs.is_empty() {
        sink.event(Event::PromptLogprobs { choice, rows: std::mem::take(&mut state.prompt_logprobs) });
    }
    let logprobs = std::mem::take(&mut state.pending_logprobs);
    let output = state.take_parsed_delta(opts);
    let produced = !output.is_empty();
    if produced || !logprobs.is_empty() {
        sink.event(Event::Delta(Delta { choice, output, logprobs, usage }));
    }
    if let Some(finish) = &state.finish {
        let tool_calls = state.ended_in_tool_calls();
        sink.event(Event::Finished(Finished { choice, finish: finish.clone(), tool_calls, usage }));
    }
    produced
}

async fn collect<S: Sink>(mut run: Run<'_>, sink: &mut S, mut gone: Pin<&mut impl Future<Output = ()>>) -> Outcome {
    let g = run.g;
    // Nothing is written before the end: opening a one-shot response cannot fail.
    let _ = sink.open(false).await;
    let mut start = 0;
    while run.live() {
        let (i, ev) = monoio::select! {
            next = next_any(&run.subs, &mut start) => next,
            _ = &mut gone => {
                tracing::info!("request {}: client disconnected; aborting", g.response_id);
                return Outcome::ClientGone;
            }
        };
        if let Err(stop) = run.apply(i, ev) {
            if let Err(e) = run.recover(stop).await {
                drop(std::mem::take(&mut run.subs));
                sink.fail(&e).await;
                return Outcome::Failed;
            }
        }
    }
    for state in &mut run.states {
        sink.event(Event::Start { choice: state.index });
        // One-shot through the parse stage: streamed and one-shot parsing agree.
        choice_events(sink, state, &g.params.output, None);
    }
    let usage = run.usage();
    sink.event(Event::Usage(usage));
    sink.close().await;
    Outcome::Done {
        completion_tokens: usage.completion_tokens,
        first_token: None,
        last_token: None,
        gateway_ttft: None,
    }
}

/// When the stream's outputs came, for metrics.
#[derive(Default)]
struct Timing {
    first_token: Option<Instant>,
    last_token: Option<Instant>,
    /// When the engine's first output reached the gateway.
    first_output_at: Option<Instant>,
    gateway_ttft: Option<Duration>,
}

async fn stream<S: Sink>(
    mut run: Run<'_>,
    sink: &mut S,
    mut gone: Pin<&mut impl Future<Output = ()>>,
    submitted: Instant,
) -> Outcome {
    let g = run.g;
    if sink.open(true).await.is_err() {
        return Outcome::ClientGone;
    }
    for s in &run.states {
        sink.event(Event::Start { choice: s.index });
    }
    if sink.flush().await.is_err() {
        return Outcome::ClientGone;
    }
    let mut t = Timing::default();
    let mut start = 0;
    let keepalive = Duration::from_secs(crate::limits::sse_keepalive_interval_s);
    // One timer for the whole stream, not one per chunk: when it fires early (a token or a
    // comment went out since), it is moved to a keep-alive interval after that.
    let mut last_comment = Instant::now();
    let mut silence = std::pin::pin!(monoio::time::sleep(keepalive));
    while run.live() {
        let first = monoio::select! {
            next = next_any(&run.subs, &mut start) => next,
            _ = &mut gone => {
                tracing::info!("request {}: client disconnected mid-stream; aborting", g.response_id);
                return Outcome::ClientGone;
            }
            _ = &mut silence => {
                let due = t.last_token.map_or(last_comment, |l: Instant| l.max(last_comment)) + keepalive;
                if Instant::now() < due {
                    silence.as_mut().reset(due.into());
                    continue;
                }
                // Waiting for a first token (a long prefill, a queue) or a stalled engine:
                // proxies and clients drop connections that stay silent for 30-60 s.
                last_comment = Instant::now();
                silence.as_mut().reset((last_comment + keepalive).into());
                if sink.keepalive().await.is_err() {
                    tracing::info!("request {}: client went away while waiting; aborting", g.response_id);
                    return Outcome::ClientGone;
                }
                continue;
            }
        };
        if let Err(stop) = stream_batch(&mut run, sink, first, &mut t) {
            // A resent generation's first output is the new worker's.
            t.first_output_at = None;
            if let Err(e) = run.recover(stop).await {
                drop(std::mem::take(&mut run.subs));
                sink.fail(&e).await;
                return Outcome::Failed;
            }
        }
        if sink.flush().await.is_err() {
            tracing::info!("request {}: client went away mid-stream; aborting", g.response_id);
            return Outcome::ClientGone;
        }
        if let (None, Some(_), Some(arrived)) = (t.gateway_ttft, t.first_token, t.first_output_at) {
            // The first token's chunk is written: the clock is read once per stream here.
            t.gateway_ttft = Some((submitted - g.started) + arrived.elapsed());
        }
    }
    let usage = run.usage();
    sink.event(Event::Usage(usage));
    sink.close().await;
    Outcome::Done {
        completion_tokens: usage.completion_tokens,
        first_token: t.first_token,
        last_token: t.last_token,
        gateway_ttft: t.gateway_ttft,
    }
}

/// Applies `first` and every event already queued behind it (they go out in the same write),
/// handing the sink the events of each.
fn stream_batch<S: Sink>(
    run: &mut Run<'_>,
    sink: &mut S,
    first: (usize, SlotEvent),
    t: &mut Timing,
) -> Result<(), Stop> {
    let g = run.g;
    let (opts, running_usage) = (&g.params.output, g.params.running_usage);
    let mut next = Some(first);
    while let Some((i, ev)) = next {
        if t.first_output_at.is_none() {
            t.first_output_at = run.subs[i].as_ref().and_then(|s| s.slot().first_event_at());
        }
        run.apply(i, ev)?;
        let usage = running_usage.then(|| run.usage());
        if choice_events(sink, &mut run.states[i], opts, usage) {
            let now = Instant::now();
            t.first_token.get_or_insert(now);
            t.last_token = Some(now);
        }
        next = try_next_any(&run.subs);
    }
    Ok(())
}
