//! Engine transports behind one neutral vocabulary.
//!
//! `EngineRequest` (token ids + validated sampling parameters) goes down, `TokenEvent`s come
//! back. Nothing above this module knows a wire format; nothing below it knows HTTP or text.
//! Architecture invariant: a transport never sees text, and never decides stop strings; the
//! pipeline never sees msgpack.

pub mod output;
pub mod request;
pub mod slot;
pub mod zmq;

pub use output::{FinishReason, Logprobs, StopReason, TokenEvent};
pub use request::{Constraint, EngineRequest, SamplingParams};
