//! The engine's side of the TokenSpeed 0.1.1 wire: decode ADD and ABORT as the engine's msgspec
//! structs do (written independently of the gateway's encoder, so each checks the other), run
//! the checks its msgpack input socket runs, and encode output batches byte for byte as msgspec
//! encodes `BatchTokenIDOutSlim`. Pure: `tests/wire_tokenspeed.rs` includes this file too.

use shardgate_util::json::py_float;
use shardgate_wire::msgpack::{DecodeError, DecodeResult, Kind, Reader, Writer};

const ADD_TAG: &str = "TokenizedGenerateReqInput";
const BATCH_TAG: &str = "BatchTokenIDOutSlim";
/// `top_k = -1` after the engine's normalization.
pub const TOP_K_DISABLED: i64 = 1 << 30;
const SAMPLING_EPS: f64 = 1e-6;

/// TokenSpeed's `SamplingParams`, as sent (before normalization), the fields the simulator or
/// its checks read.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampling {
    pub max_new_tokens: Option<i64>,
    pub stop: Vec<String>,
    pub stop_token_ids: Option<Vec<u32>>,
    pub temperature: f64,
    pub top_p: f64,
    pub top_k: i64,
    pub min_p: f64,
    pub frequency_penalty: f64,
    pub presence_penalty: f64,
    pub repetition_penalty: f64,
    pub min_new_tokens: i64,
    /// json_schema, regex, ebnf, structural_tag.
    pub grammars: [Option<String>; 4],
    pub ignore_eos: bool,
    pub skip_special_tokens: bool,
    pub stream_interval: Option<i64>,
    pub logit_bias: Option<Vec<(String, f64)>>,
    pub seed: Option<i64>,
    pub logprobs: Option<i64>,
    pub n: i64,
    pub is_normalized: bool,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            max_new_tokens: None,
            stop: Vec::new(),
            stop_token_ids: None,
            temperature: 1.0,
            top_p: 1.0,
            top_k: -1,
            min_p: 0.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            repetition_penalty: 1.0,
            min_new_tokens: 0,
            grammars: Default::default(),
            ignore_eos: false,
            skip_special_tokens: true,
            stream_interval: None,
            logit_bias: None,
            seed: None,
            logprobs: None,
            n: 1,
            is_normalized: false,
        }
    }
}

impl Sampling {
    /// `__post_init__` on decode: greedy collapse, pinned greedy seed, top-k sentinel.
    pub fn normalized(&self) -> Sampling {
        let mut s = self.clone();
        if s.is_normalized {
            return s;
        }
        if s.stop_token_ids.as_ref().is_some_and(Vec::is_empty) {
            s.stop_token_ids = None;
        }
        if s.temperature < SAMPLING_EPS {
            s.temperature = 1.0;
            s.top_k = 1;
        }
        if s.top_k == 1 {
            s.seed = Some(0);
        }
        if s.top_k == -1 {
            s.top_k = TOP_K_DISABLED;
        }
        s.is_normalized = true;
        s
    }
}

/// A `TokenizedGenerateReqInput`, the fields up to `stream` plus the later ones that decide
/// whether the engine aborts it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Add {
    pub rid: String,
    pub input_ids: Vec<u32>,
    pub sampling: Sampling,
    pub return_logprob: bool,
    pub logprob_start_len: i64,
    pub top_logprobs_num: i64,
    pub token_ids_logprob: Option<Vec<i64>>,
    pub stream: bool,
    pub session_id: Option<String>,
    pub validation_error: Option<String>,
    pub data_parallel_rank: Option<i64>,
}

fn bad<T>(what: impl Into<String>) -> DecodeResult<T> {
    Err(DecodeError(what.into()))
}

fn opt<'a, T>(r: &mut Reader<'a>, f: impl FnOnce(&mut Reader<'a>) -> DecodeResult<T>) -> DecodeResult<Option<T>> {
    if r.try_nil()? {
        Ok(None)
    } else {
        f(r).map(Some)
    }
}

fn list<'a, T>(r: &mut Reader<'a>, mut f: impl FnMut(&mut Reader<'a>) -> DecodeResult<T>) -> DecodeResult<Vec<T>> {
    let n = r.array_len()?;
    let mut out = Vec::with_capacity(n.min(4096));
    for _ in 0..n {
        out.push(f(r)?);
    }
    Ok(out)
}

/// `str | list[str] | None`.
fn strings(r: &mut Reader<'_>) -> DecodeResult<Vec<String>> {
    match r.peek_kind()? {
        Kind::Nil => {
            r.try_nil()?;
            Ok(Vec::new())
        }
        Kind::Str => Ok(vec![r.str()?.to_string()]),
        _ => list(r, |r| r.str().map(str::to_string)),
    }
}

