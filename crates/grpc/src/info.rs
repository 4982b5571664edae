//! What a worker says about itself, the same from either service.

/// The model and engine facts the gateway takes at registration.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    pub served_model_name: String,
    /// The model's path or id on the worker host.
    pub model_path: String,
    pub max_model_len: u32,
    /// The server's own name for itself: SMG's `server_type` (`vllm-grpc`), or vLLM's
    /// `api_version` and `engine_version` (`vllm 0.32.0`).
    pub server: String,
    pub data_parallel_size: u32,
    /// How many requests the engine runs at once (`--max-num-seqs`); 0 when not said.
    pub max_num_seqs: u32,
}

/// One data-parallel rank's load, for the same rank table the ZMQ engines' stats feed.
#[derive(Debug, Clone, PartialEq)]
pub struct RankLoad {
    pub rank: u32,
    pub running: u32,
    pub waiting: u32,
    /// KV-cache use in [0, 1).
    pub kv_usage: f64,
}
