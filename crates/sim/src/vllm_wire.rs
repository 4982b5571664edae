//! The engine's side of the vLLM wire: decode what a front end sends (independently of the
//! gateway's encoder, with a generic msgpack walk, so each checks the other), encode outputs.

use shardgate_wire::msgpack::{DecodeResult, Kind, Reader, Writer};

use crate::error::RequestError;
use crate::vllm_mm::{self, MmSummary};
use shardgate_wire::RequestError as EngineRequestError;

/// The parts of an `EngineCoreRequest` the simulator acts on.
#[derive(Debug, Clone, Default)]
pub struct AddRequest {
    pub request_id: String,
    pub prompt: Vec<u32>,
    pub client_index: usize,
    pub max_tokens: Option<u32>,
    pub min_tokens: u32,
    pub stop_token_ids: Vec<u32>,
    pub eos_token_id: Option<u32>,
    pub ignore_eos: bool,
    pub seed: Option<i64>,
    pub temperature: f64,
    pub top_p: f64,
    pub logprobs: Option<i64>,
    pub prompt_logprobs: Option<i64>,
    /// TokenSpeed only: the output cadence (`stream`, `stream_interval`; 0 = the server's 1)
    /// and the sampled-token logprob switch.
    pub stream: bool,
    pub stream_interval: u32,
    pub return_logprob: bool,
    /// vLLM `structured_outputs`, its non-nil keys (the simulator records, never enforces).
    pub structured_outputs: Option<serde_json::Map<String, serde_json::Value>>,
    /// vLLM `mm_features`, checked against the aux frames and the prompt.
    pub mm: Option<MmSummary>,
}

/// Decodes an ADD payload and its aux frames. Errors are what would kill a real engine's
/// input thread (or, for placeholder ranges, fail the request in its input processing).
pub fn decode_add(payload: &[u8], aux: &[Vec<u8>]) -> Result<AddRequest, RequestError> {
    let r = decode_add_inner(payload, aux)?;
    if let Some(mm) = &r.mm {
        vllm_mm::check_ranges(mm, &r.prompt)?;
    }
    if let Some(so) = &r.structured_outputs {
        let kinds = ["json", "regex", "choice", "grammar", "json_object", "structural_tag"];
        let set = kinds.iter().filter(|k| so.contains_key(**k)).count();
        if set != 1 {
            return Err(RequestError::StructuredOutputsConstraints(set));
        }
        if !so.contains_key("_backend") {
            return Err(RequestError::StructuredOutputsWithoutBackend);
        }
    }
    // vLLM re-runs SamplingParams validation while decoding; mirror the fatal ones.
    if !(r.top_p > 0.0 && r.top_p <= 1.0) {
        return Err(RequestError::TopP(r.top_p));
    }
    if !(0.0..=2.0).contains(&r.temperature) {
        return Err(RequestError::Temperature(r.temperature));
    }
    Ok(r)
}

fn decode_add_inner(payload: &[u8], aux: &[Vec<u8>]) -> DecodeResult<AddRequest> {
    let mut r = Reader::new(payload);
    let n = r.array_len()?;
    let mut req = AddRequest { temperature: 1.0, top_p: 1.0, max_tokens: Some(16), ..Default::default() };
    for i in 0..n {
        match i {
            0 => req.request_id = r.str()?.to_string(),
            1 => {
                let k = r.array_len()?;
                for _ in 0..k {
                    req.prompt.push(r.u32()?);
                }
            }
            2 => req.mm = vllm_mm::decode_features(&mut r, aux)?,
            3 => decode_sampling(&mut r, &mut req)?,
            11 => req.client_index = r.u64()? as usize,
            _ => r.skip()?,
        }
    }
    Ok(req)
}

