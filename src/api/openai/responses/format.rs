//! Responses from the pipeline's events: typed SSE events (each with `event: <type>` and a
//! `sequence_number` from 0), or one `response` object; and the response saved once complete.
//!
//! A stream opens with `response.created` and `response.in_progress` (the object in progress,
//! no output), then writes output items one at a time, in the order the output comes
//! (vLLM's `SimpleStreamingEventProcessor`): a change of kind (reasoning, message text, a
//! call) closes the open item and opens the next. Per item: `response.output_item.added`;
//! for text `response.content_part.added` (a `reasoning_text` part for reasoning, as vLLM and
//! the SDK's types have it), its deltas (`response.reasoning_text.delta` /
//! `response.output_text.delta`), `….done` with the whole text, `response.content_part.done`;
//! for a call `response.function_call_arguments.delta` / `.done`; then
//! `response.output_item.done` with the whole item. It ends with `response.completed` (or
//! `response.incomplete` when the output bound cut it short, as OpenAI ends such a stream;
//! vLLM sends `response.completed` either way) carrying the whole object; no `[DONE]`.
//!
//! A one-shot response has the items in a fixed order: reasoning, the message, the calls.
//! A stream has the same items whenever the output comes in that order (which the parse stage
//! gives for every family's usual output); text after a call becomes a second message item
//! when streamed, as in vLLM.

use std::rc::Rc;

use serde_json::Value;

use super::history::{self, Saved};
use super::input::item_id;
use super::mcp_tools::McpFunction;
use super::object::{Item, Kind, Response, ResponseUsage, Snapshot, Status};
use crate::api::invalid::Names;
use crate::api::sink::{Format, SseOut};
use crate::engine::FinishReason;
use crate::error::ApiError;
use crate::pipeline::choice::Finish;
use crate::pipeline::events::{Collected, Event, Usage};
use crate::pipeline::parse::CallDelta;
use crate::shard::ShardCtx;
use shardgate_util::json::{push_int, push_str};

/// The number of tokens in a text.
///
/// `reasoning_tokens` is counted by encoding the reasoning text once the response is
/// complete: the pipeline cannot attribute tokens exactly, because the parse stage sees
/// detokenized text with parts held back (a possible `</think>` prefix, stop-string
/// holdback), never token boundaries. Re-encoding gives the generated count whenever the
/// model emitted the canonical tokenization of its text (what sampling from a BPE model
/// almost always yields), leaves the markers out as vLLM's count does, costs one encode of
/// the reasoning per response, and adds nothing to the events every API shares.
pub type CountTokens = Box<dyn Fn(&str) -> u64>;

/// What saving a complete response needs (`store`).
pub struct Save {
    pub ctx: Rc<ShardCtx>,
    pub model: String,
    pub previous_response_id: Option<String>,
    pub conversation: Option<String>,
    /// The request's input items, each with its id.
    pub input_items: Vec<Value>,
}

/// Renders one response, streamed or not.
pub struct ResponsesFormat {
    response: Response,
    count_tokens: CountTokens,
    /// Off: only the first call is kept (vLLM's `maybe_filter_parallel_tool_calls`).
    parallel_tool_calls: bool,
    save: Option<Save>,
    /// The next event's `sequence_number`.
    seq: u64,
    created: bool,
    /// Closed items, in output order.
    items: Vec<Item>,
    /// The item being streamed (output index `items.len()`), and the call index it is.
    open: Option<(Item, Option<usize>)>,
    status: Status,
    /// The whole response once complete: what is saved, and what a stream ends with.
    done: Option<String>,
    /// The functions that are MCP tools: a call to one is an `mcp_call` (or an
    /// `mcp_approval_request`) item, run by the tool loop.
    mcp: Rc<[McpFunction]>,
    /// The token counts of every generation of the response (the tool loop runs several).
    spent: Usage,
}

impl ResponsesFormat {
    pub fn new(response: Response, count_tokens: CountTokens, parallel_tool_calls: bool, save: Option<Save>) -> Self {
        ResponsesFormat {
            response,
            count_tokens,
            parallel_tool_calls,
            save,
            seq: 0,
            created: false,
            items: Vec::new(),
            open: None,
            status: Status::InProgress,
            done: None,
            mcp: Rc::from([]),
            spent: Usage::default(),
        }
    }

