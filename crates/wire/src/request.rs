//! The engine-neutral request: what every transport encodes.

use std::rc::Rc;

/// Sampling parameters after validation and defaulting. Field defaults equal vLLM's
/// `SamplingParams` defaults, so a transport can omit a field equal to its default.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingParams {
    pub temperature: f64,
    pub top_p: f64,
    pub top_k: i32,
    pub min_p: f64,
    pub seed: Option<i64>,
    pub presence_penalty: f64,
    pub frequency_penalty: f64,
    pub repetition_penalty: f64,
    pub max_tokens: u32,
    pub min_tokens: u32,
    /// Stop token ids the engine must honour (user's plus generation-config EOS extras).
    pub stop_token_ids: Vec<u32>,
    pub ignore_eos: bool,
    /// The primary EOS id; `None` when `ignore_eos`.
    pub eos_token_id: Option<u32>,
    /// EOS + stop token ids + generation-config EOS ids: masked until `min_tokens`.
    pub all_stop_token_ids: Vec<u32>,
    pub logprobs: Option<i32>,
    pub prompt_logprobs: Option<i32>,
    pub logit_bias: Vec<(u32, f64)>,
    pub allowed_token_ids: Option<Vec<u32>>,
    pub bad_words_token_ids: Vec<Vec<u32>>,
    /// A grammar the engine enforces token by token (constrained decoding).
    pub constraint: Option<Constraint>,
}

/// What the output must match. Schemas and tags travel as JSON text.
#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    JsonSchema(String),
    /// Any JSON object (`response_format: json_object`).
    JsonObject,
    Regex(String),
    /// EBNF (GBNF) grammar, xgrammar's dialect (a choice list arrives as one).
    Grammar(String),
    /// An xgrammar structural tag, as JSON.
    StructuralTag(String),
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
            min_p: 0.0,
            seed: None,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            repetition_penalty: 1.0,
            max_tokens: 16,
            min_tokens: 0,
            stop_token_ids: Vec::new(),
            ignore_eos: false,
            eos_token_id: None,
            all_stop_token_ids: Vec::new(),
            logprobs: None,
            prompt_logprobs: None,
            logit_bias: Vec::new(),
            allowed_token_ids: None,
            bad_words_token_ids: Vec::new(),
            constraint: None,
        }
    }
}

/// One single-sample generation request as the engine sees it.
#[derive(Debug, Clone)]
pub struct EngineRequest {
    /// Unique among the engine's live requests (see `util::ids::engine_request_id`).
    pub request_id: String,
    /// Shared by the `n` samples of one API request.
    pub prompt_token_ids: Rc<[u32]>,
    pub sampling: SamplingParams,
    /// Wall-clock seconds at arrival (vLLM uses it for FCFS tie-breaks and metrics).
    pub arrival_time: f64,
    pub cache_salt: Option<String>,
    pub priority: i32,
    /// The request's images, processed, in prompt order; empty for text.
    pub mm_features: Rc<[crate::mm::Feature]>,
}
