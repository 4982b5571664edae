//! The gateway's links to engines, behind the neutral vocabulary of `shardgate_wire`.
//!
//! `EngineRequest` (token ids + validated sampling parameters) goes down, `TokenEvent`s come
//! back. Nothing above this module knows a wire format; nothing below it knows HTTP or text.
//! Architecture invariant: a transport never sees text, and never decides stop strings; the
//! pipeline never sees msgpack.
//!
//! Layout: `link` is one shard's link to one worker (the book of its live requests, whatever
//! transport carries them), `submission` a request in flight on one, `slot` its event queue,
//! `loss` why a link closed; `zmq` the transport to engines on this host, `grpc` the one to
//! engines on other hosts (HTTP/2).

pub mod book;
pub mod grpc;
pub mod link;
pub mod loss;
pub mod slot;
pub mod submit_error;
pub mod zmq;

pub use shardgate_wire::{Constraint, EngineRequest, FinishReason, Logprobs, SamplingParams, StopReason, TokenEvent};