    /// Calls to these functions become MCP items.
    pub fn with_mcp(mut self, mcp: Rc<[McpFunction]>) -> Self {
        self.mcp = mcp;
        self
    }

    /// The kind of item a call to `name` is.
    fn call_kind(&self, call_id: String, name: String) -> Kind {
        match self.mcp.iter().find(|f| f.function == name) {
            Some(f) if f.approval => {
                Kind::McpApprovalRequest { server_label: f.server_label.clone(), name: f.tool.clone() }
            }
            Some(f) => Kind::McpCall {
                call_id,
                server_label: f.server_label.clone(),
                name: f.tool.clone(),
                output: None,
                error: None,
                approval_request_id: None,
            },
            None => Kind::FunctionCall { call_id, name },
        }
    }

    /// A server's tools as an `mcp_list_tools` item, whole.
    pub fn list_tools(&mut self, server_label: String, tools: Value, out: &mut SseOut) {
        let mut item = Item::new(Kind::McpListTools { server_label, tools }, String::new());
        item.status = Status::Completed;
        let at = self.items.len();
        emit(&mut self.seq, out, "response.output_item.added", |s| {
            s.push_str(",\"output_index\":");
            push_int(s, at);
            s.push_str(",\"item\":");
            item.push_json(s);
        });
        for name in ["response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed"] {
            emit(&mut self.seq, out, name, |s| push_at(s, &item, at, false));
        }
        emit(&mut self.seq, out, "response.output_item.done", |s| {
            s.push_str(",\"output_index\":");
            push_int(s, at);
            s.push_str(",\"item\":");
            item.push_json(s);
        });
        self.items.push(item);
    }

    /// A call the client approved (an `mcp_approval_response`): an `mcp_call` item announced
    /// with its whole arguments, to be run like the model's calls; the approval request's id
    /// is its `approval_request_id` and the id the next prompt sees the call under.
    pub fn approved_call(
        &mut self,
        request_id: &str,
        server_label: &str,
        name: &str,
        arguments: &str,
        out: &mut SseOut,
    ) {
        let kind = Kind::McpCall {
            call_id: request_id.to_string(),
            server_label: server_label.to_string(),
            name: name.to_string(),
            output: None,
            error: None,
            approval_request_id: Some(request_id.to_string()),
        };
        self.open_item(Item::new(kind, String::new()), None, out);
        let at = self.items.len();
        let Some((item, _)) = &mut self.open else { return };
        item.text.push_str(arguments);
        emit(&mut self.seq, out, "response.mcp_call_arguments.delta", |s| {
            push_at(s, item, at, false);
            s.push_str(",\"delta\":");
            push_str(s, arguments);
        });
        self.close(Status::Completed, out);
    }

    /// The output indexes of the MCP calls not run yet.
    pub fn pending_mcp_calls(&self) -> Vec<usize> {
        let pending = |i: &Item| matches!(i.kind, Kind::McpCall { .. }) && i.status == Status::InProgress;
        self.items.iter().enumerate().filter(|(_, i)| pending(i)).map(|(at, _)| at).collect()
    }

    pub fn items(&self) -> &[Item] {
        &self.items
    }

    /// Whether the output so far holds calls the client must answer (function calls, approval
    /// requests): the response ends there.
    pub fn awaits_client(&self) -> bool {
        self.items.iter().any(|i| matches!(i.kind, Kind::FunctionCall { .. } | Kind::McpApprovalRequest { .. }))
    }

    /// The MCP call at `at` ran: its output, or its error (`{"type",...}` as OpenAI shapes it).
    pub fn complete_mcp_call(&mut self, at: usize, result: Result<String, Value>, out: &mut SseOut) {
        let Some(item) = self.items.get_mut(at) else { return };
        let Kind::McpCall { output, error, .. } = &mut item.kind else { return };
        let name = match result {
            Ok(text) => {
                *output = Some(text);
                item.status = Status::Completed;
                "response.mcp_call.completed"
            }
            Err(e) => {
                *error = Some(e);
                item.status = Status::Failed;
                "response.mcp_call.failed"
            }
        };
        let item = &self.items[at];
        emit(&mut self.seq, out, name, |s| push_at(s, item, at, false));
        emit(&mut self.seq, out, "response.output_item.done", |s| {
            s.push_str(",\"output_index\":");
            push_int(s, at);
            s.push_str(",\"item\":");
            item.push_json(s);
        });
    }

