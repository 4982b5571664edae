//! A Responses request's MCP tools (`{"type":"mcp","server_label","server_url","headers",
//! "allowed_tools","require_approval"}`), their servers' tool lists, and the functions the
//! model is offered for them.
//!
//! A tool keeps its own name as the function's name unless another offered tool (of another
//! server, or a function tool of the request) has the same name: then every one of them from
//! an MCP server is offered as `<server_label>__<tool>`, so the model can tell them apart and
//! the gateway knows which server to call.
//!
//! A server without `server_url` is one of `--mcp-config-path`'s, named by its label. One with
//! `server_url` is the request's own (streamable HTTP); its `headers` reach that server only
//! and are never logged. `require_approval` defaults to `never`, as in SMG (which asks only
//! when a request says `always`): unlike OpenAI's hosted servers, these are servers the
//! operator configured or the client named itself.

use std::rc::Rc;

use serde_json::{Map, Value};
use shardgate_mcp::{McpError, ServerRef, ToolInfo};

use crate::api::fields::Fields;
use crate::error::ApiError;
use crate::shard::ShardCtx;
use shardgate_parsers::tool::ToolSpec;

/// A function offered to the model that is an MCP server's tool.
#[derive(Debug, Clone, PartialEq)]
pub struct McpFunction {
    /// The name the model calls it by.
    pub function: String,
    pub server_label: String,
    pub server: ServerRef,
    /// The name on its server.
    pub tool: String,
    /// A call waits for the client's approval instead of running.
    pub approval: bool,
}

/// One `{"type":"mcp"}` entry of `tools`.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerTool {
    pub label: String,
    pub server: ServerRef,
    allowed: Option<Vec<String>>,
    approval: Approval,
}

#[derive(Debug, Clone, PartialEq)]
enum Approval {
    Never,
    Always,
    /// `{"never": {"tool_names": [...]}}`: these run, the others wait.
    NeverFor(Vec<String>),
    /// `{"always": {"tool_names": [...]}}`: these wait, the others run.
    AlwaysFor(Vec<String>),
}

impl Approval {
    fn needed(&self, tool: &str) -> bool {
        match self {
            Approval::Never => false,
            Approval::Always => true,
            Approval::NeverFor(names) => !names.iter().any(|n| n == tool),
            Approval::AlwaysFor(names) => names.iter().any(|n| n == tool),
        }
    }
}

fn bad(param: &str, message: impl Into<String>) -> ApiError {
    ApiError::invalid_param(param, message)
}

fn names(v: &Value, at: &str) -> Result<Vec<String>, ApiError> {
    let list = match v {
        Value::Object(o) => o.get("tool_names").unwrap_or(&Value::Null),
        other => other,
    };
    list.as_array()
        .and_then(|l| l.iter().map(|n| n.as_str().map(str::to_string)).collect::<Option<Vec<_>>>())
        .ok_or_else(|| bad(at, "must be a list of tool names or {\"tool_names\": [...]}"))
}

fn approval(v: Option<&Value>, at: &str) -> Result<Approval, ApiError> {
    let Some(v) = v.filter(|v| !v.is_null()) else { return Ok(Approval::Never) };
    match v {
        Value::String(s) if s == "never" => Ok(Approval::Never),
        Value::String(s) if s == "always" => Ok(Approval::Always),
        Value::Object(o) => match (o.get("never"), o.get("always")) {
            (Some(n), None) => Ok(Approval::NeverFor(names(n, &format!("{at}.never"))?)),
            (None, Some(a)) => Ok(Approval::AlwaysFor(names(a, &format!("{at}.always"))?)),
            _ => Err(bad(at, "'require_approval' as an object has one of 'never' or 'always'")),
        },
        _ => Err(bad(at, "'require_approval' must be 'always', 'never' or an object")),
    }
}