/// Decodes an ADD payload. An error is what makes the engine drop the message with a warning
/// (and never answer it).
pub fn decode_add(payload: &[u8]) -> DecodeResult<Add> {
    let mut r = Reader::new(payload);
    let n = r.array_len()?;
    if n < 6 {
        return bad(format!("{n} elements: sampling_params (element 5) is required"));
    }
    if r.str()? != ADD_TAG {
        return bad("not tagged TokenizedGenerateReqInput");
    }
    let mut add = Add { logprob_start_len: -1, ..Default::default() };
    for i in 1..n {
        match i {
            1 => add.rid = r.str()?.to_string(),
            2 | 3 => {
                opt(&mut r, |r| r.str())?;
            }
            4 => match opt(&mut r, |r| list(r, |r| r.u32()))? {
                Some(ids) => add.input_ids = ids,
                None => return bad("input_ids is nil: this path needs token ids"),
            },
            5 => add.sampling = decode_sampling(&mut r)?,
            6 => add.return_logprob = r.bool()?,
            7 => add.logprob_start_len = r.i64()?,
            8 => add.top_logprobs_num = r.i64()?,
            9 => add.token_ids_logprob = opt(&mut r, |r| list(r, |r| r.i64()))?,
            10 => add.stream = r.bool()?,
            12 => {
                // SessionParams, array_like: [id, rid, offset, replace].
                add.session_id = opt(&mut r, |r| {
                    let k = r.array_len()?;
                    let mut id = None;
                    for j in 0..k {
                        if j == 0 {
                            id = opt(r, |r| r.str().map(str::to_string))?;
                        } else {
                            r.skip()?;
                        }
                    }
                    Ok(id)
                })?
                .flatten()
            }
            14 => {
                r.bool()?;
            }
            15 => {
                r.f64()?;
            }
            23 => add.validation_error = opt(&mut r, |r| r.str().map(str::to_string))?,
            24 => add.data_parallel_rank = opt(&mut r, |r| r.i64())?,
            _ => r.skip()?,
        }
    }
    if !r.is_at_end() {
        return bad("trailing bytes after the request");
    }
    Ok(add)
}

fn decode_sampling(r: &mut Reader<'_>) -> DecodeResult<Sampling> {
    let n = r.array_len()?;
    let mut s = Sampling::default();
    for i in 0..n {
        match i {
            0 => s.max_new_tokens = opt(r, |r| r.i64())?,
            1 => s.stop = strings(r)?,
            2 => s.stop_token_ids = opt(r, |r| list(r, |r| r.u32()))?,
            3 => s.temperature = r.f64()?,
            4 => s.top_p = r.f64()?,
            5 => s.top_k = r.i64()?,
            6 => s.min_p = r.f64()?,
            7 => s.frequency_penalty = r.f64()?,
            8 => s.presence_penalty = r.f64()?,
            9 => s.repetition_penalty = r.f64()?,
            10 => s.min_new_tokens = r.i64()?,
            11..=14 => s.grammars[i - 11] = opt(r, |r| r.str().map(str::to_string))?,
            15 => s.ignore_eos = r.bool()?,
            16 => s.skip_special_tokens = r.bool()?,
            17 | 18 => {
                r.bool()?;
            }
            21 => s.stream_interval = opt(r, |r| r.i64())?,
            22 => {
                s.logit_bias = opt(r, |r| {
                    let m = r.map_len()?;
                    let mut out = Vec::with_capacity(m.min(4096));
                    for _ in 0..m {
                        out.push((r.str()?.to_string(), r.f64()?));
                    }
                    Ok(out)
                })?
            }
            23 => s.seed = opt(r, |r| r.i64())?,
            24 => s.logprobs = opt(r, |r| r.i64())?,
            25 => s.n = r.i64()?,
            26 => {
                strings(r)?;
            }
            27 => {
                r.i64()?;
            }
            28 => s.is_normalized = r.bool()?,
            _ => r.skip()?,
        }
    }
    Ok(s)
}

/// Why the engine finishes `add` at once with `abort` (its msgpack input checks, then
/// `SamplingParams.verify` on the normalized parameters, then admission), in its own words.
/// The simulator runs with output logprobs enabled and no grammar backend.
pub fn validation_error(add: &Add) -> Option<String> {
    let s = add.sampling.normalized();
    if s.n != 1 {
        return Some(format!("n={} is not supported on the msgpack wire; the frontend must fan out n > 1 itself", s.n));
    }
    if let Some(e) = &add.validation_error {
        return Some(e.clone());
    }
    if add.return_logprob {
        if add.top_logprobs_num != 0 {
            return Some("top_logprobs_num > 0 (output top-k logprobs) is not supported yet".into());
        }
        if add.token_ids_logprob.as_ref().is_some_and(|t| !t.is_empty()) {
            return Some("token_ids_logprob is not supported yet".into());
        }
        let prompt = add.input_ids.len() as i64;
        let start = match add.logprob_start_len {
            -1 => (prompt - 1).max(0),
            s if s < -1 => return Some(format!("logprob_start_len must be -1 or >= 0, got {s}.")),
            s if s >= prompt => {
                return Some(format!("logprob_start_len ({s}) must be smaller than the prompt length ({prompt})."))
            }
            s => s,
        };
        if start < prompt - 1 {
            return Some(
                "logprob_start_len >= 0 (prompt logprobs) is not carried on the msgpack output wire; use \
                 logprob_start_len=-1"
                    .into(),
            );
        }
    }
    if let Some(e) = verify(&s) {
        return Some(e);
    }
    if add.session_id.is_some() {
        return Some(format!("session id {} does not exist", add.session_id.as_deref().unwrap_or_default()));
    }
    if s.grammars.iter().any(Option::is_some) {
        return Some("grammar backend is none: structured output needs --grammar-backend".into());
    }
    None
}

