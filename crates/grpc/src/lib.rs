//! gRPC engine workers: engines on other hosts, reached over HTTP/2.
//!
//! - `channel`: one HTTP/2 connection (the `h2` crate on the caller's monoio runtime through
//!   monoio's poll-io streams; no second runtime), calls multiplexed as streams, keep-alive
//!   PINGs, deadlines sent as `grpc-timeout` and kept locally.
//! - `endpoint`: a worker address and its connection, reconnecting with backoff.
//! - `frame`, `status`: gRPC's length-prefixed messages and its status trailers.
//! - `smg`: SMG's `VllmEngine` service: messages written with `prost` derives and the real
//!   proto's field numbers, `EngineRequest` → `GenerateRequest`, answers → `TokenEvent`s.
//! - `vllm`: vLLM's own `Inference` / `Control` services, the same way.
//! - `worker`: the service per worker (configured or detected) and one client over both;
//!   `info` what a worker says about itself, the same from either.
//! - `fault`: every failure typed, with its retry-safety and whether the worker is to blame;
//!   `response_error` an answer that decoded but cannot be read.
//!
//! Invariant: like `shardgate-wire`, nothing here sees text, decides stop strings or knows
//! HTTP clients, shards or the gateway; it speaks the neutral vocabulary of `shardgate-wire`.

pub mod channel;
pub mod endpoint;
pub mod fault;
pub mod frame;
pub mod info;
pub mod limits;
pub mod response_error;
pub mod smg;
pub mod status;
pub mod vllm;
pub mod worker;

pub use channel::{Call, Channel};
pub use endpoint::{Backoff, Endpoint};
pub use fault::Fault;
pub use info::{ModelInfo, RankLoad};
pub use response_error::ResponseError;
pub use worker::{EventStream, Service, WorkerClient};
