#![allow(non_upper_case_globals)]

//! Every bound and default of the gRPC worker client, in one place.
//!
//! Names carry their unit last (`_s`, `_ms`, `_bytes`) and their qualifier after it
//! (`_max`, `_min`), so related limits line up. Nothing else in the crate hard-codes a limit.

/// Largest gRPC message taken from a worker (the 5-byte prefix's length); a bigger one fails
/// its call as a protocol fault before any of it is buffered. gRPC's own default is 4 MiB; a
/// tokenizer bundle chunk or a long prompt's logprobs can pass it.
pub const message_bytes_max: usize = 64 << 20;

/// TCP connect to a worker.
pub const connect_timeout_ms: u64 = 3_000;

/// HTTP/2 preface and SETTINGS exchange after the TCP connect.
pub const handshake_timeout_ms: u64 = 3_000;

/// Keep-alive PING interval on an idle or busy connection: a worker host that vanished without
/// a FIN is found within `keepalive_interval_ms + keepalive_timeout_ms`. Above the servicer's
/// `min_ping_interval_without_data_ms` (10 s), so it is never answered with GOAWAY too_many_pings.
pub const keepalive_interval_ms: u64 = 20_000;

/// Wait for a PING's acknowledgement before the connection is declared dead.
pub const keepalive_timeout_ms: u64 = 10_000;

/// First reconnect delay after a failed connect; doubled per failure up to the maximum.
pub const backoff_min_ms: u64 = 100;

/// Longest delay between reconnect attempts to a worker that keeps failing.
pub const backoff_max_ms: u64 = 5_000;

/// Deadline of a unary management call (health, model and server info, loads, abort).
pub const unary_deadline_ms: u64 = 10_000;

/// HTTP/2 stream and connection receive windows: a token stream is small, but a window below
/// the bytes in flight stalls a worker that answers many streams on one connection.
pub const stream_window_bytes: u32 = 1 << 20;
pub const connection_window_bytes: u32 = 16 << 20;

/// Largest header block taken from a worker (grpc-message texts included).
pub const header_list_bytes_max: u32 = 64 << 10;

/// Decoding: preallocation cap for lengths read from the wire (see `shardgate-wire`).
pub const decode_reserve_bytes_max: usize = 64 << 10;

const _: () = assert!(backoff_min_ms <= backoff_max_ms);
const _: () = assert!(keepalive_timeout_ms < keepalive_interval_ms);
const _: () = assert!(stream_window_bytes <= connection_window_bytes);
const _: () = assert!(message_bytes_max <= u32::MAX as usize);
