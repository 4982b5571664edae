//! A request's sampling and output values → validated engine `SamplingParams` plus the
//! gateway-side `OutputOptions`.
//!
//! Validation mirrors vLLM's (`SamplingParams._verify_args`, `verify`, and the protocol
//! validators on values): an engine decodes and re-validates every ADD in its input thread, and
//! a parameter it rejects there kills that thread (a silently deaf engine), so nothing invalid
//! may leave the gateway. A refusal names the neutral field and the problem (`invalid.rs`); the
//! API adapter words it. The checks run in vLLM's order, so a request with several bad values
//! hears about the same one.

use super::invalid::{Field, Invalid, Problem, Range};
use super::request::SamplingRequest;
use crate::engine::SamplingParams;
use crate::limits;
use shardgate_text::ModelAssets;

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
    /// The output repeats the prompt.
    pub echo: bool,
}

/// Everything decided from the request's values before dispatch.
#[derive(Debug, Clone)]
pub struct RequestParams {
    pub n: u32,
    pub sampling: SamplingParams,
    pub output: OutputOptions,
    pub stream: bool,
    /// Every output event carries the token counts so far.
    pub running_usage: bool,
    pub priority: i32,
    pub cache_salt: Option<String>,
    /// The output bound (the client's, else the model's default), clamped to the context per
    /// prompt later.
    pub max_tokens_requested: Option<u32>,
    /// The client's own output bound, checked against the context window once the worker is
    /// known (`check_max_tokens`).
    pub max_tokens_client: Option<i64>,
}

fn bad(field: Field, problem: Problem) -> Invalid {
    Invalid::new(field, problem)
}

/// vLLM's ranges for the sampling values.
const PENALTY: Range = Range::closed(-2.0, 2.0);
const TEMPERATURE: Range = Range::closed(0.0, 2.0);
const TOP_P: Range = Range { min: 0.0, max: 1.0, min_open: true };
const MIN_P: Range = Range::closed(0.0, 1.0);

/// Checks every value and builds the engine's sampling parameters and the output options.
pub fn validate(r: SamplingRequest, model: &ModelAssets) -> Result<RequestParams, Invalid> {
    let n = r.n.unwrap_or(1);
    if n < 1 {
        return Err(bad(Field::N, Problem::TooSmall { got: n, min: 1 }));
    }
    let most = limits::choices_per_request_max as i64;
    if n > most {
        return Err(bad(Field::N, Problem::TooLarge { got: n, max: most }));
    }
    let mut s = sampling(&r, model)?;
    let (max_tokens_requested, max_tokens_client) = output_bound(&r, &mut s, model)?;
    verify_ranges(&s)?;
    let mut output = OutputOptions {
        stop: stop_strings(r.stop)?,
        include_stop_str_in_output: r.include_stop_str_in_output,
        skip_special_tokens: r.skip_special_tokens.unwrap_or(true),
        spaces_between_special_tokens: r.spaces_between_special_tokens.unwrap_or(true),
        min_tokens: s.min_tokens,
        echo: r.echo,
        ..Default::default()
    };
    let vocab = model.vocab_size;
    let mut stop_token_ids =
        token_ids_in_vocab(r.stop_token_ids, Field::StopTokenIds, vocab, limits::stop_token_ids_max)?
            .unwrap_or_default();
    dedup_in_order(&mut stop_token_ids);
    output.logprobs = logprobs(r.logprobs)?;
    s.logprobs = output.logprobs.map(|k| k as i32);
    if output.echo {
        // vLLM: echo with logprobs scores the prompt too.
        s.prompt_logprobs = output.logprobs.map(|k| k as i32);
    }
    s.logit_bias = logit_bias(r.logit_bias, vocab)?;
    s.allowed_token_ids =
        match token_ids_in_vocab(r.allowed_token_ids, Field::AllowedTokenIds, vocab, limits::allowed_token_ids_max)? {
            Some(ids) if ids.is_empty() => return Err(bad(Field::AllowedTokenIds, Problem::Empty)),
            other => other,
        };
    s.bad_words_token_ids = bad_words(r.bad_words, model)?;
    output.stop_string_tokens = single_token_stops(&output.stop, model);
    apply_eos(&mut s, &stop_token_ids, &output, model);
    let priority = r.priority.unwrap_or(0);
    let priority = i32::try_from(priority).map_err(|_| bad(Field::Priority, Problem::IntOutOfRange(priority)))?;
    if r.cache_salt.as_deref() == Some("") {
        return Err(bad(Field::CacheSalt, Problem::Empty));
    }
    Ok(RequestParams {
        n: n as u32,
        sampling: s,
        output,
        stream: r.stream,
        running_usage: r.running_usage,
        priority,
        cache_salt: r.cache_salt,
        max_tokens_requested,
        max_tokens_client,
    })
}

