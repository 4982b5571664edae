//! `McpError`: why an MCP operation did not answer, naming the server, in words a client may be
//! shown. No HTTP here: the gateway decides what each becomes (a failed `mcp_call` item, or a
//! status for a tool list that could not be had).

use std::fmt;

/// Why an MCP operation failed. A tool that ran and reported an error is not one of these:
/// that is a `CallOutput` with `is_error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpError {
    /// The MCP queue was full; nothing was done.
    Busy,
    /// The MCP thread is gone.
    Unavailable,
    /// No server of this name is configured.
    UnknownServer(String),
    /// The server could not be started or reached, or its handshake failed.
    Start { server: String, why: String },
    /// Its tool list could not be fetched.
    List { server: String, why: String },
    /// The call failed below the tool: the connection broke, the server crashed or answered
    /// something that is not a result.
    Call { server: String, why: String },
    /// No answer within the limit (`what`: "starting and listing tools" or "the call").
    Timeout { server: String, what: &'static str, limit_ms: u64 },
    /// The result's text is larger than the cap.
    TooLarge { server: String, bytes: usize, cap: usize },
}

impl McpError {
    /// Whether the same request may succeed if sent again unchanged.
    pub fn retryable(&self) -> bool {
        matches!(self, McpError::Busy | McpError::Unavailable)
    }
}

impl fmt::Display for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpError::Busy => f.write_str("the MCP client is busy: too many tool operations are queued"),
            McpError::Unavailable => f.write_str("the MCP client is not running"),
            McpError::UnknownServer(name) => write!(f, "no MCP server named '{name}' is configured"),
            McpError::Start { server, why } => write!(f, "MCP server '{server}' could not be started: {why}"),
            McpError::List { server, why } => write!(f, "MCP server '{server}' did not list its tools: {why}"),
            McpError::Call { server, why } => write!(f, "MCP server '{server}' failed the call: {why}"),
            McpError::Timeout { server, what, limit_ms } => {
                write!(f, "MCP server '{server}' timed out: {what} took longer than {limit_ms} ms")
            }
            McpError::TooLarge { server, bytes, cap } => {
                write!(f, "MCP server '{server}' returned {bytes} bytes, more than the {cap}-byte cap")
            }
        }
    }
}

impl std::error::Error for McpError {}
