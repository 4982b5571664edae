//! The host's KV-event stream: every engine rank's KV-cache event batches, of every worker,
//! re-published on one ZMQ PUB socket (+ one replay ROUTER) in vLLM's own format, so a
//! scheduler in front of many hosts subscribes once per host instead of once per engine rank.
//!
//! Shard 0's KV-event subscriptions (`engine::zmq::kv_events`) hand each batch they apply, in
//! each rank's sequence order, to a `forward::KvForward`: one message on an in-process socket
//! that never blocks the shard. The `publisher` thread numbers the batches with the host's own
//! sequence, keeps them for replay, and sets each batch's `data_parallel_rank` to the host-level
//! rank of its (worker, engine rank); the engine's timestamp and events are its own bytes.
//!
//! The stream invents no block: when a rank's batches were lost (a gap its engine could not
//! replay, an undecodable batch, a full hand-over queue, a reconnected worker), the host rank
//! gets one `AllBlocksCleared`, so a subscriber forgets what it can no longer trust about that
//! rank and then learns its new stores, as the gateway's own index does.

pub mod endpoints;
pub mod forward;
pub mod publisher;

/// Where shard 0 hands batches to the publisher thread (both use the gateway's one context).
const HANDOVER_ADDRESS: &str = "inproc://shardgate-kv-publish";

/// A hand-over message's first byte.
const KIND_BATCH: u8 = b'B';
const KIND_LOST: u8 = b'L';
