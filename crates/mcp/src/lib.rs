//! MCP tool servers for the gateway's `/v1/responses` tool loop: the servers of
//! `--mcp-config-path` (stdio children or streamable HTTP) and those a request names, reached
//! with the official Rust SDK (`rmcp`).
//!
//! # Shape
//!
//! An `Mcp` is a handle to one thread (`shardgate-mcp`) running its own tokio runtime, where
//! every session lives. Shards offer operations (list a server's tools, call one) through a
//! bounded queue and await a `Reply`, a future that needs no particular runtime, so a monoio
//! shard never blocks on a tool server (`thread.rs`, the same shape as `shardgate-store`).
//!
//! # Invariants
//!
//! - Every operation ends within its time limit (`limits.rs`): starting and listing, or the
//!   call. A session that timed out or broke is closed (its child killed and reaped) and
//!   reopened by the next use.
//! - A tool list is fetched once per session and again after the server's
//!   `notifications/tools/list_changed`.
//! - A result is at most `result_bytes_max` bytes of text; a larger one fails the call.
//! - Environment and header values are never logged nor shown by `Debug`.
//! - The crate knows no HTTP API and no OpenAI shapes: the gateway maps `McpError` and
//!   `CallOutput` to its items and statuses.
//!
//! # Layout
//!
//! `thread.rs` the handle, the queue and the thread; `session.rs` one server's session;
//! `config.rs` the configuration file; `error.rs`; `limits.rs`.

mod config;
mod error;
mod http;
pub mod limits;
mod session;
mod thread;

pub use config::{load, parse, valid_name, ServerConfig, Transport};
pub use error::McpError;
pub use limits::Limits;
pub use session::{CallOutput, ToolInfo};
pub use thread::{Mcp, Reply, ServerRef};