fn verify(s: &Sampling) -> Option<String> {
    let f = |v: f64| py_float(v);
    if s.temperature < 0.0 {
        return Some(format!("temperature must be non-negative, got {}.", f(s.temperature)));
    }
    if !(s.top_p > 0.0 && s.top_p <= 1.0) {
        return Some(format!("top_p must be in (0, 1], got {}.", f(s.top_p)));
    }
    if !(0.0..=1.0).contains(&s.min_p) {
        return Some(format!("min_p must be in [0, 1], got {}.", f(s.min_p)));
    }
    if s.top_k < -1 || s.top_k == 0 {
        return Some(format!("top_k must be -1 (disable), or at least 1, got {}.", s.top_k));
    }
    if s.top_k != TOP_K_DISABLED && s.top_k >= 128 {
        return Some(format!("top_k must be < 128 (fused kernel limit) or -1 (disable), got {}.", s.top_k));
    }
    if !(-2.0..=2.0).contains(&s.frequency_penalty) {
        return Some(format!("frequency_penalty must be in [-2, 2], got {}.", f(s.frequency_penalty)));
    }
    if !(-2.0..=2.0).contains(&s.presence_penalty) {
        return Some(format!("presence_penalty must be in [-2, 2], got {}.", f(s.presence_penalty)));
    }
    if !(0.0..=2.0).contains(&s.repetition_penalty) {
        return Some(format!("repetition_penalty must be in (0, 2], got {}.", f(s.repetition_penalty)));
    }
    if s.min_new_tokens < 0 {
        return Some(format!("min_new_tokens must be in (0, max_new_tokens], got {}.", s.min_new_tokens));
    }
    if let Some(max) = s.max_new_tokens {
        if max < 0 {
            return Some(format!("max_new_tokens must be at least 0, got {max}."));
        }
        if s.min_new_tokens > max {
            return Some(format!("min_new_tokens must be in (0, max_new_tokens({max})], got {}.", s.min_new_tokens));
        }
    }
    if let Some(k) = s.logprobs.filter(|&k| k != 0) {
        return Some(format!("logprobs={k} is not supported; use logprobs=0 (the sampled token's logprob)."));
    }
    if s.grammars[..3].iter().filter(|g| g.is_some()).count() > 1 {
        return Some("Only one of regex, json_schema, or ebnf can be set.".into());
    }
    None
}

/// `list[str]`.
pub fn decode_abort(payload: &[u8]) -> DecodeResult<Vec<String>> {
    let mut r = Reader::new(payload);
    let ids = list(&mut r, |r| r.str().map(str::to_string))?;
    if !r.is_at_end() {
        return bad("trailing bytes after the ABORT");
    }
    Ok(ids)
}

/// One request's row of an output batch.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Row<'a> {
    pub rid: &'a str,
    pub output_ids: &'a [u32],
    /// "" while running, else "stop", "length" or "abort".
    pub finished_reason: &'a str,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
    /// Empty unless the request asked for logprobs.
    pub logprob_values: &'a [f64],
    pub logprob_ids: &'a [u32],
}

/// The load tail of a batch; all zero means no snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Snapshot {
    pub running: u64,
    pub waiting: u64,
    pub kv_active_pages: u64,
    pub kv_total_pages: u64,
}

/// A `BatchTokenIDOutSlim` frame, the 14-element layout of 0.1.1.
pub fn encode_batch(engine_index: u64, rows: &[Row<'_>], load: &Snapshot, out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    w.array(14);
    w.str(BATCH_TAG);
    w.array(rows.len());
    for row in rows {
        w.str(row.rid);
    }
    let ids = |w: &mut Writer<'_>, ids: &[u32]| {
        w.array(ids.len());
        for &t in ids {
            w.uint(t as u64);
        }
    };
    w.array(rows.len());
    for row in rows {
        ids(&mut w, row.output_ids);
    }
    w.array(rows.len());
    for row in rows {
        w.str(row.finished_reason);
    }
    for column in [|r: &Row<'_>| r.prompt_tokens, |r: &Row<'_>| r.completion_tokens, |r: &Row<'_>| r.cached_tokens] {
        w.array(rows.len());
        for row in rows {
            w.uint(column(row));
        }
    }
    w.array(rows.len());
    for row in rows {
        w.array(row.logprob_values.len());
        for &v in row.logprob_values {
            w.f64(v);
        }
    }
    w.array(rows.len());
    for row in rows {
        ids(&mut w, row.logprob_ids);
    }
    w.uint(engine_index);
    w.uint(load.running);
    w.uint(load.waiting);
    w.uint(load.kv_active_pages);
    w.uint(load.kv_total_pages);
}
