//! SMG's `vllm.grpc.engine.VllmEngine` messages (PyPI `smg-grpc-proto`, `vllm_engine.proto`
//! and `common.proto`), with the proto's field numbers. Only the fields the gateway sends or
//! reads are declared: prost skips the others on decode, so a newer servicer's additions
//! pass through unread.

use prost::{Message, Oneof};

#[derive(Clone, PartialEq, Message)]
pub struct SamplingParams {
    #[prost(float, optional, tag = "1")]
    pub temperature: Option<f32>,
    #[prost(float, tag = "2")]
    pub top_p: f32,
    #[prost(uint32, tag = "3")]
    pub top_k: u32,
    #[prost(float, tag = "4")]
    pub min_p: f32,
    #[prost(float, tag = "5")]
    pub frequency_penalty: f32,
    #[prost(float, tag = "6")]
    pub presence_penalty: f32,
    #[prost(float, tag = "7")]
    pub repetition_penalty: f32,
    #[prost(uint32, optional, tag = "8")]
    pub max_tokens: Option<u32>,
    #[prost(uint32, tag = "9")]
    pub min_tokens: u32,
    #[prost(uint32, repeated, tag = "11")]
    pub stop_token_ids: Vec<u32>,
    #[prost(bool, tag = "14")]
    pub ignore_eos: bool,
    #[prost(uint32, tag = "15")]
    pub n: u32,
    #[prost(int32, optional, tag = "22")]
    pub logprobs: Option<i32>,
    #[prost(int32, optional, tag = "23")]
    pub prompt_logprobs: Option<i32>,
    #[prost(int32, optional, tag = "24")]
    pub seed: Option<i32>,
    #[prost(map = "int32, float", tag = "26")]
    pub logit_bias: std::collections::HashMap<i32, f32>,
    #[prost(oneof = "Constraint", tags = "16, 17, 18, 19, 20")]
    pub constraint: Option<Constraint>,
}

#[derive(Clone, PartialEq, Oneof)]
pub enum Constraint {
    #[prost(string, tag = "16")]
    JsonSchema(String),
    #[prost(string, tag = "17")]
    Regex(String),
    #[prost(string, tag = "18")]
    Grammar(String),
    #[prost(string, tag = "19")]
    StructuralTag(String),
    #[prost(bool, tag = "20")]
    JsonObject(bool),
}

#[derive(Clone, PartialEq, Message)]
pub struct TokenizedInput {
    #[prost(string, tag = "1")]
    pub original_text: String,
    #[prost(uint32, repeated, tag = "2")]
    pub input_ids: Vec<u32>,
}

