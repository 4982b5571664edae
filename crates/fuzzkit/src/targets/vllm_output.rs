//! vLLM `EngineCoreOutputs` decoding (`engine::zmq::vllm::output::decode_batch`) on whatever an
//! engine socket may deliver: the engine is another process, and a bad frame must cost one
//! decode error, never the shard.
//!
//! Even first byte: raw frames (the main frame, then aux frames after `|AUX|` separators).
//! Odd first byte: a structured batch written by this harness from the wire reference (fields
//! in order, logprobs as numpy arrays inline, as bin, or in aux frames), where any field may be
//! replaced by a wrong-typed value and the field counts may be short or long.
//!
//! Oracles:
//! - never a panic, on any frame;
//! - a batch built entirely from well-typed fields decodes, and to exactly what was encoded
//!   (token ids, finish and stop reasons, cached tokens, errors, logprob rows, load, utility);
//! - decoding is a pure function of the bytes: decoding twice gives the same result.

use crate::msgpack_gen::{Field, Value};
use arbitrary::{Arbitrary, Unstructured};
use shardgate_wire::msgpack::Writer;
use shardgate_wire::output::LogprobRow;
use shardgate_wire::vllm::output::{decode_batch, OutputBatch, SchedulerLoad};
use shardgate_wire::{FinishReason, Logprobs, StopReason, TokenEvent};

/// One input: panics (an oracle failed) or returns.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode & 1 == 0 {
        // Frames of one message, separated by `AUX_SEPARATOR` (seeds are real engine frames).
        let mut frames = split_frames(rest);
        let main = frames.remove(0);
        let first = decode_batch(main, &frames).map(|b| summarize(&b));
        let second = decode_batch(main, &frames).map(|b| summarize(&b));
        crate::assert_deterministic(first, second);
        return;
    }
    let mut u = Unstructured::new(rest);
    let Ok(batch) = Batch::arbitrary(&mut u) else { return };
    let mut aux: Vec<Vec<u8>> = Vec::new();
    let mut main = Vec::new();
    let expected = batch.write(&mut Writer::new(&mut main), &mut aux);
    let aux_refs: Vec<&[u8]> = aux.iter().map(Vec::as_slice).collect();
    crate::assert_decodes_as_written(expected, decode_batch(&main, &aux_refs).map(|b| summarize(&b)));
}

/// Separates the frames of a raw-mode input (main frame first, then aux frames 1, 2, ...).
const AUX_SEPARATOR: &[u8] = b"|AUX|";

fn split_frames(bytes: &[u8]) -> Vec<&[u8]> {
    let mut frames = Vec::new();
    let mut rest = bytes;
    while let Some(at) = rest.windows(AUX_SEPARATOR.len()).position(|w| w == AUX_SEPARATOR) {
        frames.push(&rest[..at]);
        rest = &rest[at + AUX_SEPARATOR.len()..];
    }
    frames.push(rest);
    frames
}

/// A decoded batch, owned and comparable.
#[derive(Debug, Clone, PartialEq)]
struct Summary {
    engine_index: u32,
    outputs: Vec<(String, TokenEvent)>,
    load: Option<SchedulerLoad>,
    timestamp_bits: u64,
    utility: Option<(u64, Option<String>)>,
    finished_requests: Vec<String>,
    wave_complete: Option<u64>,
    start_wave: Option<u64>,
}

fn summarize(b: &OutputBatch<'_>) -> Summary {
    Summary {
        engine_index: b.engine_index,
        outputs: b.outputs.iter().map(|(id, ev)| (id.to_string(), ev.clone())).collect(),
        load: b.load,
        timestamp_bits: b.timestamp.to_bits(),
        utility: b.utility.as_ref().map(|u| (u.call_id, u.failure.clone())),
        finished_requests: b.finished_requests.iter().map(|s| s.to_string()).collect(),
        wave_complete: b.wave_complete,
        start_wave: b.start_wave,
    }
}

// ---------------------------------------------------------------------------------------------
// Structured batches.

#[derive(Debug, Arbitrary)]
struct Batch {
    engine_index: Field<u16>,
    outputs: Field<Vec<Output>>,
    load: Field<Option<Load>>,
    timestamp: Field<f64>,
    utility: Field<Option<Utility>>,
    finished: Field<Option<Vec<String>>>,
    wave_complete: Field<Option<u32>>,
    start_wave: Field<Option<u32>>,
    /// 0..=8 writes a prefix of the fields (older engines); more appends unknown ones.
    fields: Fields,
    extra: Vec<Value>,
}