    fn render(&self, status: Status, usage: Option<&ResponseUsage>, error: Option<&ApiError>) -> String {
        self.response.render(&Snapshot { status, items: &self.items, usage, error })
    }

    fn usage(&self, u: &Usage) -> ResponseUsage {
        let reasoning_tokens =
            self.items.iter().filter(|i| i.kind == Kind::Reasoning).map(|i| (self.count_tokens)(&i.text)).sum();
        ResponseUsage {
            input_tokens: u.prompt_tokens,
            cached_tokens: u.cached_tokens,
            output_tokens: u.completion_tokens,
            reasoning_tokens,
        }
    }

    pub fn start(&mut self, out: &mut SseOut) {
        if self.created {
            return;
        }
        self.created = true;
        let snapshot = self.render(Status::InProgress, None, None);
        for name in ["response.created", "response.in_progress"] {
            emit(&mut self.seq, out, name, |s| {
                s.push_str(",\"response\":");
                s.push_str(&snapshot);
            });
        }
    }

    /// Reasoning or message text: into the open item of that kind, else a new one.
    fn text(&mut self, kind: Kind, text: &str, out: &mut SseOut) {
        if !matches!(&self.open, Some((item, None)) if item.kind == kind) {
            self.open_item(Item::new(kind, String::new()), None, out);
        }
        let at = self.items.len();
        let Some((item, _)) = &mut self.open else { return };
        item.text.push_str(text);
        let (name, logprobs) = match item.kind {
            Kind::Reasoning => ("response.reasoning_text.delta", false),
            _ => ("response.output_text.delta", true),
        };
        emit(&mut self.seq, out, name, |s| {
            push_at(s, item, at, true);
            s.push_str(",\"delta\":");
            push_str(s, text);
            if logprobs {
                s.push_str(",\"logprobs\":[]");
            }
        });
    }

    /// A call's piece: its first opens a `function_call` item, every piece adds arguments.
    fn call(&mut self, c: &CallDelta, out: &mut SseOut) {
        if c.index > 0 && !self.parallel_tool_calls {
            return;
        }
        if !matches!(&self.open, Some((_, Some(index))) if *index == c.index) {
            let call_id = c.id.clone().unwrap_or_else(|| item_id("call"));
            let kind = self.call_kind(call_id, c.name.clone().unwrap_or_default());
            self.open_item(Item::new(kind, String::new()), Some(c.index), out);
        }
        let at = self.items.len();
        let Some((item, _)) = &mut self.open else { return };
        if c.arguments.is_empty() {
            return;
        }
        item.text.push_str(&c.arguments);
        let name = match item.kind {
            Kind::McpCall { .. } => "response.mcp_call_arguments.delta",
            Kind::McpApprovalRequest { .. } => return,
            _ => "response.function_call_arguments.delta",
        };
        emit(&mut self.seq, out, name, |s| {
            push_at(s, item, at, false);
            s.push_str(",\"delta\":");
            push_str(s, &c.arguments);
        });
    }

    fn open_item(&mut self, item: Item, call_index: Option<usize>, out: &mut SseOut) {
        self.close(Status::Completed, out);
        let at = self.items.len();
        emit(&mut self.seq, out, "response.output_item.added", |s| {
            s.push_str(",\"output_index\":");
            push_int(s, at);
            s.push_str(",\"item\":");
            item.push_added(s);
        });
        match item.kind {
            Kind::Reasoning | Kind::Message => emit(&mut self.seq, out, "response.content_part.added", |s| {
                push_at(s, &item, at, true);
                s.push_str(",\"part\":");
                item.push_part(s, "");
            }),
            Kind::McpCall { .. } => {
                emit(&mut self.seq, out, "response.mcp_call.in_progress", |s| push_at(s, &item, at, false))
            }
            _ => {}
        }
        self.open = Some((item, call_index));
    }

