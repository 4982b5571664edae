//! One server's MCP session, on the MCP thread: opened on first use (spawning the child or
//! opening the HTTP session, then the handshake), its tool list fetched once and again after
//! the server's `notifications/tools/list_changed`, its calls bounded in time and size.
//!
//! A session that broke (the child exited, the connection dropped) or that timed out is closed
//! and reopened by the next use: a server that hung on one call would hang the next, and
//! closing it kills and reaps its child.

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Map, Value};

use crate::config::Transport;
use crate::error::McpError;
use crate::http::HttpClient;
use crate::limits::Limits;

/// A tool as a server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    pub name: String,
    pub description: Option<String>,
    /// A JSON Schema object.
    pub input_schema: Value,
    /// The server's hints (`readOnlyHint`, ...), when it gave any.
    pub annotations: Option<Value>,
}

/// What a tool returned: its content as text, and whether the tool reported an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutput {
    pub text: String,
    pub is_error: bool,
}

/// Marks the tool list stale when the server says it changed.
struct Watcher {
    stale: Arc<AtomicBool>,
}

impl ClientHandler for Watcher {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.stale.store(true, Ordering::SeqCst);
    }
}

struct Live {
    service: RunningService<RoleClient, Watcher>,
    stale: Arc<AtomicBool>,
    tools: Option<Arc<[ToolInfo]>>,
}

impl Live {
    fn broken(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }
}

pub(crate) struct Server {
    name: String,
    transport: Transport,
    limits: Limits,
    http: Rc<HttpClient>,
    live: tokio::sync::Mutex<Option<Live>>,
}

fn ms(limit_ms: u64) -> Duration {
    Duration::from_millis(limit_ms)
}

impl Server {
    pub(crate) fn new(name: String, transport: Transport, limits: Limits, http: Rc<HttpClient>) -> Server {
        Server { name, transport, limits, http, live: tokio::sync::Mutex::new(None) }
    }

    fn start_error(&self, why: impl ToString) -> McpError {
        McpError::Start { server: self.name.clone(), why: why.to_string() }
    }

    async fn connect(&self) -> Result<Live, McpError> {
        let stale = Arc::new(AtomicBool::new(false));
        let watcher = Watcher { stale: stale.clone() };
        let service = match &self.transport {
            Transport::Stdio { command, args, env } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).envs(env).kill_on_drop(true);
                let (child, _) = TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::inherit())
                    .spawn()
                    .map_err(|e| self.start_error(format!("cannot run '{command}': {e}")))?;
                watcher.serve(child).await.map_err(|e| self.start_error(e))?
            }
            Transport::Streamable { url, headers } => {
                let mut config = StreamableHttpClientTransportConfig::default();
                config.uri = url.as_str().into();
                for (name, value) in headers {
                    // The value is a secret: the error names the header only.
                    let name = http::HeaderName::try_from(name.as_str())
                        .map_err(|_| self.start_error(format!("header name '{name}' is not valid")))?;
                    let value = http::HeaderValue::try_from(value.as_str())
                        .map_err(|_| self.start_error(format!("the value of header '{name}' is not valid")))?;
                    config.custom_headers.insert(name, value);
                }
                let client = self.http.get().map_err(|e| self.start_error(e))?;
                watcher
                    .serve(StreamableHttpClientTransport::with_client(client, config))
                    .await
                    .map_err(|e| self.start_error(e))?
            }
        };
        tracing::info!("MCP server '{}' connected", self.name);
        Ok(Live { service, stale, tools: None })
    }

    /// The open session with a current tool list: opened and listed as needed.
    async fn ready<'a>(&self, live: &'a mut Option<Live>) -> Result<&'a mut Live, McpError> {
        if live.as_ref().is_some_and(Live::broken) {
            tracing::warn!("MCP server '{}' closed its session; reopening it", self.name);
            close(live.take()).await;
        }
        let l = match live {
            Some(l) => l,
            None => live.insert(self.connect().await?),
        };
        if l.tools.is_none() || l.stale.swap(false, Ordering::SeqCst) {
            let listed = l
                .service
                .peer()
                .list_all_tools()
                .await
                .map_err(|e| McpError::List { server: self.name.clone(), why: e.to_string() })?;
            l.tools = Some(listed.into_iter().map(tool_info).collect());
        }
        Ok(l)
    }

    pub(crate) async fn tools(&self) -> Result<Arc<[ToolInfo]>, McpError> {
        let mut live = self.live.lock().await;
        let limit_ms = self.limits.list_timeout_ms;
        let listed = match tokio::time::timeout(ms(limit_ms), self.ready(&mut live)).await {
            Ok(Ok(l)) => Ok(l.tools.clone().unwrap_or_default()),
            Ok(Err(e)) => Err(e),
            Err(_) => {
                Err(McpError::Timeout { server: self.name.clone(), what: "starting and listing tools", limit_ms })
            }
        };
        if listed.is_err() {
            close(live.take()).await;
        }
        listed
    }

    pub(crate) async fn call(
        &self,
        tool: String,
        arguments: Option<Map<String, Value>>,
    ) -> Result<CallOutput, McpError> {
        self.tools().await?;
        // The lock is not held through the call: calls to one server run side by side.
        let Some(peer) = self.live.lock().await.as_ref().map(|l| l.service.peer().clone()) else {
            return Err(McpError::Call { server: self.name.clone(), why: "the session closed".into() });
        };
        let mut params = CallToolRequestParams::new(tool);
        params.arguments = arguments;
        let limit_ms = self.limits.call_timeout_ms;
        let answer = match tokio::time::timeout(ms(limit_ms), peer.call_tool(params)).await {
            Ok(Ok(result)) => return self.output(result),
            Ok(Err(e)) => McpError::Call { server: self.name.clone(), why: e.to_string() },
            Err(_) => McpError::Timeout { server: self.name.clone(), what: "the call", limit_ms },
        };
        tracing::warn!("{answer}; closing its session");
        close(self.live.lock().await.take()).await;
        Err(answer)
    }

    fn output(&self, result: CallToolResult) -> Result<CallOutput, McpError> {
        let mut text = String::new();
        for block in &result.content {
            if !text.is_empty() {
                text.push('\n');
            }
            match block {
                ContentBlock::Text(t) => text.push_str(&t.text),
                // Images, audio, resources: as the server sent them, for the model to read.
                other => text.push_str(&serde_json::to_string(other).unwrap_or_default()),
            }
        }
        if result.content.is_empty() {
            if let Some(structured) = &result.structured_content {
                text = structured.to_string();
            }
        }
        if text.len() > self.limits.result_bytes_max {
            let bytes = text.len();
            return Err(McpError::TooLarge { server: self.name.clone(), bytes, cap: self.limits.result_bytes_max });
        }
        Ok(CallOutput { text, is_error: result.is_error.unwrap_or(false) })
    }

    /// Ends the session (the child is killed and reaped).
    pub(crate) async fn shut(&self) {
        close(self.live.lock().await.take()).await;
    }
}

async fn close(live: Option<Live>) {
    if let Some(l) = live {
        let _ = l.service.cancel().await;
    }
}

fn tool_info(t: rmcp::model::Tool) -> ToolInfo {
    ToolInfo {
        name: t.name.into_owned(),
        description: t.description.map(|d| d.into_owned()),
        input_schema: Value::Object((*t.input_schema).clone()),
        annotations: t.annotations.and_then(|a| serde_json::to_value(a).ok()),
    }
}