/// The sampling values, the model's generation defaults where the request gives none, and the
/// output constraint (refused when the engine's grammar compiler would refuse it).
fn sampling(r: &SamplingRequest, model: &ModelAssets) -> Result<SamplingParams, Invalid> {
    let d = &model.generation_defaults;
    let top_k = match r.top_k {
        Some(k) => i32::try_from(k).map_err(|_| bad(Field::TopK, Problem::IntOutOfRange(k)))?,
        None => d.top_k.unwrap_or(0),
    };
    if let Some(c) = &r.constraint {
        super::constraint_check::check(c).map_err(|e| {
            tracing::info!("constraint refused before the engine: {}", e.detail());
            bad(Field::Constraint, Problem::Unsatisfiable(e))
        })?;
    }
    Ok(SamplingParams {
        temperature: r.temperature.or(d.temperature).unwrap_or(1.0),
        top_p: r.top_p.or(d.top_p).unwrap_or(1.0),
        top_k,
        min_p: r.min_p.or(d.min_p).unwrap_or(0.0),
        presence_penalty: r.presence_penalty.unwrap_or(0.0),
        frequency_penalty: r.frequency_penalty.unwrap_or(0.0),
        repetition_penalty: r.repetition_penalty.or(d.repetition_penalty).unwrap_or(1.0),
        constraint: r.constraint.clone(),
        seed: r.seed,
        ignore_eos: r.ignore_eos,
        ..Default::default()
    })
}

/// `min_tokens` and the output bound: `(max_tokens_requested, max_tokens_client)`.
fn output_bound(
    r: &SamplingRequest,
    s: &mut SamplingParams,
    model: &ModelAssets,
) -> Result<(Option<u32>, Option<i64>), Invalid> {
    let min_tokens = r.min_tokens.unwrap_or(0);
    if min_tokens < 0 {
        return Err(bad(Field::MinTokens, Problem::TooSmall { got: min_tokens, min: 0 }));
    }
    if let Some(m) = r.max_tokens.filter(|&m| m < 1) {
        return Err(bad(Field::MaxTokens, Problem::TooSmall { got: m, min: 1 }));
    }
    let requested = r.max_tokens.map(|m| m.min(u32::MAX as i64) as u32).or(model.generation_defaults.max_new_tokens);
    if let Some(m) = requested.filter(|&m| min_tokens > m as i64) {
        return Err(bad(Field::MinTokens, Problem::AboveMaxTokens { min_tokens, max_tokens: m }));
    }
    s.min_tokens = min_tokens.min(u32::MAX as i64) as u32;
    Ok((requested, r.max_tokens))
}

/// `_verify_args`: the checks whose failure would kill an engine's input thread.
fn verify_ranges(s: &SamplingParams) -> Result<(), Invalid> {
    let out_of = |field, got, range: Range| bad(field, Problem::OutOfRange { got, range });
    if !PENALTY.contains(s.presence_penalty) {
        return Err(out_of(Field::PresencePenalty, s.presence_penalty, PENALTY));
    }
    if !PENALTY.contains(s.frequency_penalty) {
        return Err(out_of(Field::FrequencyPenalty, s.frequency_penalty, PENALTY));
    }
    if !s.repetition_penalty.is_finite() {
        return Err(bad(Field::RepetitionPenalty, Problem::NotFinite(s.repetition_penalty)));
    }
    if s.repetition_penalty <= 0.0 {
        return Err(bad(Field::RepetitionPenalty, Problem::NotPositive(s.repetition_penalty)));
    }
    if !s.temperature.is_finite() {
        return Err(bad(Field::Temperature, Problem::NotFinite(s.temperature)));
    }
    if s.temperature < 0.0 {
        return Err(bad(Field::Temperature, Problem::Negative(s.temperature)));
    }
    if !TEMPERATURE.contains(s.temperature) {
        return Err(out_of(Field::Temperature, s.temperature, TEMPERATURE));
    }
    if !TOP_P.contains(s.top_p) {
        return Err(out_of(Field::TopP, s.top_p, TOP_P));
    }
    if s.top_k < -1 {
        return Err(bad(Field::TopK, Problem::IntOutOfRange(s.top_k as i64)));
    }
    if !MIN_P.contains(s.min_p) {
        return Err(out_of(Field::MinP, s.min_p, MIN_P));
    }
    Ok(())
}

/// Stop strings: none empty, bounded in count and length, each once.
fn stop_strings(mut stop: Vec<String>) -> Result<Vec<String>, Invalid> {
    if stop.iter().any(String::is_empty) {
        return Err(bad(Field::Stop, Problem::EmptyString(stop)));
    }
    if stop.len() > limits::stop_strings_max || stop.iter().any(|x| x.len() > limits::stop_string_bytes_max) {
        let problem =
            Problem::TooManyStrings { count_max: limits::stop_strings_max, bytes_max: limits::stop_string_bytes_max };
        return Err(bad(Field::Stop, problem));
    }
    dedup_in_order(&mut stop);
    Ok(stop)
}