    /// Ends the open item with `status`: its `….done` events with the whole text.
    fn close(&mut self, status: Status, out: &mut SseOut) {
        let Some((mut item, _)) = self.open.take() else { return };
        item.status = status;
        let at = self.items.len();
        let seq = &mut self.seq;
        match &item.kind {
            Kind::McpCall { .. } => {
                emit(seq, out, "response.mcp_call_arguments.done", |s| {
                    push_at(s, &item, at, false);
                    s.push_str(",\"arguments\":");
                    push_str(s, &item.text);
                });
                // Done once it ran (`complete_mcp_call`).
                item.status = Status::InProgress;
                self.items.push(item);
                return;
            }
            Kind::McpListTools { .. } | Kind::McpApprovalRequest { .. } => {}
            Kind::FunctionCall { name, .. } => emit(seq, out, "response.function_call_arguments.done", |s| {
                push_at(s, &item, at, false);
                s.push_str(",\"name\":");
                push_str(s, name);
                s.push_str(",\"arguments\":");
                push_str(s, &item.text);
            }),
            kind => {
                let name = match kind {
                    Kind::Reasoning => "response.reasoning_text.done",
                    _ => "response.output_text.done",
                };
                emit(seq, out, name, |s| {
                    push_at(s, &item, at, true);
                    s.push_str(",\"text\":");
                    push_str(s, &item.text);
                    if item.kind == Kind::Message {
                        s.push_str(",\"logprobs\":[]");
                    }
                });
                emit(seq, out, "response.content_part.done", |s| {
                    push_at(s, &item, at, true);
                    s.push_str(",\"part\":");
                    item.push_part(s, &item.text);
                });
            }
        }
        emit(seq, out, "response.output_item.done", |s| {
            s.push_str(",\"output_index\":");
            push_int(s, at);
            s.push_str(",\"item\":");
            item.push_json(s);
        });
        self.items.push(item);
    }

    fn spend(&mut self, u: &Usage) {
        self.spent.prompt_tokens += u.prompt_tokens;
        self.spent.completion_tokens += u.completion_tokens;
        self.spent.cached_tokens += u.cached_tokens;
    }

    /// One generation's one-shot output, after what came before it (MCP calls stay pending).
    pub fn add_collected(&mut self, choices: &[Collected], usage: &Usage) {
        let empty = Collected::default();
        let c = choices.first().unwrap_or(&empty);
        let first = self.items.len();
        self.items.extend(self.collected_items(c));
        self.status = status_of(c.finish.as_ref());
        for item in &mut self.items[first..] {
            if !matches!(item.kind, Kind::McpCall { .. }) {
                item.status = Status::Completed;
            }
        }
        if let (Status::Incomplete, Some(last)) = (self.status, self.items.last_mut()) {
            last.status = Status::Incomplete;
        }
        self.spend(usage);
    }

    /// The whole response, as `refresh` last rendered it.
    pub fn whole(&self) -> &str {
        self.done.as_deref().unwrap_or_default()
    }

    /// The whole response as it stands: what is saved, and what a stream ends with.
    pub fn refresh(&mut self) {
        let usage = self.usage(&self.spent);
        self.done = Some(self.render(self.status, Some(&usage), None));
    }

    /// The one-shot items: reasoning, the message, the calls.
    fn collected_items(&self, c: &Collected) -> Vec<Item> {
        let mut items = Vec::with_capacity(2 + c.calls.len());
        if !c.reasoning.is_empty() {
            items.push(Item::new(Kind::Reasoning, c.reasoning.clone()));
        }
        if !c.content.is_empty() {
            items.push(Item::new(Kind::Message, c.content.clone()));
        }
        let calls = if self.parallel_tool_calls { c.calls.len() } else { c.calls.len().min(1) };
        for call in &c.calls[..calls] {
            let kind = self.call_kind(call.id.clone(), call.name.clone());
            items.push(Item::new(kind, call.arguments.clone()));
        }
        items
    }
}

/// The response's status by how its output ended.
fn status_of(finish: Option<&Finish>) -> Status {
    match finish.map(|f| f.reason) {
        Some(FinishReason::Length) => Status::Incomplete,
        _ => Status::Completed,
    }
}