fn decode_sampling(r: &mut Reader<'_>, req: &mut AddRequest) -> DecodeResult<()> {
    let n = r.map_len()?;
    for _ in 0..n {
        let key = r.str()?;
        let nil = r.peek_kind()? == Kind::Nil;
        match key {
            "max_tokens" if nil => {
                r.skip()?;
                req.max_tokens = None;
            }
            "max_tokens" => req.max_tokens = Some(r.u32()?),
            "min_tokens" => req.min_tokens = r.u32()?,
            "stop_token_ids" => req.stop_token_ids = ids(r)?,
            "_eos_token_id" if !nil => req.eos_token_id = Some(r.u32()?),
            "ignore_eos" => req.ignore_eos = r.bool()?,
            "seed" if !nil => req.seed = Some(r.i64()?),
            "temperature" => req.temperature = r.f64()?,
            "top_p" => req.top_p = r.f64()?,
            "logprobs" if !nil => req.logprobs = Some(r.i64()?),
            "prompt_logprobs" if !nil => req.prompt_logprobs = Some(r.i64()?),
            "structured_outputs" if !nil => req.structured_outputs = Some(decode_structured_outputs(r)?),
            _ => r.skip()?,
        }
    }
    Ok(())
}

fn decode_structured_outputs(r: &mut Reader<'_>) -> DecodeResult<serde_json::Map<String, serde_json::Value>> {
    use serde_json::Value;
    let n = r.map_len()?;
    let mut out = serde_json::Map::new();
    for _ in 0..n {
        let key = r.str()?.to_string();
        let v = match r.peek_kind()? {
            Kind::Nil => {
                r.skip()?;
                continue;
            }
            Kind::Str => Value::String(r.str()?.to_string()),
            Kind::Bool => Value::Bool(r.bool()?),
            Kind::Array => {
                let k = r.array_len()?;
                Value::Array((0..k).map(|_| r.str().map(|s| Value::String(s.to_string()))).collect::<Result<_, _>>()?)
            }
            _ => {
                r.skip()?;
                Value::Bool(true)
            }
        };
        out.insert(key, v);
    }
    Ok(out)
}

fn ids(r: &mut Reader<'_>) -> DecodeResult<Vec<u32>> {
    if r.try_nil()? {
        return Ok(Vec::new());
    }
    let n = r.array_len()?;
    (0..n).map(|_| r.u32()).collect()
}

pub fn decode_abort(payload: &[u8]) -> DecodeResult<Vec<String>> {
    let mut r = Reader::new(payload);
    let n = r.array_len()?;
    (0..n).map(|_| r.str().map(str::to_string)).collect()
}

/// `[client_index, call_id, method, args]`.
pub fn decode_utility(payload: &[u8]) -> DecodeResult<(usize, u64, String)> {
    let mut r = Reader::new(payload);
    r.array_len()?;
    let client = r.u64()? as usize;
    let call = r.u64()?;
    let method = r.str()?.to_string();
    r.skip()?;
    Ok((client, call, method))
}

/// One request's output in a step.
pub struct StepOutput<'a> {
    pub request_id: &'a str,
    pub tokens: &'a [u32],
    /// (finish code, stop token id) when this is the last output.
    pub finish: Option<(u8, Option<u32>)>,
    pub cached_tokens: Option<u32>,
    /// Top-k logprobs to attach (fake but well-formed), when asked.
    pub logprobs: Option<usize>,
    /// Prompt logprobs (top-k) for the whole prompt, on the first output.
    pub prompt_logprobs: Option<(&'a [u32], usize)>,
    /// With an ERROR finish: the request-scoped error, as 0.33 sends it.
    pub error: Option<&'a EngineRequestError>,
}

/// What a step reports in `SchedulerStats`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Load {
    pub running: usize,
    pub waiting: usize,
    pub kv_cache_usage: f64,
    pub step: u64,
    pub current_wave: u64,
    pub prefix: PrefixCounts,
}

/// Prefix-cache lookups since the last report (`PrefixCacheStats`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PrefixCounts {
    pub requests: u64,
    /// Prompt tokens looked up.
    pub queries: u64,
    /// Of those, tokens found cached.
    pub hits: u64,
}

/// An output batch with no outputs that tells client 0 a DP wave finished (MoE groups).
pub fn encode_wave_complete(engine_index: u32, wave: u64, timestamp: f64, out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    w.array(9);
    w.uint(engine_index as u64);
    w.array(0);
    w.nil(); // scheduler_stats
    w.f64(timestamp);
    w.nil(); // utility_output
    w.nil(); // finished_requests
    w.uint(wave); // wave_complete
    w.nil(); // start_wave
    w.str("default");
}

