//! The MCP thread, its tokio runtime, the bounded queue in front of it, and `Reply`, the
//! future of one answer.
//!
//! Shards never wait on a tool server: offering an operation is a `try_send` into a bounded
//! queue, which fails at once with `Busy` when it is full, and the answer comes back as a
//! future any executor can poll (a flume receive future: monoio shards await it as it is). On
//! the thread, every operation runs as its own task, so a slow server holds up only the
//! requests that use it.
//!
//! Dropping the `Mcp` closes the queue; the thread finishes what it holds, closes every session
//! (killing and reaping stdio children), and is joined.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread::JoinHandle;

use flume::r#async::RecvFut;
use flume::TrySendError;
use serde_json::{Map, Value};
use shardgate_tls::ClientTlsSettings;

use crate::config::{ServerConfig, Transport};
use crate::error::McpError;
use crate::http::HttpClient;
use crate::limits::{request_servers_max, Limits};
use crate::session::{CallOutput, Server, ToolInfo};

/// Which server an operation is for.
#[derive(Clone, PartialEq, Eq)]
pub enum ServerRef {
    /// One of `--mcp-config-path`'s, by name.
    Configured(String),
    /// A request's own (`server_url`, `headers`): sessions are shared by requests that name
    /// the same URL with the same headers.
    Url { label: String, url: String, headers: Vec<(String, String)> },
}

impl ServerRef {
    pub fn label(&self) -> &str {
        match self {
            ServerRef::Configured(name) => name,
            ServerRef::Url { label, .. } => label,
        }
    }
}

impl fmt::Debug for ServerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerRef::Configured(name) => write!(f, "Configured({name})"),
            ServerRef::Url { label, url, headers } => {
                let names: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
                write!(f, "Url({label}, {url}, headers {names:?})")
            }
        }
    }
}

enum Op {
    Tools(flume::Sender<Result<Arc<[ToolInfo]>, McpError>>),
    Call { tool: String, arguments: Option<Map<String, Value>>, answer: flume::Sender<Result<CallOutput, McpError>> },
}

enum Job {
    For {
        server: ServerRef,
        op: Op,
    },
    /// Close every session, then answer.
    CloseAll(flume::Sender<()>),
}

/// The future of one operation's answer; `Unavailable` if the thread ended without answering.
pub struct Reply<T: 'static> {
    answer: RecvFut<'static, Result<T, McpError>>,
}

impl<T: 'static> Future for Reply<T> {
    type Output = Result<T, McpError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.answer).poll(cx).map(|answer| answer.unwrap_or(Err(McpError::Unavailable)))
    }
}

/// The MCP client: a cheap handle to the MCP thread.
pub struct Mcp {
    /// `None` only while dropping: taking it closes the queue.
    queue: Option<flume::Sender<Job>>,
    configured: Vec<String>,
    /// The configured servers marked `required`.
    required: Vec<String>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for Mcp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Mcp({:?})", self.configured)
    }
}

impl Mcp {
    /// Starts the thread `shardgate-mcp`. Servers are started on first use, not here: a server
    /// that is slow to start or broken costs the requests that use it, not the gateway's
    /// startup, and one that crashed is started again the same way. Those marked `required`
    /// are the exception: `connect_required`.
    pub fn start(servers: Vec<ServerConfig>, limits: Limits, tls: ClientTlsSettings) -> std::io::Result<Mcp> {
        let (queue, jobs) = flume::bounded::<Job>(limits.queue_capacity.max(1));
        let configured = servers.iter().map(|s| s.name.clone()).collect();
        let required = servers.iter().filter(|s| s.required).map(|s| s.name.clone()).collect();
        let thread =
            std::thread::Builder::new().name("shardgate-mcp".into()).spawn(move || run(servers, limits, tls, jobs))?;
        Ok(Mcp { queue: Some(queue), configured, required, thread: Some(thread) })
    }

    /// Starts each `required` server and lists its tools, waiting for the answer (the thread
    /// bounds it by the start limit): for startup, before anything is served. The first that
    /// fails is the error, with its name.
    pub fn connect_required(&self) -> Result<(), (String, McpError)> {
        for name in &self.required {
            let Some(queue) = &self.queue else { return Err((name.clone(), McpError::Unavailable)) };
            let (answer, reply) = flume::bounded(1);
            let job = Job::For { server: ServerRef::Configured(name.clone()), op: Op::Tools(answer) };
            let listed = match queue.send(job) {
                Ok(()) => reply.recv().unwrap_or(Err(McpError::Unavailable)),
                Err(_) => Err(McpError::Unavailable),
            };
            listed.map_err(|e| (name.clone(), e))?;
        }
        Ok(())
    }

    /// The configured servers' names, in the file's order.
    pub fn configured(&self) -> &[String] {
        &self.configured
    }

