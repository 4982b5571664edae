//! The Responses `response` object and its output items, written by hand into strings like
//! every other response body. The request's settings it repeats (`Echo`) are rendered once per
//! request; a streamed response renders the object three times or more (created, in progress,
//! the end), always with the same `id` (the SDK's stream helper refuses a changed one).

use serde_json::{Map, Value};

use super::input::item_id;
use crate::error::ApiError;
use shardgate_util::json::{push_int, push_str};

/// `status` of a response or an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    InProgress,
    Completed,
    /// The output bound cut it short.
    Incomplete,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
            Status::Incomplete => "incomplete",
            Status::Failed => "failed",
        }
    }
}

/// What an output item holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Reasoning,
    Message,
    FunctionCall {
        call_id: String,
        name: String,
    },
    /// A call the gateway runs on an MCP server (the item's text is its arguments); `call_id`
    /// is the id the model's next prompt sees it under.
    McpCall {
        call_id: String,
        server_label: String,
        name: String,
        output: Option<String>,
        error: Option<Value>,
        /// The `mcp_approval_request` the client approved, when the call waited for it.
        approval_request_id: Option<String>,
    },
    /// A server's tools, as listed (JSON).
    McpListTools {
        server_label: String,
        tools: Value,
    },
    /// A call held for the client's approval (`require_approval`).
    McpApprovalRequest {
        server_label: String,
        name: String,
    },
}

/// One output item: a reasoning item's text, a message's text, or a call's arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub kind: Kind,
    /// `rs_…`, `msg_…`, `fc_…`
    pub id: String,
    pub text: String,
    pub status: Status,
}

impl Item {
    pub fn new(kind: Kind, text: String) -> Item {
        let prefix = match kind {
            Kind::Reasoning => "rs",
            Kind::Message => "msg",
            Kind::FunctionCall { .. } => "fc",
            Kind::McpCall { .. } => "mcp",
            Kind::McpListTools { .. } => "mcpl",
            Kind::McpApprovalRequest { .. } => "mcpr",
        };
        Item { kind, id: item_id(prefix), text, status: Status::InProgress }
    }

    /// The item as it is announced (`output_item.added`): no text yet, in progress.
    pub fn push_added(&self, out: &mut String) {
        self.push_fields(out, "", Status::InProgress, false);
    }

    /// The whole item.
    pub fn push_json(&self, out: &mut String) {
        self.push_fields(out, &self.text, self.status, true);
    }

    /// A message's or reasoning item's one content part, with `text`.
    pub fn push_part(&self, out: &mut String, text: &str) {
        match self.kind {
            Kind::Reasoning => {
                out.push_str("{\"type\":\"reasoning_text\",\"text\":");
                push_str(out, text);
                out.push('}');
            }
            _ => {
                out.push_str("{\"type\":\"output_text\",\"text\":");
                push_str(out, text);
                out.push_str(",\"annotations\":[],\"logprobs\":[]}");
            }
        }
    }

    /// `with_part`: the content part (an announced item has none yet).
    fn push_fields(&self, out: &mut String, text: &str, status: Status, with_part: bool) {
        match &self.kind {
            Kind::Reasoning => {
                out.push_str("{\"type\":\"reasoning\",\"id\":");
                push_str(out, &self.id);
                out.push_str(",\"summary\":[],\"content\":[");
                if with_part {
                    self.push_part(out, text);
                }
                out.push_str("],\"status\":\"");
            }
            Kind::Message => {
                out.push_str("{\"type\":\"message\",\"id\":");
                push_str(out, &self.id);
                out.push_str(",\"role\":\"assistant\",\"content\":[");
                if with_part {
                    self.push_part(out, text);
                }
                out.push_str("],\"status\":\"");
            }
            Kind::FunctionCall { call_id, name } => {
                out.push_str("{\"type\":\"function_call\",\"id\":");
                push_str(out, &self.id);
                out.push_str(",\"call_id\":");
                push_str(out, call_id);
                out.push_str(",\"name\":");
                push_str(out, name);
                out.push_str(",\"arguments\":");
                push_str(out, text);
                out.push_str(",\"status\":\"");
            }
            Kind::McpCall { server_label, name, output, error, approval_request_id, .. } => {
                out.push_str("{\"type\":\"mcp_call\",\"id\":");
                push_str(out, &self.id);
                out.push_str(",\"server_label\":");
                push_str(out, server_label);
                out.push_str(",\"name\":");
                push_str(out, name);
                out.push_str(",\"arguments\":");
                push_str(out, text);
                out.push_str(",\"output\":");
                match output {
                    Some(o) => push_str(out, o),
                    None => out.push_str("null"),
                }
                out.push_str(",\"error\":");
                out.push_str(&error.as_ref().map_or("null".into(), Value::to_string));
                out.push_str(",\"approval_request_id\":");
                match approval_request_id {
                    Some(id) => push_str(out, id),
                    None => out.push_str("null"),
                }
                out.push_str(",\"status\":\"");
            }
            Kind::McpListTools { server_label, tools } => {
                out.push_str("{\"type\":\"mcp_list_tools\",\"id\":");
                push_str(out, &self.id);
                out.push_str(",\"server_label\":");
                push_str(out, server_label);
                out.push_str(",\"tools\":");
                out.push_str(&tools.to_string());
                out.push_str(",\"error\":null}");
                return;
            }
            Kind::McpApprovalRequest { server_label, name } => {
                out.push_str("{\"type\":\"mcp_approval_request\",\"id\":");
                push_str(out, &self.id);
                out.push_str(",\"server_label\":");
                push_str(out, server_label);
                out.push_str(",\"name\":");
                push_str(out, name);
                out.push_str(",\"arguments\":");
                push_str(out, text);
                out.push('}');
                return;
            }
        }
        out.push_str(status.as_str());
        out.push_str("\"}");
    }
}

