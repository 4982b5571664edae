//! The MCP tool loop of `/v1/responses`: the adapter drives the pipeline once per turn. The
//! servers' tools are listed first (a server that gives no list fails the request, naming
//! it) and offered as functions; after each generation, the calls to MCP tools are run on the
//! MCP thread, their outputs become `function_call` / `function_call_output` items after the
//! input, and the next generation starts. It ends when a generation calls no MCP tool, calls a
//! function tool or a tool that needs approval (those are the client's to answer), or the
//! request's `max_tool_calls` (capped by `--mcp-max-tool-calls`) is spent; a call beyond it
//! fails as an `mcp_call` item. A request that answers an approval request
//! (`mcp_approval_response`, `approval.rs`) first runs the calls it approved and tells the
//! model of those it denied, then generates.
//!
//! One response spans every turn: streamed, the events of each generation and of each call
//! go out as they happen under one `response.created` ... `response.completed`; one-shot,
//! each generation's output is collected and the object is written once at the end. Both give
//! the same items.

use std::rc::Rc;
use std::time::Instant;

use serde_json::Value;

use super::approval::{self, Answer};
use super::create::{read, Turns};
use super::format::ResponsesFormat;
use super::mcp_tools::{self, execution_error, McpFunction};
use super::object::{Item, Kind};
use crate::api::fields::Body;
use crate::api::sink::{Format, SseOut};
use crate::error::ApiError;
use crate::http::response::Responder;
use crate::metrics::{Endpoint, ErrorType};
use crate::pipeline::events::{Collector, Event};
use crate::pipeline::generate;
use crate::pipeline::plan::Generation;
use crate::pipeline::sink::{Gone, Sink};
use crate::shard::ShardCtx;

/// Whether the body names an MCP tool (the loop's requests).
pub fn wanted(body: &[u8]) -> bool {
    memchr::memmem::find(body, b"\"mcp\"").is_some()
        && Body::parse(body).is_ok_and(|b| {
            b.fields()
                .array("tools")
                .ok()
                .flatten()
                .is_some_and(|tools| tools.iter().any(|t| t.get("type").and_then(Value::as_str) == Some("mcp")))
        })
}

pub async fn handle(ctx: &Rc<ShardCtx>, body: &[u8], r: &mut Responder<'_>) {
    let started = Instant::now();
    let _permit = match ctx.admit(Endpoint::Responses).await {
        Ok(permit) => permit,
        Err(e) => {
            let _ = r.send_error(&e).await;
            return;
        }
    };
    let (first, run) = match prepare(ctx, body, started).await {
        Ok(prepared) => prepared,
        Err(e) => {
            ctx.metrics().of(ctx.shared.mode_before_dispatch()).error(Endpoint::Responses, ErrorType::of(&e));
            tracing::info!("responses rejected: {}", e.message);
            let _ = r.send_error(&e).await;
            return;
        }
    };
    run.go(r, first).await;
}

/// Everything before the first generation: the MCP entries read, the servers' tools listed,
/// the request read with them, and its first generation planned.
async fn prepare(ctx: &Rc<ShardCtx>, body: &[u8], started: Instant) -> Result<(Generation, Loop), ApiError> {
    let parsed = Body::parse(body)?;
    let f = parsed.fields();
    let servers = mcp_tools::read(&f, ctx.mcp().configured())?;
    let own: Vec<String> = f
        .array("tools")?
        .map(|t| t.iter().filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string)).collect())
        .unwrap_or_default();
    let asked = match f.i64("max_tool_calls")? {
        Some(n) if n < 0 => {
            return Err(ApiError::invalid_param("max_tool_calls", "'max_tool_calls' must be at least 0"))
        }
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        None => usize::MAX,
    };
    let listed = mcp_tools::list(ctx, &servers, &own).await?;
    let (mut turns, seed) = read(ctx, body, started, Some(&listed)).await?;
    let answers = turns.take_answers();
    let g = turns.generation(ctx, &[])?;
    let mut format = seed.format(&turns, &g);
    let mut events = SseOut::default();
    format.start(&mut events);
    for (label, tools) in listed.listings {
        format.list_tools(label, tools, &mut events);
    }
    let run = Loop {
        ctx: ctx.clone(),
        stream: g.params.stream,
        format,
        turns,
        functions: listed.functions,
        events,
        max_calls: asked.min(ctx.shared.config.mcp.max_tool_calls),
        calls: 0,
        more: Vec::new(),
        answers,
    };
    Ok((g, run))
}

/// One request's turns.
struct Loop {
    ctx: Rc<ShardCtx>,
    stream: bool,
    format: ResponsesFormat,
    turns: Turns,
    functions: Rc<[McpFunction]>,
    /// Events rendered and not yet written.
    events: SseOut,
    max_calls: usize,
    /// MCP calls run so far.
    calls: usize,
    /// The items after the input that the next turn's prompt adds: each turn's text and calls
    /// with their outputs.
    more: Vec<Value>,
    /// The approval requests the input answers, not acted on yet.
    answers: Vec<Answer>,
}

