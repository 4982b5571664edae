//! The TokenSpeed 0.1.1 headless-engine wire (`python -m tokenspeed.cli serve --headless`), as
//! pure codecs: no sockets, no shards (see `shared/reference/tokenspeed-wire-and-grpc-protos.md`).
//!
//! Same sockets, identities and HELLO/INIT/READY statuses as vLLM's EngineCore, but a different
//! payload dialect: ADD is a *tagged* positional `TokenizedGenerateReqInput` with SGLang-style
//! sampling parameters, outputs are a *columnar* `BatchTokenIDOutSlim` with a load snapshot at
//! its tail, and only ADD and ABORT exist (no UTILITY, no DP waves).
//!
//! What a client has to add on top of the bytes (the link's job, helped by `finish`):
//! - the engine uses only `inputs[0]`/`outputs[0]` of INIT, so one client socket pair carries
//!   every request and every output of the worker;
//! - a client ABORT gets no terminal frame, so the request finishes locally;
//! - the matched stop/EOS token is the last token of a `stop` finish, exactly as vLLM delivers
//!   it, so `TokenEvent`s keep it and `pipeline::choice` strips it from the text, as for vLLM;
//! - the wire names no matched stop token; `finish::RequestFinish` derives vLLM's
//!   `stop_reason` from the request's own stop ids.
//!
//! Provenance: field orders, defaults and engine checks from the `tokenspeed==0.1.1` wheel
//! (`runtime/engine/{zmq_wire,zmq_msgpack,io_struct}.py`, `runtime/sampling/sampling_params.py`);
//! fixtures in `tests/wire/tokenspeed/` decoded and encoded by those very modules.

pub mod finish;
pub mod handshake;
pub mod output;
pub mod request;

/// Request type bytes (`zmq_wire.REQ_TYPE_*`). Any other byte is dropped by the engine with a
/// log line and no reply.
pub const REQUEST_ADD: u8 = 0x00;
pub const REQUEST_ABORT: u8 = 0x01;

/// The single raw frame the engine pushes before it exits (also on a graceful shutdown).
pub const ENGINE_CORE_DEAD: &[u8] = b"ENGINE_CORE_DEAD";

/// Where a TokenSpeed engine dials when started without `--data-parallel-address` /
/// `--data-parallel-rpc-port`.
pub const DEFAULT_HANDSHAKE_ADDRESS: &str = "tcp://127.0.0.1:30500";

/// The ready response's `vllm_version` starts with this on a TokenSpeed engine; it is the only
/// way to tell the two engines apart, and only after INIT.
pub const VERSION_PREFIX: &str = "tokenspeed-";

/// How long the engine remembers an ABORT for a request id it does not (or no longer) know; a
/// new request with that id inside the window is dropped without any output.
pub const ENGINE_PENDING_ABORT_TTL_S: u64 = 300;

/// How long the engine waits for INIT after its HELLO before it fails startup.
pub const ENGINE_INIT_TIMEOUT_S: u64 = 600;

/// A `stream = false` request still gets a frame at its first token and every this many tokens.
pub const ENGINE_NON_STREAM_FRAME_TOKENS: u32 = 50;

/// Largest `top_k` the engine's fused sampling kernel takes (it aborts `top_k >= 128`).
pub const ENGINE_TOP_K_MAX: i32 = 127;

/// Largest `repetition_penalty` the engine accepts (vLLM has no upper bound).
pub const ENGINE_REPETITION_PENALTY_MAX: f64 = 2.0;

/// The engine's ZMQ identity: `--zmq-engine-index` + its attention-DP rank, as two
/// little-endian bytes (the same value the engine puts in `engine_index` of its outputs).
pub fn engine_identity(engine_index: u16) -> [u8; 2] {
    engine_index.to_le_bytes()
}

/// The engine index behind a ROUTER identity frame; `None` unless it is exactly two bytes.
pub fn engine_index_of(identity: &[u8]) -> Option<u16> {
    match identity {
        [lo, hi] => Some(u16::from_le_bytes([*lo, *hi])),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_index_plus_rank_little_endian() {
        assert_eq!(engine_identity(0), [0, 0]);
        assert_eq!(engine_identity(4 + 1), [5, 0]);
        assert_eq!(engine_identity(0x0102), [2, 1]);
        assert_eq!(engine_index_of(&[5, 0]), Some(5));
        assert_eq!(engine_index_of(&[5]), None);
        assert_eq!(engine_index_of(&[5, 0, 0]), None);
    }
}
