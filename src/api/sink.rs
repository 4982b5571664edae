//! An API's end of a generation: the pipeline's events rendered by the endpoint's `Format`
//! and written to the client, as SSE (one HTTP chunk per batch; `data:` lines, named with an
//! `event:` line where the API names its events; an error as one more event) or as one JSON
//! body; and the steps every generation endpoint takes around the pipeline (admission,
//! refusals, the run). What differs between APIs is only the `Format`.

use std::ops::AsyncFnOnce;
use std::rc::Rc;
use std::time::Instant;

use crate::error::ApiError;
use crate::http::response::Responder;
use crate::metrics::{Endpoint, ErrorType};
use crate::pipeline::events::{Collected, Collector, Event, Usage};
use crate::pipeline::generate;
use crate::pipeline::plan::Generation;
use crate::pipeline::sink::{Gone, Sink};
use crate::shard::ShardCtx;

/// SSE events rendered since the last write.
#[derive(Debug, Default)]
pub struct SseOut {
    events: Vec<(Option<&'static str>, String)>,
}

impl SseOut {
    /// A `data:` event (OpenAI chat and completions chunks).
    pub fn push(&mut self, data: String) {
        self.events.push((None, data));
    }

    /// An `event: <name>` + `data:` event (Anthropic's events, Responses' typed events).
    pub fn push_named(&mut self, name: &'static str, data: String) {
        self.events.push((Some(name), data));
    }

    pub fn clear(&mut self) {
        self.events.clear();
    }

    /// The events, in order.
    pub fn drain(&mut self) -> impl Iterator<Item = (Option<&'static str>, String)> + '_ {
        self.events.drain(..)
    }
}

/// How an endpoint renders events, errors and the end of its responses.
#[allow(async_fn_in_trait)]
pub trait Format {
    /// The SSE events of one event of a streamed response; some events have none.
    fn stream(&mut self, event: &Event, out: &mut SseOut);

    /// What ends a stream after its last event (chat: `data: [DONE]`).
    fn end_stream(&mut self, out: &mut SseOut);

    /// The body of a one-shot response.
    fn body(&mut self, choices: &[Collected], usage: &Usage) -> String;

    /// An error from below the adapter, named the way this endpoint names its fields.
    fn client_error(&self, e: &ApiError) -> ApiError {
        e.clone()
    }

    /// What a failure adds to a stream that already began (then the stream ends).
    fn stream_error(&mut self, e: &ApiError, out: &mut SseOut);

    /// Runs once the generation is complete, before its end is written (a stored response is
    /// saved here); an error is answered instead of the end.
    async fn finish(&mut self) -> Result<(), ApiError> {
        Ok(())
    }
}

/// A generation's events, written to an HTTP client.
pub struct HttpSink<'r, 'c, F> {
    r: &'r mut Responder<'c>,
    format: F,
    /// Rendered since the last write.
    pending: SseOut,
    /// One-shot responses collect the events; streamed ones render them as they come.
    collector: Option<Collector>,
}

impl<'r, 'c, F: Format> HttpSink<'r, 'c, F> {
    pub fn new(r: &'r mut Responder<'c>, format: F) -> Self {
        HttpSink { r, format, pending: SseOut::default(), collector: None }
    }

    fn push_pending(&mut self) {
        for (name, data) in self.pending.events.drain(..) {
            self.r.push_sse(name, data.as_bytes());
        }
    }
}

impl<F: Format> Sink for HttpSink<'_, '_, F> {
    async fn open(&mut self, streaming: bool) -> Result<(), Gone> {
        if !streaming {
            self.collector = Some(Collector::default());
            return Ok(());
        }
        self.r.start_sse().await.map_err(|_| Gone)
    }

    fn event(&mut self, event: Event) {
        match &mut self.collector {
            Some(c) => c.add(event),
            None => self.format.stream(&event, &mut self.pending),
        }
    }

    async fn flush(&mut self) -> Result<(), Gone> {
        self.push_pending();
        self.r.flush().await.map_err(|_| Gone)
    }

    async fn keepalive(&mut self) -> Result<(), Gone> {
        self.r.push_sse_comment("keepalive");
        self.r.flush().await.map_err(|_| Gone)
    }

    async fn close(&mut self) {
        match self.collector.take() {
            Some(c) => {
                let body = self.format.body(&c.choices, &c.usage);
                let _ = match self.format.finish().await {
                    Ok(()) => self.r.send_json(200, body.as_bytes()).await,
                    Err(e) => self.r.send_error(&e).await,
                };
            }
            None => {
                match self.format.finish().await {
                    Ok(()) => self.format.end_stream(&mut self.pending),
                    Err(e) => self.format.stream_error(&e, &mut self.pending),
                }
                self.push_pending();
                let _ = self.r.end_sse().await;
            }
        }
    }

    async fn fail(&mut self, error: &ApiError) {
        let e = self.format.client_error(error);
        if !self.r.has_started() {
            let _ = self.r.send_error(&e).await;
            return;
        }
        self.format.stream_error(&e, &mut self.pending);
        self.push_pending();
        let _ = self.r.end_sse().await;
    }
}

/// A generation endpoint's request: the admission slot first (a refusal is answered here),
/// then `prepare` (the body → a planned generation and its format), then the run.
pub async fn serve<F: Format, P>(ctx: &Rc<ShardCtx>, endpoint: Endpoint, r: &mut Responder<'_>, prepare: P)
where
    P: AsyncFnOnce(Instant) -> Result<(Generation, F), ApiError>,
{
    let started = Instant::now();
    let _permit = match ctx.admit(endpoint).await {
        Ok(permit) => permit,
        Err(e) => {
            let _ = r.send_error(&e).await;
            return;
        }
    };
    match prepare(started).await {
        Ok((g, format)) => {
            let gone = r.gone();
            generate::run(g, &mut HttpSink::new(r, format), gone).await;
        }
        Err(e) => {
            ctx.metrics().of(ctx.shared.mode_before_dispatch()).error(endpoint, ErrorType::of(&e));
            tracing::info!("{} rejected: {}", endpoint.label(), e.message);
            let _ = r.send_error(&e).await;
        }
    }
}