impl Loop {
    async fn go(mut self, r: &mut Responder<'_>, first: Generation) {
        if self.stream {
            if r.start_sse().await.is_err() {
                return;
            }
            self.write(r);
        }
        let mut g = first;
        if !self.answers.is_empty() {
            g = match self.answer(r).await {
                Some(Ok(g)) => g,
                Some(Err(e)) => return self.fail(r, &e).await,
                None => return,
            };
        }
        loop {
            let seen = self.format.items().len();
            let gone = r.gone();
            let mut sink = TurnSink { r, format: &mut self.format, collector: None, ended: None };
            generate::run(g, &mut sink, gone).await;
            let Some(Ended::Closed(collected)) = sink.ended.take() else { return };
            if let Some(c) = collected {
                self.format.add_collected(&c.choices, &c.usage);
            }
            self.ctx.metrics().mcp.iteration();
            let pending = self.format.pending_mcp_calls();
            if pending.is_empty() {
                break;
            }
            let spent = self.run_calls(&pending).await;
            self.write(r);
            if self.stream && r.flush().await.is_err() {
                return;
            }
            if spent || self.format.awaits_client() {
                break;
            }
            let next: Vec<Value> = self.format.items()[seen..].iter().flat_map(|i| self.next_items(i)).collect();
            self.more.extend(next);
            g = match self.turns.generation(&self.ctx, &self.more) {
                Ok(g) => g,
                Err(e) => return self.fail(r, &e).await,
            };
        }
        self.end(r).await;
    }

    /// Acts on the input's answers: the approved calls run (as `mcp_call` items, counted
    /// against `max_tool_calls`), and the first generation is planned again with each answer
    /// after the input: an approved call with its output, a denied one with `denied`'s text.
    /// None when the client has gone.
    async fn answer(&mut self, r: &mut Responder<'_>) -> Option<Result<Generation, ApiError>> {
        let answers = std::mem::take(&mut self.answers);
        for a in answers.iter().filter(|a| a.approve) {
            self.format.approved_call(&a.request_id, &a.server_label, &a.name, &a.arguments, &mut self.events);
        }
        let pending = self.format.pending_mcp_calls();
        self.run_calls(&pending).await;
        self.write(r);
        if self.stream && r.flush().await.is_err() {
            return None;
        }
        for a in &answers {
            let ran = |i: &&Item| matches!(&i.kind, Kind::McpCall { approval_request_id: Some(id), .. } if *id == a.request_id);
            let next = match self.format.items().iter().find(ran) {
                Some(item) => self.next_items(item),
                None => vec![
                    serde_json::json!({"type": "function_call", "call_id": a.request_id, "name": a.function, "arguments": a.arguments}),
                    serde_json::json!({"type": "function_call_output", "call_id": a.request_id, "output": approval::denied(a.reason.as_deref())}),
                ],
            };
            self.more.extend(next);
        }
        Some(self.turns.generation(&self.ctx, &self.more))
    }

    /// Runs the pending calls, in order; true when `max_tool_calls` stopped one.
    async fn run_calls(&mut self, pending: &[usize]) -> bool {
        let mut spent = false;
        for &at in pending {
            let result = if self.calls >= self.max_calls {
                spent = true;
                let message = format!("max_tool_calls ({}) reached: the call was not run", self.max_calls);
                Err(serde_json::json!({"type": "mcp_protocol_error", "code": -32000, "message": message}))
            } else {
                self.calls += 1;
                self.call(at).await
            };
            self.format.complete_mcp_call(at, result, &mut self.events);
        }
        spent
    }

    async fn call(&self, at: usize) -> Result<String, Value> {
        let item = &self.format.items()[at];
        let Kind::McpCall { server_label, name, .. } = &item.kind else { return Ok(String::new()) };
        let Some(f) = self.functions.iter().find(|f| &f.server_label == server_label && &f.tool == name) else {
            return Ok(String::new());
        };
        let model = self.turns.model_name();
        let arguments = match serde_json::from_str::<Value>(if item.text.is_empty() { "{}" } else { &item.text }) {
            Ok(Value::Object(m)) => Some(m),
            _ => {
                self.ctx.metrics().mcp.call(model, name, "error");
                let message = "the model's arguments are not a JSON object";
                return Err(serde_json::json!({"type": "mcp_protocol_error", "code": -32602, "message": message}));
            }
        };
        let reply = self.ctx.mcp().call(f.server.clone(), name.clone(), arguments);
        let answer = match reply {
            Ok(reply) => reply.await,
            Err(e) => Err(e),
        };
        let (result, label) = match answer {
            Ok(out) if out.is_error => (Err(execution_error(&out.text)), "error"),
            Ok(out) => (Ok(out.text), "success"),
            Err(e) => {
                tracing::warn!("responses: MCP call {server_label}.{name} failed: {e}");
                (Err(mcp_tools::call_error(&e)), "error")
            }
        };
        self.ctx.metrics().mcp.call(model, name, label);
        result
    }

