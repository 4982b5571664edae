//! vLLM's own `vllm.Inference` and `vllm.Control` messages (crate `vllm-proto` 0.6,
//! `inference.proto` and `control.proto`; `vllm-rs` 0.33 reports `proto_version` 0.6.0), with
//! the proto's field numbers. Only the fields the gateway sends or reads are declared.

use prost::{Message, Oneof};

#[derive(Clone, PartialEq, Message)]
pub struct TokenIds {
    #[prost(uint32, repeated, tag = "1")]
    pub ids: Vec<u32>,
}

#[derive(Clone, PartialEq, Message)]
pub struct GenerateRequest {
    #[prost(string, tag = "1")]
    pub request_id: String,
    #[prost(message, optional, tag = "4")]
    pub token_ids: Option<TokenIds>,
    #[prost(float, optional, tag = "5")]
    pub temperature: Option<f32>,
    #[prost(message, optional, tag = "6")]
    pub sampling: Option<RandomSampling>,
    #[prost(message, optional, tag = "7")]
    pub decoding: Option<DecodingParameters>,
    #[prost(message, optional, tag = "8")]
    pub stopping: Option<StoppingCriteria>,
    #[prost(message, optional, tag = "9")]
    pub response: Option<ResponseOptions>,
    #[prost(message, optional, tag = "10")]
    pub kv: Option<KvCacheParameters>,
    #[prost(int32, tag = "12")]
    pub priority: i32,
}

