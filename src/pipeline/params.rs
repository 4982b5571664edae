//! Request parameters → validated engine `SamplingParams` plus the gateway-side `OutputOptions`.
//!
//! Validation mirrors vLLM's API server and engine (`SamplingParams._verify_args`, `verify`,
//! and the protocol validators), with vLLM's messages: an engine decodes and re-validates every
//! ADD in its input thread, and a parameter it rejects there kills that thread (a silently deaf
//! engine), so nothing invalid may leave the gateway.

use crate::api::fields::Fields;
use crate::engine::SamplingParams;
use crate::error::ApiError;
use crate::limits;
use shardgate_text::ModelAssets;
use shardgate_util::json::py_float;

/// Which API the request came through (they differ in a few names and defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Chat,
    Completion,
}

/// What the gateway does with the engine's tokens.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OutputOptions {
    pub stop: Vec<String>,
    /// Stop strings that are exactly one token, by id (also sent as stop token ids).
    pub stop_string_tokens: Vec<(u32, usize)>,
    pub include_stop_str_in_output: bool,
    pub skip_special_tokens: bool,
    pub spaces_between_special_tokens: bool,
    pub min_tokens: u32,
    /// Top logprobs per token, when logprobs were asked for.
    pub logprobs: Option<u32>,
    pub echo: bool,
}