    /// What an output item adds to the next turn's prompt: the model's text, and each MCP call
    /// as the function call the model made, with its output (or error) as the call's output.
    fn next_items(&self, item: &Item) -> Vec<Value> {
        match &item.kind {
            Kind::Message => vec![serde_json::json!({"type": "message", "role": "assistant", "content": item.text})],
            Kind::McpCall { call_id, server_label, name, output, error, .. } => {
                let function = self
                    .functions
                    .iter()
                    .find(|f| &f.server_label == server_label && &f.tool == name)
                    .map_or(name.as_str(), |f| f.function.as_str());
                let output = match (output, error) {
                    (Some(o), _) => o.clone(),
                    (None, Some(e)) => format!("error: {}", error_text(e)),
                    (None, None) => String::new(),
                };
                vec![
                    serde_json::json!({"type": "function_call", "call_id": call_id, "name": function, "arguments": item.text}),
                    serde_json::json!({"type": "function_call_output", "call_id": call_id, "output": output}),
                ]
            }
            _ => Vec::new(),
        }
    }

    fn write(&mut self, r: &mut Responder<'_>) {
        for (name, data) in self.events.drain() {
            if self.stream {
                r.push_sse(name, data.as_bytes());
            }
        }
    }

    async fn end(mut self, r: &mut Responder<'_>) {
        self.format.refresh();
        let finished = self.format.finish().await;
        if self.stream {
            match finished {
                Ok(()) => self.format.end_stream(&mut self.events),
                Err(e) => self.format.stream_error(&e, &mut self.events),
            }
            self.write(r);
            let _ = r.end_sse().await;
            return;
        }
        let _ = match finished {
            Ok(()) => r.send_json(200, self.format.whole().as_bytes()).await,
            Err(e) => r.send_error(&e).await,
        };
    }

    async fn fail(mut self, r: &mut Responder<'_>, e: &ApiError) {
        tracing::info!("responses: the tool loop stopped: {}", e.message);
        if !r.has_started() {
            let _ = r.send_error(e).await;
            return;
        }
        self.format.stream_error(e, &mut self.events);
        self.write(r);
        let _ = r.end_sse().await;
    }
}

/// The text of a failed call's `error`.
fn error_text(e: &Value) -> String {
    e.get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| e.pointer("/content/0/text").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| e.to_string())
}

/// How one generation ended.
enum Ended {
    /// Complete; one-shot, its collected output.
    Closed(Option<Collector>),
    /// Failed: the error is written and the response over.
    Failed,
}

/// One generation's sink: streamed, its events go out under the response's one stream;
/// one-shot, they are collected for the loop. Its end is not the response's.
struct TurnSink<'s, 'r, 'c> {
    r: &'r mut Responder<'c>,
    format: &'s mut ResponsesFormat,
    collector: Option<Collector>,
    ended: Option<Ended>,
}

impl TurnSink<'_, '_, '_> {
    fn push(&mut self, out: &mut SseOut) {
        for (name, data) in out.drain() {
            self.r.push_sse(name, data.as_bytes());
        }
    }
}

impl Sink for TurnSink<'_, '_, '_> {
    async fn open(&mut self, streaming: bool) -> Result<(), Gone> {
        if !streaming {
            self.collector = Some(Collector::default());
        }
        Ok(())
    }

    fn event(&mut self, event: Event) {
        match &mut self.collector {
            Some(c) => c.add(event),
            None => {
                let mut out = SseOut::default();
                self.format.stream(&event, &mut out);
                self.push(&mut out);
            }
        }
    }

    async fn flush(&mut self) -> Result<(), Gone> {
        self.r.flush().await.map_err(|_| Gone)
    }

    async fn keepalive(&mut self) -> Result<(), Gone> {
        self.r.push_sse_comment("keepalive");
        self.r.flush().await.map_err(|_| Gone)
    }

    async fn close(&mut self) {
        self.ended = Some(Ended::Closed(self.collector.take()));
    }

    async fn fail(&mut self, error: &ApiError) {
        self.ended = Some(Ended::Failed);
        let e = self.format.client_error(error);
        if !self.r.has_started() {
            let _ = self.r.send_error(&e).await;
            return;
        }
        let mut out = SseOut::default();
        self.format.stream_error(&e, &mut out);
        self.push(&mut out);
        let _ = self.r.end_sse().await;
    }
}
