//! TokenSpeed `BatchTokenIDOutSlim` decoding (`engine::zmq::tokenspeed::output::decode_batch`),
//! the columnar counterpart of the vLLM batch.
//!
//! Even first byte: a raw frame. Odd first byte: a structured batch written by this harness
//! from the wire reference (tag, the eight columns, the load tail, newer trailing elements),
//! where columns may be ragged, any element may be a wrong-typed value, and the element count
//! may be short or long.
//!
//! Oracles:
//! - never a panic, on any frame;
//! - a well-formed batch decodes, and to exactly what was encoded (per request: ids, finish,
//!   cached tokens, logprob rows; the engine index; the load snapshot when pages > 0);
//! - decoding twice gives the same result.

use crate::msgpack_gen::{interesting_u64, Field, Value};
use arbitrary::{Arbitrary, Unstructured};
use shardgate_wire::msgpack::Writer;
use shardgate_wire::output::LogprobRow;
use shardgate_wire::tokenspeed::output::{decode_batch, finish_reason, LoadSnapshot, OutputBatch, BATCH_TAG};
use shardgate_wire::{Logprobs, TokenEvent};

/// One input: panics (an oracle failed) or returns.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode & 1 == 0 {
        let first = decode_batch(rest).map(|b| summarize(&b));
        let second = decode_batch(rest).map(|b| summarize(&b));
        crate::assert_deterministic(first, second);
        return;
    }
    let mut u = Unstructured::new(rest);
    let Ok(batch) = Batch::arbitrary(&mut u) else { return };
    let mut frame = Vec::new();
    let expected = batch.write(&mut Writer::new(&mut frame));
    crate::assert_decodes_as_written(expected, decode_batch(&frame).map(|b| summarize(&b)));
}

#[derive(Debug, Clone, PartialEq)]
struct Summary {
    engine_index: u32,
    outputs: Vec<(String, TokenEvent)>,
    load: Option<LoadSnapshot>,
}

fn summarize(b: &OutputBatch<'_>) -> Summary {
    Summary {
        engine_index: b.engine_index,
        outputs: b.outputs.iter().map(|(id, ev)| (id.to_string(), ev.clone())).collect(),
        load: b.load,
    }
}

/// One request's entries across the columns.
#[derive(Debug, Arbitrary)]
struct Request {
    rid: String,
    output_ids: Vec<u32>,
    finished: Finished,
    prompt_tokens: u32,
    completion_tokens: u32,
    cached: u32,
    /// (logprob value, token id) pairs.
    logprobs: Vec<(f64, u32)>,
    /// Fewer logprob ids than values: a ragged pair the decoder must refuse.
    drop_lp_ids: bool,
}

#[derive(Debug, Arbitrary)]
enum Finished {
    Running,
    Stop,
    Length,
    Abort,
    Error,
    Other(String),
}

impl Finished {
    fn as_str(&self) -> &str {
        match self {
            Finished::Running => "",
            Finished::Stop => "stop",
            Finished::Length => "length",
            Finished::Abort => "abort",
            Finished::Error => "error",
            Finished::Other(s) => s,
        }
    }
}

#[derive(Debug, Arbitrary)]
struct Batch {
    tag: Field<Tag>,
    requests: Vec<Request>,
    /// Per column (0..8): `Some(v)` replaces the column with a wrong value.
    wrong_column: Option<(u8, Value)>,
    /// A column with one entry too many or too few.
    ragged_column: Option<(u8, bool)>,
    /// Elements in the top array: 9 (oldest), 10..=14 (tail values), more (newer engines).
    elements: u8,
    tail: [Field<Tail>; 5],
    extra: Vec<Value>,
}

#[derive(Debug, Arbitrary)]
enum Tag {
    Batch,
    SglangLookalike,
    Other(String),
}

#[derive(Debug, Clone, Copy)]
struct Tail(u64);

impl<'a> Arbitrary<'a> for Tail {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        interesting_u64(u).map(Tail)
    }
}