/// How many fields a struct array claims.
#[derive(Debug, Clone, Copy)]
struct Fields(u8);

impl<'a> Arbitrary<'a> for Fields {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        // Mostly the full layout.
        Ok(Fields(if u.ratio(3u8, 4u8)? { u8::MAX } else { u.arbitrary()? }))
    }
}

#[derive(Debug, Arbitrary)]
struct Load {
    running: u32,
    waiting: u32,
    kv: f64,
    step_counter: Option<u64>,
    unknown: Option<(String, Value)>,
}

#[derive(Debug, Arbitrary)]
struct Utility {
    call_id: u64,
    failure: Option<String>,
    extra: u8,
}

#[derive(Debug, Arbitrary)]
struct Output {
    id: Field<String>,
    tokens: Field<Vec<u32>>,
    logprobs: Field<Option<Lp>>,
    prompt_logprobs: Field<Option<Lp>>,
    finish: Field<Option<u8>>,
    stop_reason: Field<Option<StopSpec>>,
    cached: Field<Option<Option<u32>>>,
    error: Field<Option<(String, String)>>,
    /// `mm_cache_miss_hashes` (field 14): a non-empty list is a retryable error.
    mm_miss: Field<Option<Vec<String>>>,
    /// Fields in the array: 2..=19 (0.27.1 wrote 14, 0.33 writes 19), or more.
    fields: Fields,
    other: Vec<Value>,
}

#[derive(Debug, Arbitrary)]
enum StopSpec {
    Token(u32),
    Text(String),
}

/// `LogprobsLists`: ids [rows, cols], logprobs [rows, cols], ranks [rows], then extras.
#[derive(Debug, Arbitrary)]
struct Lp {
    rows: u8,
    cols: u8,
    ids: Vec<i64>,
    lps: Vec<f32>,
    ranks: Vec<i64>,
    ids_array: ArraySpec,
    lps_array: ArraySpec,
    ranks_array: ArraySpec,
    extra_fields: u8,
}

/// How one numpy array goes on the wire, and how it may be wrong.
#[derive(Debug, Arbitrary)]
struct ArraySpec {
    dtype: Dtype,
    placement: Placement,
    /// A shape other than the consistent one.
    wrong_shape: Option<Vec<u8>>,
    /// Data of another length than the shape says.
    wrong_len: Option<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Arbitrary)]
enum Dtype {
    /// The column's natural type, as vLLM sends it (`<i8` ids and ranks, `<f4` logprobs).
    Natural,
    I8,
    I4,
    Int64,
    Int32,
    F4,
    F8,
    Float32,
    Float64,
    U8,
    F2,
}

impl Dtype {
    fn resolve(self, int_column: bool) -> Dtype {
        match (self, int_column) {
            (Dtype::Natural, true) => Dtype::I8,
            (Dtype::Natural, false) => Dtype::F4,
            (d, _) => d,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Dtype::Natural => unreachable!("resolved first"),
            Dtype::I8 => "<i8",
            Dtype::I4 => "<i4",
            Dtype::Int64 => "int64",
            Dtype::Int32 => "int32",
            Dtype::F4 => "<f4",
            Dtype::F8 => "<f8",
            Dtype::Float32 => "float32",
            Dtype::Float64 => "float64",
            Dtype::U8 => "<u8",
            Dtype::F2 => "<f2",
        }
    }

    fn is_int(self) -> bool {
        matches!(self, Dtype::I8 | Dtype::I4 | Dtype::Int64 | Dtype::Int32)
    }

    fn is_float(self) -> bool {
        matches!(self, Dtype::F4 | Dtype::F8 | Dtype::Float32 | Dtype::Float64)
    }