/// Token accounting in Responses' names.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ResponseUsage {
    pub input_tokens: u64,
    pub cached_tokens: u64,
    pub output_tokens: u64,
    /// Of the output, the tokens of reasoning text.
    pub reasoning_tokens: u64,
}

impl ResponseUsage {
    fn push_json(&self, out: &mut String) {
        out.push_str("{\"input_tokens\":");
        push_int(out, self.input_tokens);
        out.push_str(",\"input_tokens_details\":{\"cached_tokens\":");
        push_int(out, self.cached_tokens);
        out.push_str("},\"output_tokens\":");
        push_int(out, self.output_tokens);
        out.push_str(",\"output_tokens_details\":{\"reasoning_tokens\":");
        push_int(out, self.reasoning_tokens);
        out.push_str("},\"total_tokens\":");
        push_int(out, self.input_tokens + self.output_tokens);
        out.push('}');
    }
}

/// The request's settings as the response object repeats them: `"name":value` members
/// (`instructions`, `max_output_tokens`, `model`, `parallel_tool_calls`, ...), rendered once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Echo {
    members: String,
}

impl Echo {
    /// `members` in order; each value as given (serialised once here).
    pub fn new(members: &[(&str, Value)]) -> Echo {
        let mut out = String::with_capacity(256);
        for (name, value) in members {
            out.push(',');
            push_str(&mut out, name);
            out.push(':');
            out.push_str(&value.to_string());
        }
        Echo { members: out }
    }
}

/// One response: what stays the same in every rendering of it.
#[derive(Debug, Clone)]
pub struct Response {
    pub id: String,
    pub created_at: u64,
    pub echo: Echo,
}

/// What varies between renderings.
pub struct Snapshot<'a> {
    pub status: Status,
    pub items: &'a [Item],
    pub usage: Option<&'a ResponseUsage>,
    /// Why it failed (`status` failed).
    pub error: Option<&'a ApiError>,
}

impl Response {
    pub fn render(&self, s: &Snapshot<'_>) -> String {
        let mut out = String::with_capacity(
            640 + self.echo.members.len() + s.items.iter().map(|i| i.text.len() + 128).sum::<usize>(),
        );
        out.push_str("{\"id\":");
        push_str(&mut out, &self.id);
        out.push_str(",\"object\":\"response\",\"created_at\":");
        push_int(&mut out, self.created_at);
        out.push_str(",\"status\":\"");
        out.push_str(s.status.as_str());
        out.push_str("\",\"error\":");
        match s.error {
            Some(e) => push_error(&mut out, e),
            None => out.push_str("null"),
        }
        out.push_str(",\"incomplete_details\":");
        match s.status {
            Status::Incomplete => out.push_str("{\"reason\":\"max_output_tokens\"}"),
            _ => out.push_str("null"),
        }
        out.push_str(&self.echo.members);
        out.push_str(",\"output\":[");
        for (k, item) in s.items.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            item.push_json(&mut out);
        }
        out.push_str("],\"usage\":");
        match s.usage {
            Some(u) => u.push_json(&mut out),
            None => out.push_str("null"),
        }
        out.push('}');
        out
    }
}

/// A failed response's `error`: `{"code","message"}`, the code one of OpenAI's response error
/// codes (what failed mid-generation is the server's side, unless it was an overload).
fn push_error(out: &mut String, e: &ApiError) {
    out.push_str("{\"code\":\"");
    out.push_str(if e.status == 429 { "rate_limit_exceeded" } else { "server_error" });
    out.push_str("\",\"message\":");
    push_str(out, &e.message);
    out.push('}');
}

/// The `reasoning` member: the effort asked for; summaries are never written.
pub fn reasoning_echo(effort: Option<&str>) -> Value {
    let mut m = Map::new();
    m.insert("effort".into(), effort.map_or(Value::Null, Value::from));
    m.insert("summary".into(), Value::Null);
    Value::Object(m)
}