/// Decodes START_DP_WAVE: `[wave, exclude_engine_index | nil]`.
pub fn decode_start_dp_wave(payload: &[u8]) -> Result<(u64, Option<u64>), RequestError> {
    let mut r = Reader::new(payload);
    let n = r.array_len()?;
    if n != 2 {
        return Err(RequestError::StartDpWaveLength(n));
    }
    let wave = r.u64()?;
    let exclude = if r.try_nil()? { None } else { Some(r.u64()?) };
    Ok((wave, exclude))
}

pub fn encode_batch(engine_index: u32, outputs: &[StepOutput<'_>], load: &Load, timestamp: f64, out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    w.array(9);
    w.uint(engine_index as u64);
    w.array(outputs.len());
    for o in outputs {
        encode_output(&mut w, o);
    }
    encode_scheduler_stats(&mut w, load);
    w.f64(timestamp);
    for _ in 0..4 {
        w.nil(); // utility_output, finished_requests, wave_complete, start_wave
    }
    w.str("default");
}

/// `SchedulerStats` as a vLLM 0.33 engine sends it: msgspec's encoding of the dataclass, every
/// field in order (vLLM's Rust front end and SMG require all of them), what the simulator does
/// not model at its default.
fn encode_scheduler_stats(w: &mut Writer<'_>, load: &Load) {
    w.map_wide(18);
    w.str("num_running_reqs");
    w.uint(load.running as u64);
    w.str("num_waiting_reqs");
    w.uint(load.waiting as u64);
    w.str("num_skipped_waiting_reqs");
    w.uint(0);
    w.str("num_kv_fetch_reqs_by_stage");
    w.map(0);
    w.str("step_counter");
    w.uint(load.step);
    w.str("current_wave");
    w.uint(load.current_wave);
    w.str("kv_cache_usage");
    w.f64(load.kv_cache_usage);
    w.str("iteration_details");
    w.nil();
    w.str("prefix_cache_stats");
    w.map(8);
    w.str("reset");
    w.bool(false);
    for (key, v) in [
        ("requests", load.prefix.requests),
        ("queries", load.prefix.queries),
        ("hits", load.prefix.hits),
        ("preempted_requests", 0),
        ("preempted_queries", 0),
        ("preempted_hits", 0),
    ] {
        w.str(key);
        w.uint(v);
    }
    w.str("hits_by_source");
    w.map(0);
    w.str("connector_prefix_cache_stats");
    w.nil();
    w.str("kv_cache_eviction_events");
    w.array(0);
    for key in ["spec_decoding_stats", "kv_connector_stats", "ec_connector_stats"] {
        w.str(key);
        w.nil();
    }
    for key in ["waiting_lora_adapters", "running_lora_adapters"] {
        w.str(key);
        w.map(0);
    }
    for key in ["cudagraph_stats", "perf_stats"] {
        w.str(key);
        w.nil();
    }
}

fn encode_output(w: &mut Writer<'_>, o: &StepOutput<'_>) {
    w.array_wide(19);
    w.str(o.request_id);
    w.array(o.tokens.len());
    for &t in o.tokens {
        w.uint(t as u64);
    }
    match o.logprobs {
        Some(k) => encode_logprobs(w, o.tokens, k),
        None => w.nil(),
    }
    match o.prompt_logprobs {
        // LogprobsTensors: torch dtype names, the actual prompt token in column 0.
        Some((prompt, k)) if prompt.len() > 1 => {
            encode_logprobs_as(w, &prompt[1..], k, ("int32", "float32", "int32"), 5)
        }
        _ => w.nil(),
    }
    w.nil(); // pooling
    match o.finish {
        Some((code, stop)) => {
            w.uint(code as u64);
            match stop {
                Some(id) => w.uint(id as u64),
                None => w.nil(),
            }
        }
        None => {
            w.nil();
            w.nil();
        }
    }
    for _ in 7..11 {
        w.nil(); // events, kv/ec transfer params, trace headers
    }
    match o.cached_tokens {
        Some(c) => {
            w.map(2);
            w.str("num_prompt_tokens");
            w.uint(0);
            w.str("num_cached_tokens");
            w.uint(c as u64);
        }
        None => w.nil(),
    }
    w.nil(); // routed experts
    w.uint(0); // num_nans_in_logits
    for _ in 14..18 {
        w.nil();
    }
    match o.error {
        // A dataclass: msgspec writes every field as a map.
        Some(e) => {
            w.map(3);
            w.str("code");
            w.str(&e.code);
            w.str("message");
            w.str(&e.message);
            w.str("retryable");
            w.bool(e.retryable);
        }
        None => w.nil(),
    }
}

/// `LogprobsLists` with ext-3 inline buffers: the sampled token at rank 1 with logprob
/// -0.5·(1 + position), then k alternatives with decreasing logprobs.
fn encode_logprobs(w: &mut Writer<'_>, tokens: &[u32], k: usize) {
    encode_logprobs_as(w, tokens, k, ("<i4", "<f4", "<i8"), 4)
}

/// Logprobs rows in either layout: `LogprobsLists` (numpy dtypes, 4 fields, i64 ranks) or
/// `LogprobsTensors` (torch dtypes, 5 fields, i32 ranks).
fn encode_logprobs_as(w: &mut Writer<'_>, tokens: &[u32], k: usize, dtypes: (&str, &str, &str), fields: usize) {
    let rows = tokens.len();
    let cols = k + 1;
    let mut ids = Vec::with_capacity(rows * cols * 4);
    let mut lps = Vec::with_capacity(rows * cols * 4);
    let mut ranks = Vec::with_capacity(rows * 8);
    for (row, &t) in tokens.iter().enumerate() {
        ids.extend_from_slice(&(t as i32).to_le_bytes());
        lps.extend_from_slice(&(-0.5f32 * (1.0 + row as f32)).to_le_bytes());
        for c in 0..k {
            let alt = if c == 0 { t } else { t.wrapping_add(c as u32) % 1000 + 10 };
            ids.extend_from_slice(&(alt as i32).to_le_bytes());
            lps.extend_from_slice(&(-0.5f32 * (1.0 + row as f32) - c as f32).to_le_bytes());
        }
        if dtypes.2 == "<i8" {
            ranks.extend_from_slice(&1i64.to_le_bytes());
        } else {
            ranks.extend_from_slice(&1i32.to_le_bytes());
        }
    }
    w.array(fields);
    ndarray(w, dtypes.0, &[rows, cols], &ids);
    ndarray(w, dtypes.1, &[rows, cols], &lps);
    ndarray(w, dtypes.2, &[rows], &ranks);
    for _ in 3..fields {
        w.nil();
    }
}

fn ndarray(w: &mut Writer<'_>, dtype: &str, shape: &[usize], data: &[u8]) {
    w.array(3);
    w.str(dtype);
    w.array(shape.len());
    for &d in shape {
        w.uint(d as u64);
    }
    w.ext(3, data);
}

/// A utility reply: outputs empty, `utility_output = [call_id, nil, [nil, result]]`.
pub fn encode_utility_reply(call_id: u64, result_bool: bool, timestamp: f64, out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    w.array(9);
    w.uint(0);
    w.array(0);
    w.nil();
    w.f64(timestamp);
    w.array(3);
    w.uint(call_id);
    w.nil();
    w.array(2);
    w.nil();
    w.bool(result_bool);
    for _ in 5..9 {
        w.nil();
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;
    use shardgate_wire::mm::{Feature, Field, Layout, Modality, Tensor};
    use shardgate_wire::vllm::request::encode_add;
    use shardgate_wire::{EngineRequest, SamplingParams};

    /// Messages vLLM 0.33's own structs encoded (tools/wire-fixtures/vllm-0.33.sh).
    fn fixture_0_33(case: &str) -> Vec<u8> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/wire/vllm/structs-0.33.0.json");
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let hex = v["cases"][case]["frames"][0][0].as_str().unwrap();
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
    }

    /// Every map key under a value, depth first: the shape of a msgspec-encoded dataclass.
    fn keys(r: &mut Reader<'_>, out: &mut Vec<String>) -> DecodeResult<()> {
        match r.peek_kind()? {
            Kind::Map => {
                for _ in 0..r.map_len()? {
                    out.push(r.str()?.to_string());
                    keys(r, out)?;
                }
            }
            Kind::Array => {
                for _ in 0..r.array_len()? {
                    keys(r, out)?;
                }
            }
            _ => r.skip()?,
        }
        Ok(())
    }

    /// The keys of a batch's `scheduler_stats` (its third field).
    fn stats_keys(batch: &[u8]) -> Vec<String> {
        let mut r = Reader::new(batch);
        r.array_len().unwrap();
        r.skip().unwrap();
        r.skip().unwrap();
        let mut out = Vec::new();
        keys(&mut r, &mut out).unwrap();
        out
    }

    #[test]
    fn scheduler_stats_have_every_0_33_field_in_order() {
        let load = Load { running: 3, waiting: 2, kv_cache_usage: 0.75, step: 42, ..Default::default() };
        let mut ours = Vec::new();
        encode_batch(1, &[], &load, 1024.5, &mut ours);
        let theirs = stats_keys(&fixture_0_33("outputs"));
        // The fixture's one in-flight KV fetch is a key the simulator never has.
        let theirs: Vec<_> = theirs.into_iter().filter(|k| k != "loading").collect();
        assert_eq!(stats_keys(&ours), theirs);
        assert_eq!(theirs.len(), 18 + 8);
    }

    #[test]
    fn decodes_a_0_33_add() {
        let add = decode_add(&fixture_0_33("add"), &[]).unwrap();
        assert_eq!((add.request_id.as_str(), add.prompt.as_slice()), ("r-1", &[1, 2, 3][..]));
        assert_eq!((add.max_tokens, add.temperature, add.seed), (Some(4), 0.0, Some(7)));
        assert_eq!(add.stop_token_ids, [151645]);
    }

    /// A request with one image of 16 patch rows (4 placeholders at offset 1) as the gateway
    /// encodes it: the main frame and its aux frames.
    fn encoded(offset: u32, prompt: Vec<u32>) -> (Vec<u8>, Vec<Vec<u8>>) {
        let pixels = Field {
            key: "pixel_values",
            data: Tensor::f32(vec![16, 1176], &vec![0.5; 16 * 1176]).into(),
            layout: Layout::Flat { slices: vec![(0, 16)], dim: 0 },
            keep_on_cpu: false,
        };
        let grid = Field {
            key: "image_grid_thw",
            data: Tensor::i64(vec![3], &[1, 4, 4]).into(),
            layout: Layout::Batched,
            keep_on_cpu: true,
        };
        let image = Feature {
            modality: Modality::Image,
            fields: Some(vec![pixels, grid].into()),
            hash: "h".into(),
            offset,
            length: 4,
            is_embed: None,
        };
        let req = EngineRequest {
            request_id: "r".into(),
            prompt_token_ids: Rc::from(prompt),
            sampling: SamplingParams::default(),
            arrival_time: 0.0,
            cache_salt: None,
            priority: 0,
            mm_features: vec![image].into(),
        };
        let (mut main, mut aux) = (Vec::new(), Vec::new());
        encode_add(&req, 0, &mut main, &mut aux);
        (main, aux.iter().map(|a| a.to_vec()).collect())
    }

    /// What the refusal says, the main frame, the aux frames.
    type Case = (&'static str, Vec<u8>, Vec<Vec<u8>>);

    #[test]
    fn features_are_checked_against_aux_frames_and_prompt() {
        let prompt = vec![7, 9, 9, 9, 9, 8];
        let (main, aux) = encoded(1, prompt.clone());
        let mm = decode_add(&main, &aux).unwrap().mm.unwrap();
        assert_eq!((mm.items, mm.placeholder_tokens, mm.tensor_bytes), (1, 4, 16 * 1176 * 4 + 24));
        assert_eq!(mm.ranges, [(1, 4)]);
        let truncated = vec![aux[0][..100].to_vec()];
        let cases: [Case; 4] = [
            ("aux frame 1 missing", main.clone(), vec![]),
            ("bytes for 18816 elements", main.clone(), truncated),
            ("beyond a prompt of 6", encoded(3, prompt.clone()).0, aux.clone()),
            ("not one repeated token", encoded(2, prompt).0, aux.clone()),
        ];
        for (want, main, aux) in cases {
            let e = decode_add(&main, &aux).unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
    }
}
