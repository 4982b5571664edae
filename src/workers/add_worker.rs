//! `AddWorker`: a worker to register, as `POST /workers` (or the command line) describes it.
//! Plain data, so the shard mailbox can carry it without depending on the registration code.

use serde_json::{Map, Value};

/// A worker to add, as the API (or the command line) describes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AddWorker {
    pub url: String,
    pub runtime: Option<String>,
    pub zmq_handshake_address: Option<String>,
    pub dp_size: Option<usize>,
    pub dp_rank: Option<i64>,
    pub worker_type: Option<String>,
    pub connection_mode: Option<String>,
    pub labels: Map<String, Value>,
    pub priority: i64,
    /// HTTP workers: the key sent to the upstream.
    pub api_key: Option<String>,
    /// HTTP workers: `models[0].id`, the name clients use for the upstream's model.
    pub model_id: Option<String>,
}