/// Everything decided from the request before dispatch.
#[derive(Debug, Clone)]
pub struct RequestParams {
    pub n: u32,
    pub sampling: SamplingParams,
    pub output: OutputOptions,
    pub stream: bool,
    pub include_usage: bool,
    pub continuous_usage_stats: bool,
    pub priority: i32,
    pub cache_salt: Option<String>,
    /// `max_tokens` as the client gave it (clamped to the context per prompt later).
    pub max_tokens_requested: Option<u32>,
    /// The client's own output bound and the field it came in, checked against the context
    /// window once the worker is known (`check_max_tokens`).
    pub max_tokens_client: Option<(i64, &'static str)>,
}

fn bad(param: &str, message: String) -> ApiError {
    ApiError::invalid_param(param, message)
}

/// Reads and validates the sampling and output parameters shared by chat and completions.
pub fn parse(f: &Fields<'_>, endpoint: Endpoint, model: &ModelAssets) -> Result<RequestParams, ApiError> {
    let stream = f.bool("stream")?.unwrap_or(false);
    let (include_usage, continuous_usage_stats) = match f.object("stream_options")? {
        Some(o) if !o.is_empty() && !stream => {
            return Err(bad("stream_options", "Stream options can only be defined when `stream=True`.".into()))
        }
        Some(o) => {
            let so = Fields::new_map(o);
            (so.bool("include_usage")?.unwrap_or(false), so.bool("continuous_usage_stats")?.unwrap_or(false))
        }
        None => (false, false),
    };
    let n = f.i64("n")?.unwrap_or(1);
    if n < 1 {
        return Err(bad("n", format!("n must be at least 1, got {n}.")));
    }
    if n > limits::choices_per_request_max as i64 {
        return Err(bad("n", format!("n must be at most {}, got {n}.", limits::choices_per_request_max)));
    }
    if f.has("best_of") && f.i64("best_of")?.is_some_and(|b| b != n) {
        return Err(bad("best_of", "best_of is not supported; use n".into()));
    }
    if f.bool("use_beam_search")?.unwrap_or(false) {
        return Err(bad("use_beam_search", "beam search is not supported over the ZMQ backend".into()));
    }
    if endpoint == Endpoint::Completion && f.has("suffix") {
        return Err(bad("suffix", "suffix is not currently supported".into()));
    }

    let d = &model.generation_defaults;
    let mut s = SamplingParams {
        temperature: f.f64("temperature")?.or(d.temperature).unwrap_or(1.0),
        top_p: f.f64("top_p")?.or(d.top_p).unwrap_or(1.0),
        top_k: match f.i64("top_k")? {
            Some(k) => i32::try_from(k)
                .map_err(|_| bad("top_k", format!("top_k must be 0 (disable), or at least 1, got {k}.")))?,
            None => d.top_k.unwrap_or(0),
        },
        min_p: f.f64("min_p")?.or(d.min_p).unwrap_or(0.0),
        presence_penalty: f.f64("presence_penalty")?.unwrap_or(0.0),
        frequency_penalty: f.f64("frequency_penalty")?.unwrap_or(0.0),
        repetition_penalty: f.f64("repetition_penalty")?.or(d.repetition_penalty).unwrap_or(1.0),
        constraint: super::constraint::parse(f)?,
        ..Default::default()
    };
    s.seed = match f.i64("seed")? {
        Some(-1) | None => None,
        Some(seed) => Some(seed),
    };
    s.ignore_eos = f.bool("ignore_eos")?.unwrap_or(false);
    let min_tokens = f.i64("min_tokens")?.unwrap_or(0);
    if min_tokens < 0 {
        return Err(bad("min_tokens", format!("min_tokens must be greater than or equal to 0, got {min_tokens}.")));
    }
    let max_tokens_requested = match endpoint {
        Endpoint::Chat => f.i64("max_completion_tokens")?.or(f.i64("max_tokens")?),
        Endpoint::Completion => f.i64("max_tokens")?,
    };
    let max_tokens_param = if f.has("max_completion_tokens") { "max_completion_tokens" } else { "max_tokens" };
    if let Some(m) = max_tokens_requested {
        if m < 1 {
            return Err(bad(max_tokens_param, format!("max_tokens must be at least 1, got {m}.")));
        }
    }
    let max_tokens_client = max_tokens_requested.map(|m| (m, max_tokens_param));
    let max_tokens_requested = max_tokens_requested.map(|m| m.min(u32::MAX as i64) as u32).or(d.max_new_tokens);
    if let Some(m) = max_tokens_requested {
        if min_tokens > m as i64 {
            return Err(bad(
                "min_tokens",
                format!("min_tokens must be less than or equal to max_tokens={m}, got {min_tokens}."),
            ));
        }
    }
    s.min_tokens = min_tokens.min(u32::MAX as i64) as u32;
    verify_ranges(&s)?;

    let mut output = OutputOptions {
        stop: f.strings("stop")?,
        include_stop_str_in_output: f.bool("include_stop_str_in_output")?.unwrap_or(false),
        skip_special_tokens: f.bool("skip_special_tokens")?.unwrap_or(true),
        spaces_between_special_tokens: f.bool("spaces_between_special_tokens")?.unwrap_or(true),
        min_tokens: s.min_tokens,
        echo: f.bool("echo")?.unwrap_or(false),
        ..Default::default()
    };
    if output.stop.iter().any(String::is_empty) {
        return Err(bad("stop", "stop cannot contain an empty string.".into()));
    }
    if output.stop.len() > limits::stop_strings_max
        || output.stop.iter().any(|x| x.len() > limits::stop_string_bytes_max)
    {
        return Err(bad(
            "stop",
            format!(
                "at most {} stop strings of at most {} bytes each",
                limits::stop_strings_max,
                limits::stop_string_bytes_max
            ),
        ));
    }
    dedup_in_order(&mut output.stop);

    let vocab = model.vocab_size;
    let mut stop_token_ids =
        token_ids_in_vocab(f, "stop_token_ids", vocab, limits::stop_token_ids_max)?.unwrap_or_default();
    dedup_in_order(&mut stop_token_ids);
    output.logprobs = parse_logprobs(f, endpoint)?;
    s.logprobs = output.logprobs.map(|k| k as i32);
    if f.has("prompt_logprobs") {
        // Only the completions echo path returns prompt logprobs (as vLLM does with echo).
        return Err(bad(
            "prompt_logprobs",
            "prompt_logprobs is not supported by this gateway; use echo with logprobs on /v1/completions".into(),
        ));
    }
    if endpoint == Endpoint::Completion && output.echo {
        // vLLM: echo with logprobs scores the prompt too.
        s.prompt_logprobs = output.logprobs.map(|k| k as i32);
    }
    s.logit_bias = parse_logit_bias(f, vocab)?;
    s.allowed_token_ids = match token_ids_in_vocab(f, "allowed_token_ids", vocab, limits::allowed_token_ids_max)? {
        Some(ids) if ids.is_empty() => {
            return Err(bad("allowed_token_ids", "allowed_token_ids is not None and empty!".into()))
        }
        other => other,
    };
    s.bad_words_token_ids = bad_words(f, model)?;

    // Stop strings that are a single token also go to the engine as stop token ids: it stops a
    // step earlier and no ABORT round trip is needed. Text matching still catches the string
    // inside longer tokens.
    for (i, stop) in output.stop.iter().enumerate() {
        if let Ok(ids) = model.tokenizer.encode(stop, false) {
            if let [id] = ids[..] {
                if model.tokenizer.decode(&[id], false).as_deref() == Ok(stop.as_str()) {
                    output.stop_string_tokens.push((id, i));
                }
            }
        }
    }
    apply_eos(&mut s, &stop_token_ids, &output, model);

    let priority = f.i64("priority")?.unwrap_or(0);
    let priority =
        i32::try_from(priority).map_err(|_| bad("priority", format!("priority out of range: {priority}")))?;
    let cache_salt = f.str("cache_salt")?.map(str::to_string);
    if cache_salt.as_deref() == Some("") {
        return Err(bad("cache_salt", "Parameter 'cache_salt' must be a non-empty string if provided.".into()));
    }
    Ok(RequestParams {
        n: n as u32,
        sampling: s,
        output,
        stream,
        include_usage,
        continuous_usage_stats,
        priority,
        cache_salt,
        max_tokens_requested,
        max_tokens_client,
    })
}

/// `_verify_args`: the checks whose failure would kill an engine's input thread.
fn verify_ranges(s: &SamplingParams) -> Result<(), ApiError> {
    if !(-2.0..=2.0).contains(&s.presence_penalty) {
        return Err(bad(
            "presence_penalty",
            format!("presence_penalty must be in [-2, 2], got {}.", py_float(s.presence_penalty)),
        ));
    }
    if !(-2.0..=2.0).contains(&s.frequency_penalty) {
        return Err(bad(
            "frequency_penalty",
            format!("frequency_penalty must be in [-2, 2], got {}.", py_float(s.frequency_penalty)),
        ));
    }
    if !s.repetition_penalty.is_finite() {
        return Err(bad(
            "repetition_penalty",
            format!("repetition_penalty must be a finite number, got {}.", py_float(s.repetition_penalty)),
        ));
    }
    if s.repetition_penalty <= 0.0 {
        return Err(bad(
            "repetition_penalty",
            format!("repetition_penalty must be greater than zero, got {}.", py_float(s.repetition_penalty)),
        ));
    }
    if !s.temperature.is_finite() {
        return Err(bad(
            "temperature",
            format!("temperature must be a finite number, got {}.", py_float(s.temperature)),
        ));
    }
    if s.temperature < 0.0 {
        return Err(bad("temperature", format!("temperature must be non-negative, got {}.", py_float(s.temperature))));
    }
    if s.temperature > 2.0 {
        return Err(bad("temperature", format!("temperature must be in [0, 2], got {}.", py_float(s.temperature))));
    }
    if !(s.top_p > 0.0 && s.top_p <= 1.0) {
        return Err(bad("top_p", format!("top_p must be in (0, 1], got {}.", py_float(s.top_p))));
    }
    if s.top_k < -1 {
        return Err(bad("top_k", format!("top_k must be 0 (disable), or at least 1, got {}.", s.top_k)));
    }
    if !(0.0..=1.0).contains(&s.min_p) {
        return Err(bad("min_p", format!("min_p must be in [0, 1], got {}.", py_float(s.min_p))));
    }
    Ok(())
}

fn parse_logprobs(f: &Fields<'_>, endpoint: Endpoint) -> Result<Option<u32>, ApiError> {
    let max = limits::logprobs_max;
    match endpoint {
        Endpoint::Chat => {
            let wanted = f.bool("logprobs")?.unwrap_or(false);
            let top = f.i64("top_logprobs")?;
            if let Some(t) = top {
                if t < 0 && t != -1 {
                    return Err(bad("top_logprobs", "`top_logprobs` must be a positive value or -1.".into()));
                }
                if (t == -1 || t > 0) && !wanted {
                    return Err(bad(
                        "top_logprobs",
                        "when using `top_logprobs`, `logprobs` must be set to true.".into(),
                    ));
                }
            }
            if !wanted {
                return Ok(None);
            }
            let k = top.unwrap_or(0);
            if k == -1 || k > max {
                return Err(bad(
                    "top_logprobs",
                    format!(
                        "Requested sample logprobs of {}, which is greater than max allowed: {max}",
                        if k == -1 { i64::MAX } else { k }
                    ),
                ));
            }
            Ok(Some(k as u32))
        }
        Endpoint::Completion => match f.i64("logprobs")? {
            None => Ok(None),
            Some(k) if k < 0 => Err(bad("logprobs", format!("logprobs must be non-negative or -1, got {k}."))),
            Some(k) if k > max => Err(bad(
                "logprobs",
                format!("Requested sample logprobs of {k}, which is greater than max allowed: {max}"),
            )),
            Some(k) => Ok(Some(k as u32)),
        },
    }
}

fn token_ids_in_vocab(f: &Fields<'_>, name: &str, vocab: usize, max: usize) -> Result<Option<Vec<u32>>, ApiError> {
    let Some(ids) = f.ids(name)? else { return Ok(None) };
    if ids.len() > max {
        return Err(bad(name, format!("{name} has more than {max} entries")));
    }
    let invalid: Vec<i64> = ids.iter().copied().filter(|&t| t < 0 || t as u64 >= vocab as u64).collect();
    if !invalid.is_empty() {
        return Err(bad(
            name,
            format!("token_id(s) {invalid:?} in {name} contain out-of-vocab token ids. Vocabulary size: {vocab}"),
        ));
    }
    Ok(Some(ids.into_iter().map(|t| t as u32).collect()))
}

fn parse_logit_bias(f: &Fields<'_>, vocab: usize) -> Result<Vec<(u32, f64)>, ApiError> {
    let Some(map) = f.object("logit_bias")? else { return Ok(Vec::new()) };
    if map.len() > limits::logit_bias_entries_max {
        return Err(bad("logit_bias", format!("logit_bias has more than {} entries", limits::logit_bias_entries_max)));
    }
    let mut out = Vec::with_capacity(map.len());
    let mut invalid = Vec::new();
    for (k, v) in map {
        let id: i64 =
            k.trim().parse().map_err(|_| bad("logit_bias", format!("logit_bias keys must be token ids, got {k:?}")))?;
        let bias =
            v.as_f64().ok_or_else(|| bad("logit_bias", format!("logit_bias values must be numbers, got {v}")))?;
        if id < 0 || id as u64 >= vocab as u64 {
            invalid.push(id);
            continue;
        }
        // vLLM clamps biases to [-100, 100].
        out.push((id as u32, bias.clamp(-100.0, 100.0)));
    }
    if !invalid.is_empty() {
        return Err(bad(
            "logit_bias",
            format!("token_id(s) {invalid:?} in logit_bias contain out-of-vocab token ids. Vocabulary size: {vocab}"),
        ));
    }
    Ok(out)
}

/// `bad_words` → token-id sequences, with and without a leading space, as vLLM does.
fn bad_words(f: &Fields<'_>, model: &ModelAssets) -> Result<Vec<Vec<u32>>, ApiError> {
    let mut words = f.strings("bad_words")?;
    if words.len() > limits::bad_words_max || words.iter().any(|w| w.len() > limits::bad_word_bytes_max) {
        return Err(bad(
            "bad_words",
            format!("at most {} bad words of at most {} bytes each", limits::bad_words_max, limits::bad_word_bytes_max),
        ));
    }
    if words.iter().any(String::is_empty) {
        return Err(bad("bad_words", format!("bad_words cannot contain an empty string. Got bad_words={words:?}")));
    }
    dedup_in_order(&mut words);
    let mut out: Vec<Vec<u32>> = Vec::new();
    for word in &words {
        for add_prefix_space in [false, true] {
            let text = if add_prefix_space { format!(" {}", word.trim_start()) } else { word.trim_start().to_string() };
            let ids = model.tokenizer.encode(&text, false).map_err(|e| bad("bad_words", e.to_string()))?;
            if ids.is_empty() {
                if !add_prefix_space {
                    return Err(bad("bad_words", "bad_words entries must tokenize to at least one token.".into()));
                }
                continue;
            }
            let keep = match out.last() {
                _ if !add_prefix_space => true,
                Some(prev) => ids[0] != prev[0] && ids.len() == prev.len(),
                None => true,
            };
            if keep {
                out.push(ids);
            }
        }
    }
    let vocab = model.vocab_size;
    let invalid: Vec<u32> = out.iter().flatten().copied().filter(|&t| t as usize >= vocab).collect();
    if !invalid.is_empty() {
        return Err(bad(
            "bad_words",
            format!(
                "The model vocabulary size is {vocab}, but the following tokens were specified as bad: {invalid:?}."
            ),
        ));
    }
    Ok(out)
}

/// EOS and stop-token bookkeeping as vLLM's `update_from_generation_config` does it.
fn apply_eos(s: &mut SamplingParams, user_stop_ids: &[u32], output: &OutputOptions, model: &ModelAssets) {
    let mut stop_ids: Vec<u32> = user_stop_ids.to_vec();
    stop_ids.extend(output.stop_string_tokens.iter().map(|&(id, _)| id));
    let mut all: Vec<u32> = stop_ids.clone();
    if let Some(eos) = model.eos_token_id {
        if !s.ignore_eos {
            s.eos_token_id = Some(eos);
        }
        all.push(eos);
    }
    all.extend(&model.extra_eos_token_ids);
    if !s.ignore_eos {
        stop_ids.extend(&model.extra_eos_token_ids);
    }
    dedup_in_order(&mut stop_ids);
    all.sort_unstable();
    all.dedup();
    s.stop_token_ids = stop_ids;
    s.all_stop_token_ids = all;
}

/// Keeps the first of equal items, in one pass (lists come from clients: no quadratic scan).
fn dedup_in_order<T: std::hash::Hash + Eq + Clone>(v: &mut Vec<T>) {
    let mut seen = std::collections::HashSet::with_capacity(v.len());
    v.retain(|x| seen.insert(x.clone()));
}

/// vLLM's `get_max_tokens`: the context left after the prompt, capped by the request.
pub fn resolve_max_tokens(requested: Option<u32>, max_model_len: u32, prompt_len: usize) -> u32 {
    let room = (max_model_len as usize).saturating_sub(prompt_len) as u32;
    requested.map_or(room, |r| r.min(room))
}

/// vLLM's `TokenizeParams` check: an output bound the context window cannot hold is refused,
/// not clamped (a smaller one is clamped to the room the prompt leaves, `resolve_max_tokens`).
/// The text ends as vLLM's `VLLMValidationError` renders itself, naming parameter and value.
pub fn check_max_tokens(params: &RequestParams, max_model_len: u32) -> Result<(), ApiError> {
    match params.max_tokens_client {
        Some((requested, param)) if requested > max_model_len as i64 => Err(bad(
            param,
            format!(
                "{param}={requested} cannot be greater than max_model_len={max_model_len}. Please request fewer output \
                 tokens. (parameter={param}, value={requested})"
            ),
        )),
        _ => Ok(()),
    }
}

/// The prompt-length checks vLLM applies before anything reaches the engine.
pub fn check_prompt_len(prompt_len: usize, max_model_len: u32, param: &str) -> Result<(), ApiError> {
    let max = max_model_len as usize;
    let e = if prompt_len == 0 {
        ApiError::bad_request("The decoder prompt cannot be empty")
    } else if prompt_len > max {
        ApiError::bad_request(format!(
            "This model's maximum context length is {max} tokens. However, your prompt contains {prompt_len} input tokens, \
             which exceeds this limit even without any output tokens. Please reduce the length of the input prompt."
        ))
        .with_code("context_length_exceeded")
    } else if prompt_len == max {
        ApiError::bad_request(format!(
            "The decoder prompt (length {prompt_len}) plus the number of requested output tokens (at least 1) is longer than \
             the maximum model length of {max}. Make sure that `max_model_len` is no smaller than the number of text tokens \
             (prompt + requested output tokens)."
        ))
        .with_code("context_length_exceeded")
    } else {
        return Ok(());
    };
    Err(e.with_param(param))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_tokens_is_clamped_to_the_context() {
        assert_eq!(resolve_max_tokens(None, 1024, 24), 1000);
        assert_eq!(resolve_max_tokens(Some(16), 1024, 24), 16);
        assert_eq!(resolve_max_tokens(Some(5000), 1024, 24), 1000);
    }

    #[test]
    fn prompt_length_errors() {
        assert!(check_prompt_len(10, 1024, "messages").is_ok());
        for (len, text) in [(0, "cannot be empty"), (1024, "(at least 1)"), (2000, "maximum context length is 1024")] {
            let e = check_prompt_len(len, 1024, "messages").unwrap_err();
            assert_eq!(e.status, 400);
            assert!(e.message.contains(text), "{}", e.message);
        }
    }

    #[test]
    fn dedup_keeps_the_first_of_each_in_order() {
        let mut v = vec![3, 1, 3, 2, 1, 3];
        dedup_in_order(&mut v);
        assert_eq!(v, vec![3, 1, 2]);
        let mut words: Vec<String> = ["b", "a", "b"].iter().map(|s| s.to_string()).collect();
        dedup_in_order(&mut words);
        assert_eq!(words, vec!["b", "a"]);
    }

    #[test]
    fn range_checks_match_vllm() {
        let ok = SamplingParams::default();
        assert!(verify_ranges(&ok).is_ok());
        let cases: [(SamplingParams, &str); 8] = [
            (SamplingParams { top_p: 2.0, ..ok.clone() }, "top_p must be in (0, 1], got 2.0."),
            (SamplingParams { top_p: 0.0, ..ok.clone() }, "top_p must be in (0, 1]"),
            (SamplingParams { temperature: -0.5, ..ok.clone() }, "temperature must be non-negative"),
            (SamplingParams { temperature: 2.5, ..ok.clone() }, "temperature must be in [0, 2]"),
            (SamplingParams { top_k: -2, ..ok.clone() }, "top_k must be 0 (disable), or at least 1"),
            (SamplingParams { min_p: 1.5, ..ok.clone() }, "min_p must be in [0, 1]"),
            (SamplingParams { repetition_penalty: 0.0, ..ok.clone() }, "repetition_penalty must be greater than zero"),
            (SamplingParams { presence_penalty: 3.0, ..ok.clone() }, "presence_penalty must be in [-2, 2]"),
        ];
        for (s, text) in cases {
            let e = verify_ranges(&s).unwrap_err();
            assert!(e.message.starts_with(text), "{} vs {text}", e.message);
        }
    }
}