/// Top logprobs per token, within what the engine returns.
fn logprobs(k: Option<i64>) -> Result<Option<u32>, Invalid> {
    let max = limits::logprobs_max;
    match k {
        None => Ok(None),
        // -1 asks for the whole vocabulary: far above the limit.
        Some(-1) => Err(bad(Field::Logprobs, Problem::TooLarge { got: i64::MAX, max })),
        Some(k) if k < -1 => Err(bad(Field::Logprobs, Problem::TooSmall { got: k, min: -1 })),
        Some(k) if k > max => Err(bad(Field::Logprobs, Problem::TooLarge { got: k, max })),
        Some(k) => Ok(Some(k as u32)),
    }
}

fn token_ids_in_vocab(
    ids: Option<Vec<i64>>,
    field: Field,
    vocab: usize,
    max: usize,
) -> Result<Option<Vec<u32>>, Invalid> {
    let Some(ids) = ids else { return Ok(None) };
    if ids.len() > max {
        return Err(bad(field, Problem::TooManyIds { max }));
    }
    let invalid: Vec<i64> = ids.iter().copied().filter(|&t| t < 0 || t as u64 >= vocab as u64).collect();
    if !invalid.is_empty() {
        return Err(bad(field, Problem::OutOfVocab { ids: invalid, vocab }));
    }
    Ok(Some(ids.into_iter().map(|t| t as u32).collect()))
}

fn logit_bias(entries: Vec<(i64, f64)>, vocab: usize) -> Result<Vec<(u32, f64)>, Invalid> {
    if entries.len() > limits::logit_bias_entries_max {
        return Err(bad(Field::LogitBias, Problem::TooManyIds { max: limits::logit_bias_entries_max }));
    }
    let invalid: Vec<i64> =
        entries.iter().map(|&(id, _)| id).filter(|&id| id < 0 || id as u64 >= vocab as u64).collect();
    if !invalid.is_empty() {
        return Err(bad(Field::LogitBias, Problem::OutOfVocab { ids: invalid, vocab }));
    }
    // vLLM clamps biases to [-100, 100].
    Ok(entries.into_iter().map(|(id, bias)| (id as u32, bias.clamp(-100.0, 100.0))).collect())
}

/// Bad words → token-id sequences, with and without a leading space, as vLLM does.
fn bad_words(mut words: Vec<String>, model: &ModelAssets) -> Result<Vec<Vec<u32>>, Invalid> {
    if words.len() > limits::bad_words_max || words.iter().any(|w| w.len() > limits::bad_word_bytes_max) {
        let problem =
            Problem::TooManyStrings { count_max: limits::bad_words_max, bytes_max: limits::bad_word_bytes_max };
        return Err(bad(Field::BadWords, problem));
    }
    if words.iter().any(String::is_empty) {
        return Err(bad(Field::BadWords, Problem::EmptyString(words)));
    }
    dedup_in_order(&mut words);
    let mut out: Vec<Vec<u32>> = Vec::new();
    for word in &words {
        for add_prefix_space in [false, true] {
            let text = if add_prefix_space { format!(" {}", word.trim_start()) } else { word.trim_start().to_string() };
            let ids = model.tokenizer.encode(&text, false).map_err(|e| bad(Field::BadWords, Problem::Tokenizer(e)))?;
            if ids.is_empty() {
                if !add_prefix_space {
                    return Err(bad(Field::BadWords, Problem::NoTokens));
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
    let invalid: Vec<i64> = out.iter().flatten().filter(|&&t| t as usize >= vocab).map(|&t| t as i64).collect();
    if !invalid.is_empty() {
        return Err(bad(Field::BadWords, Problem::OutOfVocab { ids: invalid, vocab }));
    }
    Ok(out)
}

/// Stop strings that are a single token also go to the engine as stop token ids: it stops a
/// step earlier and no ABORT round trip is needed. Text matching still catches the string
/// inside longer tokens.
fn single_token_stops(stop: &[String], model: &ModelAssets) -> Vec<(u32, usize)> {
    let mut out = Vec::new();
    for (i, s) in stop.iter().enumerate() {
        if let Ok(ids) = model.tokenizer.encode(s, false) {
            if let [id] = ids[..] {
                if model.tokenizer.decode(&[id], false).as_deref() == Ok(s.as_str()) {
                    out.push((id, i));
                }
            }
        }
    }
    out
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
pub fn check_max_tokens(params: &RequestParams, max_model_len: u32) -> Result<(), Invalid> {
    match params.max_tokens_client {
        Some(got) if got > max_model_len as i64 => {
            Err(bad(Field::MaxTokens, Problem::AboveContext { got, max_model_len }))
        }
        _ => Ok(()),
    }
}

/// The prompt-length checks vLLM applies before anything reaches the engine.
pub fn check_prompt_len(len: usize, max_model_len: u32) -> Result<(), Invalid> {
    let max = max_model_len as usize;
    let problem = if len == 0 {
        Problem::Empty
    } else if len > max {
        Problem::PromptTooLong { len, max_model_len }
    } else if len == max {
        Problem::PromptFillsContext { len, max_model_len }
    } else {
        return Ok(());
    };
    Err(bad(Field::Prompt, problem))
}

#[cfg(test)]
#[path = "params_tests.rs"]
mod tests;