    fn width(self) -> usize {
        match self {
            Dtype::I4 | Dtype::Int32 | Dtype::F4 | Dtype::Float32 => 4,
            Dtype::F2 => 2,
            _ => 8,
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Placement {
    /// msgpack ext type 3, as msgspec writes small arrays.
    Inline,
    Bin,
    /// An out-of-band frame.
    Aux,
    /// An aux index that may not exist.
    AuxIndex(u8),
    Ext(i8),
}

impl Lp {
    /// Writes `[ids, logprobs, ranks, extras...]`; returns the expected rows when the three
    /// arrays are consistent and of the column types vLLM uses (integer ids and ranks, float
    /// logprobs). Any other combination only has to decode without a panic.
    fn write(&self, w: &mut Writer<'_>, aux: &mut Vec<Vec<u8>>) -> Option<Logprobs> {
        let rows = (self.rows % 5) as usize;
        let cols = (self.cols % 4) as usize;
        let extra = (self.extra_fields % 3) as usize;
        w.array(3 + extra);
        let ids: Vec<i64> = (0..rows * cols).map(|i| self.ids.get(i).copied().unwrap_or(i as i64 + 100)).collect();
        let lps: Vec<f32> = (0..rows * cols).map(|i| self.lps.get(i).copied().unwrap_or(-(i as f32))).collect();
        let ranks: Vec<i64> = (0..rows).map(|i| self.ranks.get(i).copied().unwrap_or(i as i64 + 1)).collect();
        let ids_dtype = self.ids_array.dtype.resolve(true);
        let lps_dtype = self.lps_array.dtype.resolve(false);
        let ranks_dtype = self.ranks_array.dtype.resolve(true);
        let mut ok = true;
        ok &= self.ids_array.write(w, aux, ids_dtype, &[rows, cols], &Column::Int(&ids));
        ok &= self.lps_array.write(w, aux, lps_dtype, &[rows, cols], &Column::Float(&lps));
        ok &= self.ranks_array.write(w, aux, ranks_dtype, &[rows], &Column::Int(&ranks));
        for _ in 0..extra {
            w.nil();
        }
        let typed = ids_dtype.is_int() && lps_dtype.is_float() && ranks_dtype.is_int();
        if !ok || !typed || cols == 0 {
            return None;
        }
        // What the wire holds after the dtype's width: i32 columns wrap, f32 is exact either way.
        let narrow = |d: Dtype, v: i64| if d.width() == 4 { v as i32 as i64 } else { v };
        let token = |i: usize| u32::try_from(narrow(ids_dtype, ids[i])).unwrap_or(u32::MAX);
        Some(Logprobs {
            rows: (0..rows)
                .map(|r| LogprobRow {
                    token_id: token(r * cols),
                    logprob: lps[r * cols],
                    rank: narrow(ranks_dtype, ranks[r]),
                    top: (1..cols).map(|c| (token(r * cols + c), lps[r * cols + c])).collect(),
                })
                .collect(),
        })
    }
}

enum Column<'a> {
    Int(&'a [i64]),
    Float(&'a [f32]),
}

impl ArraySpec {
    /// Writes `[dtype, shape, data]`; returns whether it is consistent (a supported dtype, the
    /// right shape and byte length, data where it says).
    fn write(
        &self,
        w: &mut Writer<'_>,
        aux: &mut Vec<Vec<u8>>,
        dtype: Dtype,
        shape: &[usize],
        col: &Column<'_>,
    ) -> bool {
        let mut ok = dtype.is_int() || dtype.is_float();
        let count: usize = shape.iter().product();
        let mut bytes = Vec::with_capacity(count * dtype.width());
        for i in 0..count {
            let (as_int, as_float) = match col {
                Column::Int(v) => (v[i], v[i] as f64),
                Column::Float(v) => (v[i] as i64, v[i] as f64),
            };
            match dtype {
                Dtype::I8 | Dtype::Int64 | Dtype::U8 => bytes.extend_from_slice(&as_int.to_le_bytes()),
                Dtype::I4 | Dtype::Int32 => bytes.extend_from_slice(&(as_int as i32).to_le_bytes()),
                Dtype::F4 | Dtype::Float32 => bytes.extend_from_slice(&(as_float as f32).to_le_bytes()),
                Dtype::F8 | Dtype::Float64 => bytes.extend_from_slice(&as_float.to_le_bytes()),
                Dtype::F2 => bytes.extend_from_slice(&[0, 0]),
                Dtype::Natural => unreachable!("resolved first"),
            }
        }
        if let Some(len) = self.wrong_len {
            bytes.resize(len as usize, 0xab);
            ok = false;
        }
        w.array(3);
        w.str(dtype.name());
        match &self.wrong_shape {
            Some(dims) => {
                ok = false;
                w.array(dims.len());
                for &d in dims {
                    w.uint(d as u64);
                }
            }
            None => {
                w.array(shape.len());
                for &d in shape {
                    w.uint(d as u64);
                }
            }
        }
        match self.placement {
            Placement::Inline => w.ext(3, &bytes),
            Placement::Bin => w.bin(&bytes),
            Placement::Aux => {
                aux.push(bytes);
                w.uint(aux.len() as u64);
            }
            Placement::AuxIndex(i) => {
                ok = false;
                aux.push(bytes);
                w.uint(i as u64);
            }
            Placement::Ext(code) => {
                ok &= code == 3;
                w.ext(code, &bytes);
            }
        }
        ok
    }
}

impl Batch {
    /// Writes the batch; returns what it must decode to when every part is well-formed.
    fn write(&self, w: &mut Writer<'_>, aux: &mut Vec<Vec<u8>>) -> Option<Summary> {
        let n = (self.fields.0 as usize).min(8 + self.extra.len());
        let mut ok = true;
        let mut s = Summary {
            engine_index: 0,
            outputs: Vec::new(),
            load: None,
            timestamp_bits: 0f64.to_bits(),
            utility: None,
            finished_requests: Vec::new(),
            wave_complete: None,
            start_wave: None,
        };
        w.array(n);
        for field in 0..n {
            match field {
                0 => {
                    ok &= self.engine_index.good().is_some();
                    self.engine_index.write(w, |v, w| w.uint(*v as u64));
                    s.engine_index = self.engine_index.good().map_or(0, |&v| v as u32);
                }
                1 => match &self.outputs {
                    Field::Good(outputs) => {
                        w.array(outputs.len());
                        for o in outputs {
                            match o.write(w, aux) {
                                Some(expected) => s.outputs.push(expected),
                                None => ok = false,
                            }
                        }
                    }
                    Field::Wrong(v) => {
                        ok = false;
                        v.write(w);
                    }
                },
                2 => {
                    ok &= self.load.good().is_some();
                    self.load.write(w, |load, w| match load {
                        None => w.nil(),
                        Some(l) => {
                            let entries = 3 + l.step_counter.is_some() as usize + l.unknown.is_some() as usize;
                            w.map(entries);
                            w.str("num_running_reqs");
                            w.uint(l.running as u64);
                            w.str("num_waiting_reqs");
                            w.uint(l.waiting as u64);
                            if let Some((k, v)) = &l.unknown {
                                // A key the decoder does not know: skipped whatever its value.
                                w.str(&format!("x-{k}"));
                                v.write(w);
                            }
                            w.str("kv_cache_usage");
                            w.f64(l.kv);
                            if let Some(c) = l.step_counter {
                                w.str("step_counter");
                                w.uint(c);
                            }
                            s.load = Some(SchedulerLoad {
                                running: l.running,
                                waiting: l.waiting,
                                kv_cache_usage: l.kv,
                                step_counter: l.step_counter.unwrap_or(0),
                                current_wave: 0,
                            });
                        }
                    });
                }
                3 => {
                    ok &= self.timestamp.good().is_some();
                    self.timestamp.write(w, |v, w| w.f64(*v));
                    s.timestamp_bits = self.timestamp.good().map_or(0, |v| v.to_bits());
                }
                4 => {
                    ok &= self.utility.good().is_some();
                    self.utility.write(w, |u, w| match u {
                        None => w.nil(),
                        Some(u) => {
                            let extra = (u.extra % 3) as usize;
                            w.array(2 + extra);
                            w.out.push(0xcf);
                            w.out.extend_from_slice(&u.call_id.to_be_bytes());
                            match &u.failure {
                                Some(f) => w.str(f),
                                None => w.nil(),
                            }
                            for _ in 0..extra {
                                w.nil();
                            }
                            s.utility = Some((u.call_id, u.failure.clone()));
                        }
                    });
                }
                5 => {
                    ok &= self.finished.good().is_some();
                    self.finished.write(w, |f, w| match f {
                        None => w.nil(),
                        Some(ids) => {
                            w.array(ids.len());
                            for id in ids {
                                w.str(id);
                            }
                            s.finished_requests = ids.clone();
                        }
                    });
                }
                6 => {
                    ok &= self.wave_complete.good().is_some();
                    self.wave_complete.write(w, |v, w| opt_uint(w, *v));
                    s.wave_complete = self.wave_complete.good().copied().flatten().map(u64::from);
                }
                7 => {
                    ok &= self.start_wave.good().is_some();
                    self.start_wave.write(w, |v, w| opt_uint(w, *v));
                    s.start_wave = self.start_wave.good().copied().flatten().map(u64::from);
                }
                i => self.extra[i - 8].write(w),
            }
        }
        ok.then_some(s)
    }
}

fn opt_uint(w: &mut Writer<'_>, v: Option<u32>) {
    match v {
        Some(v) => w.uint(v as u64),
        None => w.nil(),
    }
}

impl Output {
    fn write(&self, w: &mut Writer<'_>, aux: &mut Vec<Vec<u8>>) -> Option<(String, TokenEvent)> {
        let n = (self.fields.0 as usize).clamp(2, 19 + self.other.len());
        let mut ok = true;
        let mut ev = TokenEvent::default();
        w.array(n);
        for field in 0..n {
            match field {
                0 => {
                    ok &= self.id.good().is_some();
                    self.id.write(w, |s, w| w.str(s));
                }
                1 => {
                    ok &= self.tokens.good().is_some();
                    self.tokens.write(w, |ids, w| {
                        w.array(ids.len());
                        for &t in ids {
                            w.uint(t as u64);
                        }
                        ev.token_ids = ids.clone();
                    });
                }
                2 | 3 => {
                    let spec = if field == 2 { &self.logprobs } else { &self.prompt_logprobs };
                    match spec {
                        Field::Good(None) => w.nil(),
                        Field::Good(Some(lp)) => {
                            let decoded = lp.write(w, aux);
                            ok &= decoded.is_some();
                            if field == 2 {
                                ev.logprobs = decoded;
                            } else {
                                ev.prompt_logprobs = decoded;
                            }
                        }
                        Field::Wrong(v) => {
                            ok = false;
                            v.write(w);
                        }
                    }
                }
                5 => {
                    ok &= self.finish.good().is_some();
                    self.finish.write(w, |f, w| match f {
                        None => w.nil(),
                        Some(code) => {
                            let code = code % 6;
                            w.uint(code as u64);
                            ev.finish = FinishReason::from_vllm(code as u64);
                            // Code 5 is unknown: the decoder must refuse the batch.
                            ok &= ev.finish.is_some();
                        }
                    });
                }
                6 => {
                    ok &= self.stop_reason.good().is_some();
                    self.stop_reason.write(w, |r, w| match r {
                        None => w.nil(),
                        Some(StopSpec::Token(t)) => {
                            w.uint(*t as u64);
                            ev.stop_reason = Some(StopReason::TokenId(*t));
                        }
                        Some(StopSpec::Text(s)) => {
                            w.str(s);
                            ev.stop_reason = Some(StopReason::Text(s.clone()));
                        }
                    });
                }
                11 => {
                    ok &= self.cached.good().is_some();
                    self.cached.write(w, |c, w| match c {
                        None => w.nil(),
                        Some(None) => {
                            w.map(1);
                            w.str("num_prompt_tokens");
                            w.uint(7);
                        }
                        Some(Some(n)) => {
                            w.map(2);
                            w.str("num_prompt_tokens");
                            w.uint(7);
                            w.str("num_cached_tokens");
                            w.uint(*n as u64);
                            ev.cached_tokens = Some(*n);
                        }
                    });
                }
                14 => {
                    ok &= self.mm_miss.good().is_some();
                    self.mm_miss.write(w, |m, w| match m {
                        None => w.nil(),
                        Some(hashes) => {
                            w.array(hashes.len());
                            for h in hashes {
                                w.str(h);
                            }
                            if !hashes.is_empty() {
                                ev.error = Some(shardgate_wire::RequestError {
                                    code: "mm_cache_miss".into(),
                                    message: format!("the engine's multimodal cache misses {}", hashes.join(", ")),
                                    retryable: true,
                                });
                            }
                        }
                    });
                }
                18 => {
                    ok &= self.error.good().is_some();
                    self.error.write(w, |e, w| match e {
                        None => w.nil(),
                        Some((code, message)) => {
                            w.map(2);
                            w.str("code");
                            w.str(code);
                            w.str("message");
                            w.str(message);
                            ev.error = Some(shardgate_wire::RequestError {
                                code: code.clone(),
                                message: message.clone(),
                                retryable: false,
                            });
                        }
                    });
                }
                i if i >= 19 => self.other[i - 19].write(w),
                // Fields the decoder skips: anything goes.
                i => match self.other.get(i) {
                    Some(v) => v.write(w),
                    None => w.nil(),
                },
            }
        }
        let id = self.id.good().cloned().unwrap_or_default();
        ok.then_some((id, ev))
    }
}