#[derive(Clone, PartialEq, Message)]
pub struct RandomSampling {
    #[prost(uint32, tag = "1")]
    pub num_sequences: u32,
    #[prost(uint32, optional, tag = "2")]
    pub top_k: Option<u32>,
    #[prost(float, optional, tag = "3")]
    pub top_p: Option<f32>,
    #[prost(float, optional, tag = "4")]
    pub min_p: Option<f32>,
    #[prost(int64, optional, tag = "5")]
    pub seed: Option<i64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct DecodingParameters {
    #[prost(float, tag = "1")]
    pub presence_penalty: f32,
    #[prost(float, tag = "2")]
    pub frequency_penalty: f32,
    #[prost(float, tag = "3")]
    pub repetition_penalty: f32,
    #[prost(map = "uint32, float", tag = "4")]
    pub logit_bias: std::collections::HashMap<u32, f32>,
    #[prost(uint32, repeated, tag = "5")]
    pub allowed_token_ids: Vec<u32>,
    #[prost(oneof = "StructuredOutput", tags = "6, 7, 9, 10, 11")]
    pub structured_output: Option<StructuredOutput>,
    #[prost(message, repeated, tag = "12")]
    pub bad_words_token_ids: Vec<TokenIds>,
}

#[derive(Clone, PartialEq, Oneof)]
pub enum StructuredOutput {
    #[prost(string, tag = "6")]
    Json(String),
    #[prost(string, tag = "7")]
    Regex(String),
    #[prost(string, tag = "9")]
    Grammar(String),
    #[prost(bool, tag = "10")]
    JsonObject(bool),
    #[prost(string, tag = "11")]
    StructuralTag(String),
}

#[derive(Clone, PartialEq, Message)]
pub struct StoppingCriteria {
    #[prost(uint32, tag = "1")]
    pub max_new_tokens: u32,
    #[prost(uint32, tag = "2")]
    pub min_new_tokens: u32,
    #[prost(uint32, repeated, tag = "3")]
    pub stop_token_ids: Vec<u32>,
    #[prost(bool, tag = "6")]
    pub ignore_eos: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct ResponseOptions {
    #[prost(bool, tag = "1")]
    pub prompt_token_ids: bool,
    #[prost(bool, tag = "2")]
    pub prompt_logprobs: bool,
    #[prost(message, optional, tag = "3")]
    pub prompt_candidates: Option<CandidateTokens>,
    #[prost(bool, optional, tag = "4")]
    pub output_text: Option<bool>,
    #[prost(bool, tag = "5")]
    pub output_token_ids: bool,
    #[prost(bool, tag = "6")]
    pub output_logprobs: bool,
    #[prost(message, optional, tag = "7")]
    pub output_candidates: Option<CandidateTokens>,
}

#[derive(Clone, PartialEq, Message)]
pub struct CandidateTokens {
    #[prost(oneof = "Select", tags = "1, 3")]
    pub select: Option<Select>,
}

#[derive(Clone, PartialEq, Oneof)]
pub enum Select {
    #[prost(uint32, tag = "1")]
    TopN(u32),
    #[prost(bool, tag = "3")]
    All(bool),
}

#[derive(Clone, PartialEq, Message)]
pub struct KvCacheParameters {
    #[prost(string, tag = "2")]
    pub cache_salt: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct GenerateResponse {
    #[prost(message, optional, tag = "1")]
    pub prompt_info: Option<PromptInfo>,
    #[prost(message, optional, tag = "2")]
    pub outputs: Option<SequenceOutput>,
}

#[derive(Clone, PartialEq, Message)]
pub struct SequenceOutput {
    #[prost(uint32, tag = "1")]
    pub index: u32,
    #[prost(uint32, repeated, tag = "4")]
    pub token_ids: Vec<u32>,
    #[prost(float, repeated, tag = "5")]
    pub logprobs: Vec<f32>,
    #[prost(uint32, repeated, tag = "6")]
    pub ranks: Vec<u32>,
    #[prost(message, repeated, tag = "7")]
    pub candidate_tokens: Vec<CandidateTokenInfo>,
    #[prost(message, optional, tag = "8")]
    pub finish_info: Option<FinishInfo>,
}

#[derive(Clone, PartialEq, Message)]
pub struct PromptInfo {
    #[prost(uint32, tag = "1")]
    pub num_prompt_tokens: u32,
    #[prost(uint32, repeated, tag = "2")]
    pub token_ids: Vec<u32>,
    #[prost(float, repeated, tag = "3")]
    pub logprobs: Vec<f32>,
    #[prost(uint32, repeated, tag = "4")]
    pub ranks: Vec<u32>,
    #[prost(message, repeated, tag = "5")]
    pub candidate_tokens: Vec<CandidateTokenInfo>,
}

#[derive(Clone, PartialEq, Message)]
pub struct FinishInfo {
    #[prost(uint32, tag = "1")]
    pub num_output_tokens: u32,
    /// `FinishReason`'s number; kept as the number so an unknown one is seen, not defaulted.
    #[prost(int32, tag = "2")]
    pub finish_reason: i32,
    #[prost(oneof = "StopReason", tags = "3, 4, 5")]
    pub stop_reason: Option<StopReason>,
    #[prost(uint32, optional, tag = "9")]
    pub num_cached_tokens: Option<u32>,
}

/// `FinishInfo.FinishReason`.
pub mod finish_reason {
    pub const NOT_FINISHED: i32 = 0;
    pub const LENGTH: i32 = 1;
    pub const STOP: i32 = 2;
    pub const ABORTED: i32 = 3;
}

#[derive(Clone, PartialEq, Oneof)]
pub enum StopReason {
    #[prost(uint32, tag = "3")]
    StopTokenId(u32),
    #[prost(uint32, tag = "4")]
    EosTokenId(u32),
    #[prost(string, tag = "5")]
    StopString(String),
}

#[derive(Clone, PartialEq, Message)]
pub struct CandidateTokenInfo {
    #[prost(message, repeated, tag = "1")]
    pub tokens: Vec<TokenInfo>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TokenInfo {
    #[prost(uint32, tag = "1")]
    pub id: u32,
    #[prost(float, tag = "2")]
    pub logprob: f32,
    #[prost(uint32, tag = "3")]
    pub rank: u32,
}

/// The empty requests (GetServerInfo, GetModelInfo) and Abort's empty answer.
#[derive(Clone, PartialEq, Message)]
pub struct Empty {}

#[derive(Clone, PartialEq, Message)]
pub struct ServerInfo {
    #[prost(string, tag = "1")]
    pub engine_version: String,
    #[prost(string, tag = "2")]
    pub api_version: String,
    #[prost(message, optional, tag = "4")]
    pub parallelism: Option<ParallelismInfo>,
    #[prost(uint32, tag = "5")]
    pub max_model_len: u32,
    #[prost(uint64, tag = "8")]
    pub max_running_requests: u64,
    #[prost(string, tag = "12")]
    pub proto_version: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct ParallelismInfo {
    #[prost(uint32, tag = "3")]
    pub data_parallel_size: u32,
}

#[derive(Clone, PartialEq, Message)]
pub struct ModelInfo {
    #[prost(string, tag = "1")]
    pub model_id: String,
    #[prost(string, tag = "2")]
    pub served_model_name: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct AbortRequest {
    #[prost(string, repeated, tag = "1")]
    pub request_ids: Vec<String>,
}
