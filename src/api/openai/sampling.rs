//! The sampling and output fields chat and completions share, read into the pipeline's neutral
//! `SamplingRequest`. Here: each field's type and shape, the rules that are about OpenAI's
//! fields themselves (`stream_options` needs `stream`, chat's `top_logprobs` needs `logprobs`,
//! features this gateway does not offer), and which field carries which value. Whether a value
//! is valid (ranges, limits, the vocabulary) is the pipeline's check (`pipeline::params`).

use crate::api::fields::Fields;
use crate::error::ApiError;
use crate::pipeline::request::SamplingRequest;

/// Which endpoint the request came through (they differ in a few names and fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Chat,
    Completion,
}

/// What the shared fields say.
#[derive(Debug, Clone, Default)]
pub struct Sampling {
    pub request: SamplingRequest,
    /// `stream_options.include_usage`: a streamed response ends with the usage and every chunk
    /// carries a `usage` field.
    pub include_usage: bool,
}

fn bad(param: &str, message: impl Into<String>) -> ApiError {
    ApiError::invalid_param(param, message)
}

/// Reads the shared fields of a chat or completions request.
pub fn read(f: &Fields<'_>, api: Api) -> Result<Sampling, ApiError> {
    let stream = f.bool("stream")?.unwrap_or(false);
    let (include_usage, continuous_usage_stats) = match f.object("stream_options")? {
        Some(o) if !o.is_empty() && !stream => {
            return Err(bad("stream_options", "Stream options can only be defined when `stream=True`."))
        }
        Some(o) => {
            let so = Fields::new_map(o);
            (so.bool("include_usage")?.unwrap_or(false), so.bool("continuous_usage_stats")?.unwrap_or(false))
        }
        None => (false, false),
    };
    let n = f.i64("n")?;
    refuse_unsupported(f, api, n.unwrap_or(1))?;
    let mut r = SamplingRequest {
        n,
        stream,
        running_usage: include_usage && continuous_usage_stats,
        constraint: super::constraint::parse(f)?,
        min_tokens: f.i64("min_tokens")?,
        max_tokens: match api {
            Api::Chat => f.i64("max_completion_tokens")?.or(f.i64("max_tokens")?),
            Api::Completion => f.i64("max_tokens")?,
        },
        spaces_between_special_tokens: f.bool("spaces_between_special_tokens")?,
        ..common(f)?
    };
    // Chat's `echo` (vLLM: prepend the last message) is not offered; it is type-checked like
    // any known field.
    r.echo = f.bool("echo")?.unwrap_or(false) && api == Api::Completion;
    r.logprobs = logprobs(f, api)?;
    if f.has("prompt_logprobs") {
        // Only the completions echo path returns prompt logprobs (as vLLM does with echo).
        return Err(bad(
            "prompt_logprobs",
            "prompt_logprobs is not supported by this gateway; use echo with logprobs on /v1/completions",
        ));
    }
    r.allowed_token_ids = f.ids("allowed_token_ids")?;
    r.bad_words = f.strings("bad_words")?;
    Ok(Sampling { request: r, include_usage })
}

/// The sampling fields chat, completions and Responses read alike: OpenAI's and the vLLM
/// extensions all three of vLLM's request types accept.
pub fn common(f: &Fields<'_>) -> Result<SamplingRequest, ApiError> {
    Ok(SamplingRequest {
        temperature: f.f64("temperature")?,
        top_p: f.f64("top_p")?,
        top_k: f.i64("top_k")?,
        min_p: f.f64("min_p")?,
        presence_penalty: f.f64("presence_penalty")?,
        frequency_penalty: f.f64("frequency_penalty")?,
        repetition_penalty: f.f64("repetition_penalty")?,
        // vLLM's -1: no seed.
        seed: f.i64("seed")?.filter(|&s| s != -1),
        ignore_eos: f.bool("ignore_eos")?.unwrap_or(false),
        stop: f.strings("stop")?,
        stop_token_ids: f.ids("stop_token_ids")?,
        include_stop_str_in_output: f.bool("include_stop_str_in_output")?.unwrap_or(false),
        skip_special_tokens: f.bool("skip_special_tokens")?,
        logit_bias: logit_bias(f)?,
        priority: f.i64("priority")?,
        cache_salt: f.str("cache_salt")?.map(str::to_string),
        ..Default::default()
    })
}

/// Fields of features this gateway does not offer.
fn refuse_unsupported(f: &Fields<'_>, api: Api, n: i64) -> Result<(), ApiError> {
    if f.has("best_of") && f.i64("best_of")?.is_some_and(|b| b != n) {
        return Err(bad("best_of", "best_of is not supported; use n"));
    }
    if f.bool("use_beam_search")?.unwrap_or(false) {
        return Err(bad("use_beam_search", "beam search is not supported over the ZMQ backend"));
    }
    if api == Api::Completion && f.has("suffix") {
        return Err(bad("suffix", "suffix is not currently supported"));
    }
    Ok(())
}

/// Top logprobs per token: chat asks with `logprobs: true` and `top_logprobs: k`, completions
/// with `logprobs: k`.
fn logprobs(f: &Fields<'_>, api: Api) -> Result<Option<i64>, ApiError> {
    match api {
        Api::Chat => {
            let wanted = f.bool("logprobs")?.unwrap_or(false);
            let top = f.i64("top_logprobs")?;
            if let Some(t) = top {
                if t < 0 && t != -1 {
                    return Err(bad("top_logprobs", "`top_logprobs` must be a positive value or -1."));
                }
                if (t == -1 || t > 0) && !wanted {
                    return Err(bad("top_logprobs", "when using `top_logprobs`, `logprobs` must be set to true."));
                }
            }
            Ok(wanted.then(|| top.unwrap_or(0)))
        }
        Api::Completion => match f.i64("logprobs")? {
            Some(k) if k < 0 => Err(bad("logprobs", format!("logprobs must be non-negative or -1, got {k}."))),
            k => Ok(k),
        },
    }
}

/// `logit_bias`: token ids (as JSON object keys) → numbers.
pub fn logit_bias(f: &Fields<'_>) -> Result<Vec<(i64, f64)>, ApiError> {
    let Some(map) = f.object("logit_bias")? else { return Ok(Vec::new()) };
    let mut out = Vec::with_capacity(map.len().min(crate::limits::logit_bias_entries_max + 1));
    for (k, v) in map {
        let id: i64 =
            k.trim().parse().map_err(|_| bad("logit_bias", format!("logit_bias keys must be token ids, got {k:?}")))?;
        let bias =
            v.as_f64().ok_or_else(|| bad("logit_bias", format!("logit_bias values must be numbers, got {v}")))?;
        out.push((id, bias));
    }
    Ok(out)
}
