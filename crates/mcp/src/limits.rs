#![allow(non_upper_case_globals)]

//! Every bound and default of the MCP client, in one place, and `Limits`, the ones a deployment
//! (or a test) may set.
//!
//! Names carry their unit last (`_ms`, `_bytes`) and their qualifier after it (`_max`,
//! `_default`).

/// How long one `tools/call` may take before it fails as timed out and the server's session is
/// closed (a server that hung on one call would hang the next).
pub const call_timeout_ms_default: u64 = 30_000;

/// How long starting a server (spawning it or opening its HTTP session, and the MCP
/// handshake) and fetching its tool list may take, together.
pub const list_timeout_ms_default: u64 = 20_000;

/// The largest tool result kept, in bytes of its text; a larger one fails the call. It goes
/// into the model's next prompt, so it is bounded like any other input.
pub const result_bytes_max_default: usize = 1 << 20;

/// Calls and list requests waiting for the MCP thread, at most, before `Busy`. A shard never
/// waits for room.
pub const queue_capacity_default: usize = 1024;

/// How long the gateway's shutdown waits for every session to close.
pub const close_timeout_ms_default: u64 = 5_000;

/// Servers named by requests (`server_url`) kept open at once; the oldest is closed for a new
/// one beyond this.
pub const request_servers_max: usize = 32;

/// The most MCP calls one `/v1/responses` request runs, whatever its `max_tool_calls` says
/// (`--mcp-max-tool-calls`).
pub const tool_calls_max_default: usize = 10;

const _: () = assert!(0 < call_timeout_ms_default);
const _: () = assert!(0 < list_timeout_ms_default);
const _: () = assert!(0 < result_bytes_max_default);
const _: () = assert!(0 < queue_capacity_default);
const _: () = assert!(0 < request_servers_max);
const _: () = assert!(0 < close_timeout_ms_default);
const _: () = assert!(0 < tool_calls_max_default);

/// The bounds the MCP thread runs with. `Limits::default()` is the constants above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub call_timeout_ms: u64,
    pub list_timeout_ms: u64,
    pub result_bytes_max: usize,
    /// 0 counts as 1.
    pub queue_capacity: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            call_timeout_ms: call_timeout_ms_default,
            list_timeout_ms: list_timeout_ms_default,
            result_bytes_max: result_bytes_max_default,
            queue_capacity: queue_capacity_default,
        }
    }
}