impl Batch {
    fn write(&self, w: &mut Writer<'_>) -> Option<Summary> {
        let elements = match self.elements % 20 {
            e if e < 8 => 14, // mostly the current layout
            e => e as usize,
        }
        .min(14 + self.extra.len());
        let mut ok = elements >= 9;
        w.array(elements);
        if elements == 0 {
            return None;
        }
        match &self.tag {
            Field::Good(Tag::Batch) => w.str(BATCH_TAG),
            Field::Good(Tag::SglangLookalike) => {
                ok = false;
                w.str("BatchTokenIDSlimOutput");
            }
            Field::Good(Tag::Other(s)) => {
                ok &= s == BATCH_TAG;
                w.str(s);
            }
            Field::Wrong(v) => {
                ok = false;
                v.write(w);
            }
        }
        let reqs = &self.requests;
        for column in 0..8u8 {
            if 1 + column as usize >= elements {
                return None;
            }
            if let Some((c, v)) = &self.wrong_column {
                if c % 8 == column {
                    ok = false;
                    v.write(w);
                    continue;
                }
            }
            let mut len = reqs.len();
            if let Some((c, longer)) = self.ragged_column {
                // The rids column defines the count; a ragged one is any other column.
                if c % 8 == column && column > 0 {
                    if longer {
                        len += 1;
                    } else if len > 0 {
                        len -= 1;
                    } else {
                        len = 1;
                    }
                    ok = false;
                }
            }
            w.array(len);
            for i in 0..len {
                let r = reqs.get(i);
                match column {
                    0 => w.str(r.map_or("extra", |r| r.rid.as_str())),
                    1 => write_u32s(w, r.map_or(&[][..], |r| &r.output_ids)),
                    2 => w.str(r.map_or("", |r| r.finished.as_str())),
                    3 => w.uint(r.map_or(0, |r| r.prompt_tokens) as u64),
                    4 => w.uint(r.map_or(0, |r| r.completion_tokens) as u64),
                    5 => w.uint(r.map_or(0, |r| r.cached) as u64),
                    6 => {
                        let lps = r.map_or(&[][..], |r| &r.logprobs);
                        w.array(lps.len());
                        for (v, _) in lps {
                            w.f64(*v);
                        }
                    }
                    _ => {
                        let lps = r.map_or(&[][..], |r| &r.logprobs);
                        let n = match r {
                            Some(r) if r.drop_lp_ids && !lps.is_empty() => {
                                ok = false;
                                lps.len() - 1
                            }
                            _ => lps.len(),
                        };
                        w.array(n);
                        for (_, id) in &lps[..n] {
                            w.uint(*id as u64);
                        }
                    }
                }
            }
        }
        let mut tail = [0u64; 5];
        for i in 9..elements {
            let t = i - 9;
            if t < 5 {
                match &self.tail[t] {
                    Field::Good(v) => {
                        tail[t] = v.0;
                        w.uint(v.0);
                    }
                    Field::Wrong(v) => {
                        ok = false;
                        v.write(w);
                    }
                }
            } else {
                self.extra[t - 5].write(w);
            }
        }
        let [engine_index, running, waiting, active, total] = tail;
        ok &= engine_index <= u32::MAX as u64;
        if total > 0 {
            ok &= running <= u32::MAX as u64 && waiting <= u32::MAX as u64;
        }
        if !ok {
            return None;
        }
        let outputs = reqs
            .iter()
            .map(|r| {
                let logprobs = (!r.logprobs.is_empty()).then(|| Logprobs {
                    rows: r
                        .logprobs
                        .iter()
                        .map(|&(v, id)| LogprobRow { token_id: id, logprob: v as f32, rank: 0, top: Vec::new() })
                        .collect(),
                });
                let ev = TokenEvent {
                    token_ids: r.output_ids.clone(),
                    logprobs,
                    finish: finish_reason(r.finished.as_str()),
                    cached_tokens: Some(r.cached),
                    ..Default::default()
                };
                (r.rid.clone(), ev)
            })
            .collect();
        let load = (total > 0).then_some(LoadSnapshot {
            running: running as u32,
            waiting: waiting as u32,
            kv_active_pages: active,
            kv_total_pages: total,
        });
        Some(Summary { engine_index: engine_index as u32, outputs, load })
    }
}

fn write_u32s(w: &mut Writer<'_>, ids: &[u32]) {
    w.array(ids.len());
    for &id in ids {
        w.uint(id as u64);
    }
}
