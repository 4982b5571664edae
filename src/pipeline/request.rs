//! A generation as an API adapter asks for it, in the pipeline's own terms: prompts as token
//! ids, sampling and output values as given (not yet checked), the output constraint and the
//! parse stage. An adapter reads its own field names and shapes into it; `generate::plan`
//! checks every value (`params::validate`, then the context window) and reports a bad one by
//! its neutral `Field`, for the adapter to name.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use super::invalid::{Field, Invalid, Problem, Refusal};
use super::parse::ParseSpec;
use crate::engine::Constraint;
use crate::error::ApiError;
use crate::metrics::Endpoint;
use crate::shard::ShardCtx;
use shardgate_text::render::RenderedPrompt;
use shardgate_text::ModelAssets;
use shardgate_wire::mm::Feature;

/// One prompt to generate from.
#[derive(Debug, Clone)]
pub struct Prompt {
    pub token_ids: Rc<[u32]>,
    /// The prompt as text, when the output repeats it (`echo`).
    pub text: Option<String>,
    /// Its images, processed, with their placeholder ranges in `token_ids` (`media::attach`).
    pub mm_features: Rc<[Feature]>,
}

impl Prompt {
    /// A text prompt, tokenized through the shard's caches; `echo` keeps the text.
    pub fn from_text(
        ctx: &ShardCtx,
        model: &ModelAssets,
        text: &str,
        add_special_tokens: bool,
        echo: bool,
    ) -> Result<Prompt, ApiError> {
        let ids = ctx.encode(model, text, add_special_tokens).map_err(ApiError::internal)?;
        Ok(Prompt { token_ids: Rc::from(ids), text: echo.then(|| text.to_string()), mm_features: Rc::from([]) })
    }

    /// A rendered chat prompt (the renderer's text carries its special tokens).
    pub fn from_rendered(ctx: &ShardCtx, model: &ModelAssets, rendered: &RenderedPrompt) -> Result<Prompt, ApiError> {
        let ids = ctx.encode_rendered(model, rendered, false).map_err(ApiError::internal)?;
        Ok(Prompt { token_ids: Rc::from(ids), text: None, mm_features: Rc::from([]) })
    }

    /// A prompt given as token ids. Every id must lie inside the vocabulary: one outside it
    /// would reach the engine's embedding lookup and take the engine down. `echo` decodes the
    /// text.
    pub fn from_ids(model: &ModelAssets, ids: &[u64], echo: bool) -> Result<Prompt, Refusal> {
        let vocab = model.vocab_size;
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            if id >= vocab as u64 {
                return Err(Invalid::new(Field::Prompt, Problem::TokenOutOfVocab { id, vocab }).into());
            }
            out.push(id as u32);
        }
        let text = if echo { Some(model.tokenizer.decode(&out, false).map_err(ApiError::internal)?) } else { None };
        Ok(Prompt { token_ids: Rc::from(out), text, mm_features: Rc::from([]) })
    }
}

/// Sampling and output values as the request gives them: `None` (or empty) where it gives
/// none, so that the model's generation defaults and vLLM's apply (`params::validate`).
#[derive(Debug, Clone, Default)]
pub struct SamplingRequest {
    /// Samples per prompt.
    pub n: Option<i64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    pub min_p: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub repetition_penalty: Option<f64>,
    pub seed: Option<i64>,
    pub ignore_eos: bool,
    pub min_tokens: Option<i64>,
    /// The client's output bound (clamped to the context per prompt, refused above it).
    pub max_tokens: Option<i64>,
    /// Token ids that end the output.
    pub stop_token_ids: Option<Vec<i64>>,
    /// The only token ids the output may contain.
    pub allowed_token_ids: Option<Vec<i64>>,
    /// Token id → bias, in the order given.
    pub logit_bias: Vec<(i64, f64)>,
    /// Words the output must not contain.
    pub bad_words: Vec<String>,
    pub constraint: Option<Constraint>,
    /// Strings that end the output (cut from it unless `include_stop_str_in_output`).
    pub stop: Vec<String>,
    pub include_stop_str_in_output: bool,
    pub skip_special_tokens: Option<bool>,
    pub spaces_between_special_tokens: Option<bool>,
    /// Top logprobs per output token; -1 asks for the whole vocabulary.
    pub logprobs: Option<i64>,
    /// The output repeats the prompt (scored too, with logprobs).
    pub echo: bool,
    /// Events as they happen, not one response at the end.
    pub stream: bool,
    /// Every output event carries the token counts so far.
    pub running_usage: bool,
    pub priority: Option<i64>,
    /// Keeps prefix-cache entries apart.
    pub cache_salt: Option<String>,
}

/// What an adapter hands the pipeline.
pub struct GenerateRequest {
    /// The endpoint, for metrics.
    pub endpoint: Endpoint,
    /// The response id; the engine's request ids derive from it.
    pub id: String,
    /// When the request arrived (time to first token and duration count from here).
    pub started: Instant,
    pub model: Arc<ModelAssets>,
    /// `n` choices are generated from each prompt.
    pub prompts: Vec<Prompt>,
    pub sampling: SamplingRequest,
    /// Reasoning and tool-call parsing of the output (inactive: plain text).
    pub parse: ParseSpec,
}
