//! The gateway's engine links, behind the neutral vocabulary of `shardgate_wire`.
//!
//! `EngineRequest` (token ids + validated sampling parameters) goes down, `TokenEvent`s come
//! back. Nothing above this module knows a wire format; nothing below it knows HTTP or text.
//! Architecture invariant: a transport never sees text, and never decides stop strings; the
//! pipeline never sees msgpack.

pub mod slot;
pub mod zmq;

pub use shardgate_wire::{Constraint, EngineRequest, FinishReason, Logprobs, SamplingParams, StopReason, TokenEvent};
