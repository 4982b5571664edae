//! The engine-core wires, below everything that knows HTTP or text.
//!
//! - `request` and `output`: the engine-neutral vocabulary. `EngineRequest` (token ids +
//!   validated sampling parameters) goes down, `TokenEvent`s come back.
//! - `mm`: multimodal items (processed tensors, placeholder range, hash) a request carries.
//! - `msgpack`: the allocation-free reader and writer both codecs use.
//! - `vllm` and `tokenspeed`: the two engine wire codecs (requests, output batches,
//!   handshake messages), checked against bytes captured from the real engines.
//! - `zmtp`: our own ZMTP 3.1 for the data-plane sockets, driven by the caller's monoio
//!   runtime with no I/O thread in between.
//! - `sockdir`: socket paths and the socket-directory rules; derived handshake ports.
//!
//! Invariant: a codec never sees text and never decides stop strings; nothing here knows HTTP.

pub mod limits;
pub mod mm;
pub mod msgpack;
pub mod output;
pub mod request;
pub mod sockdir;
pub mod tokenspeed;
pub mod vllm;
pub mod zmtp;

pub use output::{FinishReason, Logprobs, RequestError, StopReason, TokenEvent};
pub use request::{Constraint, EngineRequest, SamplingParams};