/// The request's MCP entries; `configured` are the names of `--mcp-config-path`'s servers.
pub fn read(f: &Fields<'_>, configured: &[String]) -> Result<Vec<McpServerTool>, ApiError> {
    let Some(list) = f.array("tools")? else { return Ok(Vec::new()) };
    let mut out: Vec<McpServerTool> = Vec::new();
    for (i, tool) in list.iter().enumerate() {
        let Some(t) = tool.as_object().filter(|t| t.get("type").and_then(Value::as_str) == Some("mcp")) else {
            continue;
        };
        let at = format!("tools[{i}]");
        let label = t.get("server_label").and_then(Value::as_str).filter(|l| shardgate_mcp::valid_name(l)).ok_or_else(
            || bad(&format!("{at}.server_label"), "an MCP tool needs a 'server_label' of 1-64 of A-Z a-z 0-9 _ -"),
        )?;
        if out.iter().any(|o| o.label == label) {
            return Err(bad(&format!("{at}.server_label"), format!("server_label '{label}' is used twice")));
        }
        let server = match t.get("server_url").filter(|u| !u.is_null()) {
            None if configured.iter().any(|c| c == label) => ServerRef::Configured(label.to_string()),
            None => {
                return Err(bad(
                    &format!("{at}.server_url"),
                    format!("no MCP server named '{label}' is configured; give its 'server_url'"),
                ))
            }
            Some(Value::String(url)) if url.starts_with("http://") || url.starts_with("https://") => {
                let headers = match t.get("headers").filter(|h| !h.is_null()) {
                    None => Vec::new(),
                    Some(Value::Object(h)) => h
                        .iter()
                        .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| bad(&format!("{at}.headers"), "header values must be strings"))?,
                    Some(_) => return Err(bad(&format!("{at}.headers"), "'headers' must be an object")),
                };
                ServerRef::Url { label: label.to_string(), url: url.clone(), headers }
            }
            Some(_) => return Err(bad(&format!("{at}.server_url"), "'server_url' must be an http:// or https:// URL")),
        };
        let allowed = match t.get("allowed_tools").filter(|a| !a.is_null()) {
            None => None,
            Some(a) => Some(names(a, &format!("{at}.allowed_tools"))?),
        };
        let approval = approval(t.get("require_approval"), &format!("{at}.require_approval"))?;
        out.push(McpServerTool { label: label.to_string(), server, allowed, approval });
    }
    Ok(out)
}

/// What listing the servers gives the request: its functions, and each server's listing.
pub struct Listed {
    pub functions: Rc<[McpFunction]>,
    /// `(server_label, tools)`, for the `mcp_list_tools` items.
    pub listings: Vec<(String, Value)>,
    pub specs: Vec<ToolSpec>,
    /// As the template sees them (chat's nested shape).
    pub template: Vec<Value>,
}

/// Why a tool list could not be had, as the client's error (naming the server). A server
/// that failed is a 424 `connect_mcp_server_failed`, streamed or not, as SMG answers (and
/// OpenAI, with its 424): no `response.mcp_list_tools.failed` event, since nothing has been
/// generated and the client learns it before the stream opens. The gateway's own MCP thread
/// being full or gone is its 503.
pub fn list_error(e: &McpError) -> ApiError {
    match e {
        McpError::Busy => ApiError::overloaded(e, 1),
        McpError::Unavailable => ApiError::unavailable(e),
        McpError::UnknownServer(_) => ApiError::bad_request(e),
        _ => ApiError::failed_dependency(e).with_code("connect_mcp_server_failed"),
    }
}

/// A failed call's `error`, as OpenAI's `mcp_call` item carries it.
pub fn call_error(e: &McpError) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), Value::from("mcp_protocol_error"));
    m.insert("code".into(), Value::from(-32000));
    m.insert("message".into(), Value::from(e.to_string()));
    Value::Object(m)
}

/// A tool that ran and reported an error.
pub fn execution_error(text: &str) -> Value {
    serde_json::json!({"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": text}]})
}