    fn submit<T>(
        &self,
        server: ServerRef,
        op: impl FnOnce(flume::Sender<Result<T, McpError>>) -> Op,
    ) -> Result<Reply<T>, McpError> {
        if let ServerRef::Configured(name) = &server {
            if !self.configured.contains(name) {
                return Err(McpError::UnknownServer(name.clone()));
            }
        }
        let Some(queue) = &self.queue else { return Err(McpError::Unavailable) };
        let (answer, reply) = flume::bounded(1);
        match queue.try_send(Job::For { server, op: op(answer) }) {
            Ok(()) => Ok(Reply { answer: reply.into_recv_async() }),
            Err(TrySendError::Full(_)) => Err(McpError::Busy),
            Err(TrySendError::Disconnected(_)) => Err(McpError::Unavailable),
        }
    }

    /// The server's tools (started and listed on first use).
    pub fn tools(&self, server: ServerRef) -> Result<Reply<Arc<[ToolInfo]>>, McpError> {
        self.submit(server, Op::Tools)
    }

    /// Calls `tool` with `arguments` (a JSON object).
    pub fn call(
        &self,
        server: ServerRef,
        tool: String,
        arguments: Option<Map<String, Value>>,
    ) -> Result<Reply<CallOutput>, McpError> {
        self.submit(server, |answer| Op::Call { tool, arguments, answer })
    }
}

impl Mcp {
    /// Closes every session now (stdio children killed and reaped), waiting up to `limit`;
    /// false if that did not finish in time. For a process that exits without dropping the
    /// handle (the gateway's shutdown).
    pub fn close_sessions(&self, limit: std::time::Duration) -> bool {
        let Some(queue) = &self.queue else { return false };
        let (done, closed) = flume::bounded(1);
        queue.try_send(Job::CloseAll(done)).is_ok() && closed.recv_timeout(limit).is_ok()
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        self.queue = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The thread's servers: the configured ones, and the requests' own, oldest first.
struct Servers {
    configured: HashMap<String, Rc<Server>>,
    by_url: Vec<(ServerRef, Rc<Server>)>,
    limits: Limits,
    http: Rc<HttpClient>,
}

impl Servers {
    /// The server for `r`, and one to close (a request server pushed out by this one).
    fn get(&mut self, r: &ServerRef) -> (Option<Rc<Server>>, Option<Rc<Server>>) {
        match r {
            ServerRef::Configured(name) => (self.configured.get(name).cloned(), None),
            ServerRef::Url { label, url, headers } => {
                if let Some((_, s)) = self.by_url.iter().find(|(k, _)| k == r) {
                    return (Some(s.clone()), None);
                }
                let evicted = (self.by_url.len() >= request_servers_max).then(|| self.by_url.remove(0).1);
                let transport = Transport::Streamable { url: url.clone(), headers: headers.iter().cloned().collect() };
                let server = Rc::new(Server::new(label.clone(), transport, self.limits.clone(), self.http.clone()));
                self.by_url.push((r.clone(), server.clone()));
                (Some(server), evicted)
            }
        }
    }

    fn all(&self) -> Vec<Rc<Server>> {
        self.configured.values().chain(self.by_url.iter().map(|(_, s)| s)).cloned().collect()
    }
}

fn run(servers: Vec<ServerConfig>, limits: Limits, tls: ClientTlsSettings, jobs: flume::Receiver<Job>) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            // Every reply resolves to `Unavailable` as the queue is dropped.
            tracing::error!("the MCP thread cannot start its runtime: {e}");
            return;
        }
    };
    let http = Rc::new(HttpClient::new(tls));
    let configured = servers
        .into_iter()
        .map(|s| (s.name.clone(), Rc::new(Server::new(s.name, s.transport, limits.clone(), http.clone()))))
        .collect();
    let servers = Rc::new(std::cell::RefCell::new(Servers { configured, by_url: Vec::new(), limits, http }));
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let mut tasks = tokio::task::JoinSet::new();
        while let Ok(job) = jobs.recv_async().await {
            match job {
                Job::For { server: name, op } => {
                    let (server, evicted) = servers.borrow_mut().get(&name);
                    if let Some(old) = evicted {
                        tasks.spawn_local(async move { old.shut().await });
                    }
                    tasks.spawn_local(serve(server, name, op));
                }
                Job::CloseAll(done) => {
                    let all = servers.borrow().all();
                    tasks.spawn_local(async move {
                        for server in all {
                            server.shut().await;
                        }
                        let _ = done.send(());
                    });
                }
            }
            while tasks.try_join_next().is_some() {}
        }
        // The queue closed: finish what was asked, then close every session.
        while tasks.join_next().await.is_some() {}
        let all = servers.borrow().all();
        for server in all {
            server.shut().await;
        }
    });
}

async fn serve(server: Option<Rc<Server>>, name: ServerRef, op: Op) {
    let missing = || McpError::UnknownServer(name.label().to_string());
    match op {
        Op::Tools(answer) => {
            let listed = match &server {
                Some(s) => s.tools().await,
                None => Err(missing()),
            };
            let _ = answer.send(listed);
        }
        Op::Call { tool, arguments, answer } => {
            let output = match &server {
                Some(s) => s.call(tool, arguments).await,
                None => Err(missing()),
            };
            let _ = answer.send(output);
        }
    }
}