#[derive(Clone, PartialEq, Message)]
pub struct GenerateRequest {
    #[prost(string, tag = "1")]
    pub request_id: String,
    #[prost(message, optional, tag = "2")]
    pub tokenized: Option<TokenizedInput>,
    #[prost(message, optional, tag = "4")]
    pub sampling_params: Option<SamplingParams>,
    #[prost(bool, tag = "5")]
    pub stream: bool,
    #[prost(int32, optional, tag = "9")]
    pub data_parallel_rank: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TopLogProbs {
    #[prost(float, repeated, tag = "1")]
    pub values: Vec<f32>,
    #[prost(uint32, repeated, tag = "2")]
    pub token_ids: Vec<u32>,
}

#[derive(Clone, PartialEq, Message)]
pub struct OutputLogProbs {
    #[prost(float, repeated, tag = "1")]
    pub token_logprobs: Vec<f32>,
    #[prost(uint32, repeated, tag = "2")]
    pub token_ids: Vec<u32>,
    #[prost(message, repeated, tag = "3")]
    pub top_logprobs: Vec<TopLogProbs>,
}

#[derive(Clone, PartialEq, Message)]
pub struct InputTokenLogProb {
    #[prost(float, optional, tag = "1")]
    pub value: Option<f32>,
}

#[derive(Clone, PartialEq, Message)]
pub struct InputLogProbs {
    #[prost(message, repeated, tag = "1")]
    pub token_logprobs: Vec<InputTokenLogProb>,
    #[prost(uint32, repeated, tag = "2")]
    pub token_ids: Vec<u32>,
    #[prost(message, repeated, tag = "3")]
    pub top_logprobs: Vec<TopLogProbs>,
}

#[derive(Clone, PartialEq, Message)]
pub struct GenerateStreamChunk {
    #[prost(uint32, repeated, tag = "1")]
    pub token_ids: Vec<u32>,
    #[prost(uint32, tag = "2")]
    pub prompt_tokens: u32,
    #[prost(uint32, tag = "3")]
    pub completion_tokens: u32,
    #[prost(uint32, tag = "4")]
    pub cached_tokens: u32,
    #[prost(message, optional, tag = "5")]
    pub output_logprobs: Option<OutputLogProbs>,
    #[prost(message, optional, tag = "6")]
    pub input_logprobs: Option<InputLogProbs>,
    #[prost(uint32, tag = "7")]
    pub index: u32,
}

#[derive(Clone, PartialEq, Message)]
pub struct GenerateComplete {
    #[prost(uint32, repeated, tag = "1")]
    pub output_ids: Vec<u32>,
    #[prost(string, tag = "2")]
    pub finish_reason: String,
    #[prost(uint32, tag = "3")]
    pub prompt_tokens: u32,
    #[prost(uint32, tag = "4")]
    pub completion_tokens: u32,
    #[prost(uint32, tag = "5")]
    pub cached_tokens: u32,
    #[prost(uint32, tag = "8")]
    pub index: u32,
    #[prost(oneof = "MatchedStop", tags = "10, 11")]
    pub matched_stop: Option<MatchedStop>,
}

#[derive(Clone, PartialEq, Oneof)]
pub enum MatchedStop {
    #[prost(uint32, tag = "10")]
    TokenId(u32),
    #[prost(string, tag = "11")]
    Text(String),
}

#[derive(Clone, PartialEq, Message)]
pub struct GenerateResponse {
    #[prost(oneof = "Response", tags = "1, 2")]
    pub response: Option<Response>,
}

#[derive(Clone, PartialEq, Oneof)]
pub enum Response {
    #[prost(message, tag = "1")]
    Chunk(GenerateStreamChunk),
    #[prost(message, tag = "2")]
    Complete(GenerateComplete),
}

/// The empty requests (HealthCheck, GetModelInfo, GetServerInfo, GetTokenizer) and Abort's
/// empty answer.
#[derive(Clone, PartialEq, Message)]
pub struct Empty {}

#[derive(Clone, PartialEq, Message)]
pub struct HealthCheckResponse {
    #[prost(bool, tag = "1")]
    pub healthy: bool,
    #[prost(string, tag = "2")]
    pub message: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct AbortRequest {
    #[prost(string, repeated, tag = "1")]
    pub request_ids: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct GetModelInfoResponse {
    #[prost(string, tag = "1")]
    pub model_path: String,
    #[prost(bool, tag = "2")]
    pub is_generation: bool,
    #[prost(uint32, tag = "3")]
    pub max_context_length: u32,
    #[prost(uint32, tag = "4")]
    pub vocab_size: u32,
    #[prost(string, tag = "6")]
    pub served_model_name: String,
    #[prost(string, tag = "8")]
    pub model_type: String,
    #[prost(string, repeated, tag = "9")]
    pub architectures: Vec<String>,
    #[prost(int32, repeated, tag = "10")]
    pub eos_token_ids: Vec<i32>,
    #[prost(int32, tag = "12")]
    pub bos_token_id: i32,
}

#[derive(Clone, PartialEq, Message)]
pub struct GetServerInfoResponse {
    #[prost(uint32, tag = "1")]
    pub active_requests: u32,
    #[prost(bool, tag = "2")]
    pub is_paused: bool,
    #[prost(string, tag = "5")]
    pub server_type: String,
    #[prost(int32, tag = "9")]
    pub data_parallel_size: i32,
    #[prost(int32, tag = "20")]
    pub max_num_seqs: i32,
}

#[derive(Clone, PartialEq, Message)]
pub struct GetLoadsRequest {
    #[prost(int32, optional, tag = "1")]
    pub dp_rank: Option<i32>,
    #[prost(string, repeated, tag = "2")]
    pub include: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct GetLoadsResponse {
    #[prost(string, tag = "2")]
    pub version: String,
    #[prost(int32, tag = "3")]
    pub dp_rank_count: i32,
    #[prost(message, repeated, tag = "4")]
    pub loads: Vec<SchedulerLoad>,
}

#[derive(Clone, PartialEq, Message)]
pub struct SchedulerLoad {
    #[prost(int32, tag = "1")]
    pub dp_rank: i32,
    #[prost(int32, tag = "2")]
    pub num_running_reqs: i32,
    #[prost(int32, tag = "3")]
    pub num_waiting_reqs: i32,
    #[prost(int32, tag = "5")]
    pub num_used_tokens: i32,
    #[prost(int32, tag = "6")]
    pub max_total_num_tokens: i32,
    #[prost(double, tag = "7")]
    pub token_usage: f64,
    #[prost(int32, tag = "11")]
    pub max_running_requests: i32,
}

#[derive(Clone, PartialEq, Message)]
pub struct GetTokenizerChunk {
    #[prost(bytes = "vec", tag = "1")]
    pub data: Vec<u8>,
    #[prost(string, tag = "2")]
    pub sha256: String,
}
