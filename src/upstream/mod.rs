//! HTTP workers: OpenAI-compatible upstreams (`vllm serve`, SGLang, another shardgate) that do
//! all text work themselves; the gateway only routes and relays.
//!
//! `target.rs` the upstream a worker URL names (and what its probes learned: its models, its
//! failures in a row); `client.rs` a small HTTP/1.1 client on the shard's runtime (`head.rs`
//! the response head, `body.rs` its framing) with a keep-alive pool per shard and upstream
//! (`pool.rs`); `peek.rs` the few request fields routing reads, and the `model` splice;
//! `choose.rs` the choice between HTTP and engine workers, made before any adapter parses the
//! body; `relay.rs` one request relayed, with one retry on another worker while nothing reached
//! the client; `probe.rs` the control shard's health loop of one HTTP worker; `fault.rs` what
//! can go wrong upstream, whether a retry is safe, and the client's error.
//!
//! *Invariants:* a request body and a response body are never parsed and re-serialised (only
//! `model` may be spliced); a streamed response reaches the client chunk by chunk as it comes;
//! a client that goes away closes its upstream connection; a connection goes back to the pool
//! only after a complete response.

pub mod body;
pub mod choose;
pub mod client;
pub mod fault;
pub mod head;
pub mod peek;
pub mod pool;
pub mod probe;
pub mod relay;
pub mod target;

pub use target::Upstream;