/// Writes one event: `{"type":<name>,"sequence_number":n` + what `fill` adds + `}`.
fn emit(seq: &mut u64, out: &mut SseOut, name: &'static str, fill: impl FnOnce(&mut String)) {
    let mut s = String::with_capacity(160);
    s.push_str("{\"type\":\"");
    s.push_str(name);
    s.push_str("\",\"sequence_number\":");
    push_int(&mut s, *seq);
    fill(&mut s);
    s.push('}');
    *seq += 1;
    out.push_named(name, s);
}

/// `"item_id","output_index"` and, for a content part, `"content_index"` (always the first).
fn push_at(s: &mut String, item: &Item, output_index: usize, content: bool) {
    s.push_str(",\"item_id\":");
    push_str(s, &item.id);
    s.push_str(",\"output_index\":");
    push_int(s, output_index);
    if content {
        s.push_str(",\"content_index\":0");
    }
}

impl Format for ResponsesFormat {
    fn stream(&mut self, event: &Event, out: &mut SseOut) {
        match event {
            Event::Start { .. } => self.start(out),
            Event::PromptLogprobs { .. } => {}
            Event::Delta(d) => {
                if !d.output.reasoning.is_empty() {
                    self.text(Kind::Reasoning, &d.output.reasoning, out);
                }
                if !d.output.content.is_empty() {
                    self.text(Kind::Message, &d.output.content, out);
                }
                for call in &d.output.calls {
                    self.call(call, out);
                }
            }
            Event::Finished(f) => {
                self.status = status_of(Some(&f.finish));
                self.close(self.status, out);
            }
            Event::Usage(u) => {
                self.spend(u);
                self.refresh();
            }
        }
    }

    fn end_stream(&mut self, out: &mut SseOut) {
        let name = match self.status {
            Status::Incomplete => "response.incomplete",
            _ => "response.completed",
        };
        let response = self.done.take().unwrap_or_else(|| self.render(self.status, None, None));
        emit(&mut self.seq, out, name, |s| {
            s.push_str(",\"response\":");
            s.push_str(&response);
        });
    }

    fn body(&mut self, choices: &[Collected], usage: &Usage) -> String {
        self.add_collected(choices, usage);
        self.refresh();
        self.done.clone().unwrap_or_default()
    }

    fn client_error(&self, e: &ApiError) -> ApiError {
        Names::RESPONSES.engine_error(e)
    }

    /// Before `response.created`: an `error` event; after it: `response.failed`, the object
    /// with `status: failed`, its `error`, and the items completed so far.
    fn stream_error(&mut self, e: &ApiError, out: &mut SseOut) {
        if !self.created {
            emit(&mut self.seq, out, "error", |s| {
                s.push_str(",\"code\":");
                push_str(s, e.code.unwrap_or(e.kind.as_str()));
                s.push_str(",\"message\":");
                push_str(s, &e.message);
                s.push_str(",\"param\":");
                match &e.param {
                    Some(p) => push_str(s, p),
                    None => s.push_str("null"),
                }
            });
            return;
        }
        let response = self.render(Status::Failed, None, Some(e));
        emit(&mut self.seq, out, "response.failed", |s| {
            s.push_str(",\"response\":");
            s.push_str(&response);
        });
    }

    async fn finish(&mut self) -> Result<(), ApiError> {
        let (Some(save), Some(done)) = (self.save.take(), self.done.as_deref()) else { return Ok(()) };
        let response: Value = serde_json::from_str(done).map_err(ApiError::internal)?;
        let saved = Saved {
            id: self.response.id.clone(),
            created_at: self.response.created_at,
            model: save.model,
            previous_response_id: save.previous_response_id,
            conversation: save.conversation,
            input_items: save.input_items,
            response,
        };
        // Not saved, the response still reaches its client: beside the error, one-shot (a
        // stream has already carried it).
        history::save(&save.ctx, saved).await.map_err(|e| {
            tracing::warn!("response {} was generated but not stored: {}", self.response.id, e.message);
            e.with_result(done.to_string())
        })
    }
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