/// Lists every server's tools (in parallel, on the MCP thread) and names the functions;
/// `function_names` are the request's own function tools.
pub async fn list(ctx: &ShardCtx, servers: &[McpServerTool], function_names: &[String]) -> Result<Listed, ApiError> {
    let mcp = ctx.mcp();
    let replies: Vec<_> =
        servers.iter().map(|s| mcp.tools(s.server.clone()).map_err(|e| list_error(&e))).collect::<Result<_, _>>()?;
    let mut lists: Vec<Vec<ToolInfo>> = Vec::with_capacity(servers.len());
    for (reply, s) in replies.into_iter().zip(servers) {
        let tools = reply.await.map_err(|e| {
            tracing::warn!("responses: MCP server '{}' gave no tool list: {e}", s.label);
            list_error(&e)
        })?;
        let allowed = |t: &ToolInfo| s.allowed.as_ref().is_none_or(|a| a.contains(&t.name));
        lists.push(tools.iter().filter(|t| allowed(t)).cloned().collect());
    }
    let taken = |name: &str| {
        function_names.iter().filter(|n| *n == name).count() + lists.iter().flatten().filter(|t| t.name == name).count()
            > 1
    };
    let mut functions = Vec::new();
    let mut listings = Vec::new();
    let mut specs = Vec::new();
    let mut template = Vec::new();
    for (s, tools) in servers.iter().zip(&lists) {
        let mut listing = Vec::with_capacity(tools.len());
        for t in tools {
            let function = if taken(&t.name) { format!("{}__{}", s.label, t.name) } else { t.name.clone() };
            template.push(serde_json::json!({"type": "function", "function": {
                "name": function, "description": t.description, "parameters": t.input_schema}}));
            specs.push(ToolSpec { name: function.clone(), parameters: Some(t.input_schema.clone()) });
            listing.push(serde_json::json!({"name": t.name, "description": t.description,
                "input_schema": t.input_schema, "annotations": t.annotations}));
            functions.push(McpFunction {
                function,
                server_label: s.label.clone(),
                server: s.server.clone(),
                tool: t.name.clone(),
                approval: s.approval.needed(&t.name),
            });
        }
        listings.push((s.label.clone(), Value::Array(listing)));
    }
    Ok(Listed { functions: functions.into(), listings, specs, template })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_list_not_had_is_a_424_when_the_server_failed() {
        let server = || "py".to_string();
        let cases = [
            (McpError::Start { server: server(), why: "no such file".into() }, 424),
            (McpError::List { server: server(), why: "closed".into() }, 424),
            (McpError::Timeout { server: server(), what: "starting and listing tools", limit_ms: 10 }, 424),
            (McpError::UnknownServer(server()), 400),
            (McpError::Unavailable, 503),
        ];
        for (e, status) in cases {
            let api = list_error(&e);
            assert_eq!(api.status, status, "{e}");
            if status == 424 {
                assert_eq!(api.code, Some("connect_mcp_server_failed"), "{e}");
                assert!(api.message.contains("MCP server 'py'"), "{}", api.message);
            }
        }
    }

    #[test]
    fn entries_are_read_and_bad_ones_refused_naming_the_field() {
        let configured = ["local".to_string()];
        let body = json!({"tools": [
            {"type": "function", "name": "f"},
            {"type": "mcp", "server_label": "local", "allowed_tools": ["echo"], "require_approval": {"always": {"tool_names": ["rm"]}}},
            {"type": "mcp", "server_label": "web", "server_url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer x"}}
        ]});
        let read = read(&Fields::new(&body), &configured).unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(
            (read[0].server.clone(), read[0].allowed.clone()),
            (ServerRef::Configured("local".into()), Some(vec!["echo".into()]))
        );
        assert!(read[0].approval.needed("rm") && !read[0].approval.needed("echo"));
        assert!(matches!(&read[1].server, ServerRef::Url { headers, .. } if headers.len() == 1));
        assert!(!read[1].approval.needed("anything"), "the default is never, as in SMG");
        let https = json!({"tools": [{"type": "mcp", "server_label": "s", "server_url": "https://h/mcp"}]});
        let got = super::read(&Fields::new(&https), &configured).unwrap();
        assert!(matches!(&got[0].server, ServerRef::Url { url, .. } if url == "https://h/mcp"));
        let cases = [
            (json!({"tools": [{"type": "mcp"}]}), "tools[0].server_label"),
            (json!({"tools": [{"type": "mcp", "server_label": "nope"}]}), "tools[0].server_url"),
            (json!({"tools": [{"type": "mcp", "server_label": "x", "server_url": "ftp://h"}]}), "tools[0].server_url"),
            (json!({"tools": [{"type": "mcp", "server_label": "x", "server_url": 5}]}), "tools[0].server_url"),
            (
                json!({"tools": [{"type": "mcp", "server_label": "x", "server_url": "http://h", "headers": {"a": 1}}]}),
                "tools[0].headers",
            ),
            (
                json!({"tools": [{"type": "mcp", "server_label": "local", "allowed_tools": "echo"}]}),
                "tools[0].allowed_tools",
            ),
            (
                json!({"tools": [{"type": "mcp", "server_label": "local", "require_approval": "sometimes"}]}),
                "tools[0].require_approval",
            ),
            (
                json!({"tools": [{"type": "mcp", "server_label": "local"}, {"type": "mcp", "server_label": "local"}]}),
                "tools[1].server_label",
            ),
        ];
        for (body, param) in cases {
            let e = super::read(&Fields::new(&body), &configured).expect_err(&body.to_string());
            assert_eq!((e.status, e.param.as_deref()), (400, Some(param)), "{body}: {}", e.message);
        }
    }
}
