#![allow(non_upper_case_globals)]

//! Every bound and sizing rule of the load generator, in one place.
//!
//! Names carry their unit last (`_bytes`, `_tokens`) and their qualifier after it (`_max`,
//! `_min`).

/// Room made in the read buffer before each read.
pub const client_read_bytes_min: usize = 16 * 1024;

/// A head larger than this is not a response we can use.
pub const response_head_bytes_max: usize = 64 * 1024;

/// Connections opened ahead of a run with a cap, per core, at most.
pub const preopen_connections_per_core_max: usize = 1024;

/// `--http2`: the receive windows the client announces, per stream and per connection. Large
/// enough that flow control never paces a stream the client keeps up with (it releases what it
/// reads at once), so latencies are the server's.
pub const http2_stream_window_bytes: u32 = 4 * 1024 * 1024;
pub const http2_connection_window_bytes: u32 = 64 * 1024 * 1024;

/// A record's buffers are sized up front for at most this many output tokens (a request asking
/// for more grows them past it).
pub const record_presize_tokens_max: usize = 4096;

/// A record's text buffer gets this many bytes per presized token (English and random-token
/// text average 4 to 6).
pub const record_text_bytes_per_token: usize = 8;

/// Re-encoding a decoded random sequence changes its length; this many rounds of trimming or
/// padding make it exact for practically every prompt (vLLM uses the same bound).
pub const prompt_length_fix_rounds_max: usize = 10;

/// ShareGPT filters (vLLM's): too-short pairs say nothing, too-long ones exceed small models.
pub const sharegpt_tokens_min: usize = 4;
pub const sharegpt_prompt_tokens_max: usize = 1024;
pub const sharegpt_total_tokens_max: usize = 2048;

const _: () = assert!(sharegpt_tokens_min < sharegpt_prompt_tokens_max);
const _: () = assert!(sharegpt_prompt_tokens_max <= sharegpt_total_tokens_max);
