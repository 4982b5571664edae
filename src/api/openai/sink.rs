//! The OpenAI endpoints' end of a generation: the pipeline's events rendered by the endpoint's
//! `Format` and written to the client, as SSE (`data: <chunk>`, one HTTP chunk per batch,
//! `[DONE]` last, an error as one more event) or as one JSON body; and the steps every
//! generation endpoint takes around the pipeline (admission, refusals, the run).

use std::rc::Rc;
use std::time::Instant;

use super::invalid::Names;
use crate::error::ApiError;
use crate::http::response::{client_gone, Responder};
use crate::metrics::{Endpoint, ErrorType};
use crate::pipeline::events::{Collected, Collector, Event, Usage};
use crate::pipeline::generate;
use crate::pipeline::plan::Generation;
use crate::pipeline::sink::{Gone, Sink};
use crate::shard::ShardCtx;

/// How an endpoint renders events (chat and completions).
pub trait Format {
    /// The SSE payloads of one event of a streamed response (JSON objects), appended to `out`;
    /// some events have none.
    fn stream(&mut self, event: &Event, out: &mut Vec<String>);

    /// The body of a one-shot response.
    fn body(&self, choices: &[Collected], usage: &Usage) -> String;
}

/// A generation's events, written to an HTTP client.
pub struct OpenAiSink<'r, 'c, F> {
    r: &'r mut Responder<'c>,
    format: F,
    names: Names,
    /// Payloads rendered since the last write.
    pending: Vec<String>,
    /// One-shot responses collect the events; streamed ones render them as they come.
    collector: Option<Collector>,
}

impl<'r, 'c, F: Format> OpenAiSink<'r, 'c, F> {
    pub fn new(r: &'r mut Responder<'c>, format: F, names: Names) -> Self {
        OpenAiSink { r, format, names, pending: Vec::with_capacity(4), collector: None }
    }

    fn push_pending(&mut self) {
        for p in self.pending.drain(..) {
            self.r.push_sse(p.as_bytes());
        }
    }
}

impl<F: Format> Sink for OpenAiSink<'_, '_, F> {
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
                let _ = self.r.send_json(200, body.as_bytes()).await;
            }
            None => {
                self.push_pending();
                let _ = self.r.finish_sse().await;
            }
        }
    }

    async fn fail(&mut self, error: &ApiError) {
        let e = self.names.engine_error(error);
        if !self.r.has_started() {
            let _ = self.r.send_error(&e).await;
            return;
        }
        // A failure after the stream started: one error event, then `[DONE]`.
        self.push_pending();
        self.r.push_sse(e.to_json().as_bytes());
        let _ = self.r.finish_sse().await;
    }
}

/// A generation endpoint's request: the admission slot first (a refusal is answered here),
/// then `prepare` (the body → a planned generation and its format), then the run.
pub async fn serve<F: Format>(
    ctx: &Rc<ShardCtx>,
    endpoint: Endpoint,
    r: &mut Responder<'_>,
    prepare: impl FnOnce(Instant) -> Result<(Generation, F, Names), ApiError>,
) {
    let started = Instant::now();
    let _permit = match ctx.admit(endpoint).await {
        Ok(permit) => permit,
        Err(e) => {
            let _ = r.send_error(&e).await;
            return;
        }
    };
    match prepare(started) {
        Ok((g, format, names)) => {
            let gone = client_gone(r.watch());
            generate::run(g, &mut OpenAiSink::new(r, format, names), gone).await;
        }
        Err(e) => {
            ctx.metrics().error(endpoint, ErrorType::of(&e));
            tracing::info!("{} rejected: {}", label(endpoint), e.message);
            let _ = r.send_error(&e).await;
        }
    }
}

/// An endpoint's requests, in log lines.
fn label(endpoint: Endpoint) -> &'static str {
    match endpoint {
        Endpoint::Chat => "chat completion",
        Endpoint::Completions => "completion",
    }
}
