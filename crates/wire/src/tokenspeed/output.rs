//! Engine → client messages: `BatchTokenIDOutSlim`, one frame per scheduler round and rank.
//!
//! The batch is columnar (every column has one entry per request id) and its token column is
//! a delta, for `stream = false` requests too. Decoding borrows the request ids from the frame;
//! tokens and logprobs are copied out because they outlive the frame in the request's queue.
//!
//! Event contract, the same as the vLLM codec's: a `stop` finish keeps the matched stop/EOS
//! token as the event's last token (TokenSpeed includes it in `output_ids` and in its token
//! counts, as vLLM does), and `pipeline::choice` leaves it out of the text. `stop_reason` is
//! never set here: the wire does not say which token matched (see `finish`).

use super::super::msgpack::{DecodeError, DecodeResult, Reader};
use crate::limits;
use crate::output::LogprobRow;
use crate::{FinishReason, Logprobs, TokenEvent};

/// The tag (element 0) of an output batch. SGLang's look-alike (`BatchTokenIDSlimOutput`) has
/// other columns in other places and is refused.
pub const BATCH_TAG: &str = "BatchTokenIDOutSlim";

/// Elements up to and including the logprob columns: what the oldest senders write.
const MIN_ELEMENTS: usize = 9;

/// The engine's load, sampled once per scheduler round and attached to its next batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadSnapshot {
    /// Requests registered on the rank.
    pub running: u32,
    /// The scheduler's waiting queue (requests compiling a grammar are not counted).
    pub waiting: u32,
    /// KV pages held by live requests (retained prefix-cache pages not counted).
    pub kv_active_pages: u64,
    /// Usable KV pages; never 0 in a snapshot.
    pub kv_total_pages: u64,
}

impl LoadSnapshot {
    pub fn kv_cache_usage(&self) -> f64 {
        (self.kv_active_pages as f64 / self.kv_total_pages.max(1) as f64).min(1.0)
    }
}

/// One decoded `BatchTokenIDOutSlim`.
#[derive(Debug, Default)]
pub struct OutputBatch<'a> {
    /// The producing engine's index (`--zmq-engine-index` + DP rank): its identity value, not
    /// the registration's `data_parallel_rank`.
    pub engine_index: u32,
    pub outputs: Vec<(&'a str, TokenEvent)>,
    /// `None` when the engine sent no snapshot: `kv_total_pages` 0, or an older batch without
    /// the tail.
    pub load: Option<LoadSnapshot>,
}

/// Decodes an output frame (the first frame of the message; the text path has no others).
/// The death sentinel is not a batch: compare against `ENGINE_CORE_DEAD` first.
pub fn decode_batch(frame: &[u8]) -> DecodeResult<OutputBatch<'_>> {
    let mut r = Reader::new(frame);
    let elements = r.array_len()?;
    if elements < MIN_ELEMENTS {
        return Err(DecodeError(format!("{BATCH_TAG} with {elements} elements, at least {MIN_ELEMENTS} expected")));
    }
    let tag = r.str()?;
    if tag != BATCH_TAG {
        return Err(DecodeError(format!("output tagged {tag:?}, expected {BATCH_TAG:?}")));
    }
    let rids = column(&mut r, "rids", None, |r| r.str())?;
    let n = Some(rids.len());
    let output_ids = column(&mut r, "output_ids", n, ids)?;
    let finished = column(&mut r, "finished_reasons", n, |r| r.str().map(finish_reason))?;
    column(&mut r, "prompt_tokens", n, |r| r.u64())?;
    column(&mut r, "completion_tokens", n, |r| r.u64())?;
    let cached = column(&mut r, "cached_tokens", n, |r| r.u32())?;
    let lp_values = column(&mut r, "output_token_logprobs_val", n, |r| list(r, |r| r.f64()))?;
    let lp_ids = column(&mut r, "output_token_logprobs_idx", n, ids)?;
    let mut tail = [0u64; 5];
    for (i, slot) in (MIN_ELEMENTS..elements).zip(tail.iter_mut()) {
        *slot = r.u64().map_err(|e| DecodeError(format!("{BATCH_TAG} element {i}: {e}")))?;
    }
    for _ in MIN_ELEMENTS + tail.len()..elements {
        r.skip()?; // appended by a newer engine
    }
    if !r.is_at_end() {
        return Err(DecodeError(format!("{} trailing bytes after the batch", frame.len() - r.position())));
    }
    let [engine_index, running, waiting, kv_active_pages, kv_total_pages] = tail;
    let narrow = |v: u64, what: &str| {
        u32::try_from(v).map_err(|_| DecodeError(format!("{BATCH_TAG} {what} {v} does not fit u32")))
    };
    let load = (kv_total_pages > 0)
        .then(|| -> DecodeResult<LoadSnapshot> {
            Ok(LoadSnapshot {
                running: narrow(running, "num_running")?,
                waiting: narrow(waiting, "num_waiting")?,
                kv_active_pages,
                kv_total_pages,
            })
        })
        .transpose()?;
    let mut outputs = Vec::with_capacity(rids.len());
    let columns = output_ids.into_iter().zip(finished).zip(cached).zip(lp_values.into_iter().zip(lp_ids));
    for (rid, (((token_ids, finish), cached), (values, lp_token_ids))) in rids.into_iter().zip(columns) {
        if values.len() != lp_token_ids.len() {
            return Err(DecodeError(format!(
                "request {rid}: {} logprob values for {} logprob token ids",
                values.len(),
                lp_token_ids.len()
            )));
        }
        let logprobs = (!values.is_empty()).then(|| Logprobs {
            rows: lp_token_ids
                .into_iter()
                .zip(values)
                .map(|(token_id, lp)| LogprobRow {
                    token_id,
                    logprob: lp as f32,
                    // The wire carries the sampled token only, never its rank: 0 = unknown.
                    rank: 0,
                    top: Vec::new(),
                })
                .collect(),
        });
        outputs
            .push((rid, TokenEvent { token_ids, logprobs, finish, cached_tokens: Some(cached), ..Default::default() }));
    }
    Ok(OutputBatch { engine_index: narrow(engine_index, "engine_index")?, outputs, load })
}

/// A finish reason string: `""` while running. An unknown reason counts as `stop`, as SMG
/// reads it, so a newer engine's reason ends the request instead of failing the whole batch.
pub fn finish_reason(reason: &str) -> Option<FinishReason> {
    match reason {
        "" => None,
        "stop" => Some(FinishReason::Stop),
        "length" => Some(FinishReason::Length),
        "abort" => Some(FinishReason::Abort),
        "error" => Some(FinishReason::Error),
        other => {
            tracing::warn!("unknown TokenSpeed finish reason {other:?}; treated as stop");
            Some(FinishReason::Stop)
        }
    }
}

/// One column: an array with exactly `expected` entries when given.
fn column<'a, T>(
    r: &mut Reader<'a>,
    name: &str,
    expected: Option<usize>,
    mut item: impl FnMut(&mut Reader<'a>) -> DecodeResult<T>,
) -> DecodeResult<Vec<T>> {
    let n = r.array_len().map_err(|e| DecodeError(format!("{name}: {e}")))?;
    if let Some(expected) = expected.filter(|&e| e != n) {
        return Err(DecodeError(format!("{name} has {n} entries for {expected} request ids")));
    }
    let mut out = Vec::with_capacity(n.min(limits::decode_reserve_items_max));
    for _ in 0..n {
        out.push(item(r).map_err(|e| DecodeError(format!("{name}: {e}")))?);
    }
    Ok(out)
}

fn list<'a, T>(r: &mut Reader<'a>, mut item: impl FnMut(&mut Reader<'a>) -> DecodeResult<T>) -> DecodeResult<Vec<T>> {
    let n = r.array_len()?;
    let mut out = Vec::with_capacity(n.min(limits::decode_reserve_items_max));
    for _ in 0..n {
        out.push(item(r)?);
    }
    Ok(out)
}

fn ids(r: &mut Reader<'_>) -> DecodeResult<Vec<u32>> {
    list(r, |r| r.u32())
}

#[cfg(test)]
mod tests {
    use super::super::super::msgpack::Writer;
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// The reference's batch (§7): req-1 one token with a logprob, req-2 its last two tokens
    /// ending in the stop token 2; running 3, waiting 1, 120 of 1000 pages.
    const REFERENCE_BATCH: &str = concat!(
        "9e",
        "b34261746368546f6b656e49444f7574536c696d",
        "92a57265712d31a57265712d32",
        "9291cd01c292cd062802",
        "92a0a473746f70",
        "920305",
        "920107",
        "920000",
        "9291cbbfd000000000000090",
        "9291cd01c290",
        "00",
        "030178cd03e8",
    );

    #[test]
    fn decodes_the_reference_batch() {
        let bytes = hex(REFERENCE_BATCH);
        assert_eq!(bytes.len(), 85);
        let b = decode_batch(&bytes).unwrap();
        assert_eq!(b.engine_index, 0);
        assert_eq!(b.load, Some(LoadSnapshot { running: 3, waiting: 1, kv_active_pages: 120, kv_total_pages: 1000 }));
        assert!((b.load.unwrap().kv_cache_usage() - 0.12).abs() < 1e-12);
        let (id, ev) = &b.outputs[0];
        assert_eq!(*id, "req-1");
        assert_eq!(ev.token_ids, [450]);
        assert_eq!(ev.finish, None);
        let row = &ev.logprobs.as_ref().unwrap().rows[0];
        assert_eq!((row.token_id, row.logprob, row.top.len()), (450, -0.25, 0));
        let (id, ev) = &b.outputs[1];
        assert_eq!(*id, "req-2");
        assert_eq!(ev.token_ids, [1576, 2], "the stop token stays, as vLLM delivers it");
        assert_eq!(ev.finish, Some(FinishReason::Stop));
        assert_eq!(ev.stop_reason, None);
        assert_eq!(ev.logprobs, None);
        assert_eq!(ev.cached_tokens, Some(0));
    }

    fn batch(elements: usize, tail: &[u64]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out);
        w.array(elements);
        w.str(BATCH_TAG);
        w.array(1);
        w.str("r");
        w.array(1);
        w.array(1);
        w.uint(7);
        w.array(1);
        w.str("length");
        for v in [4u64, 1, 2] {
            w.array(1);
            w.uint(v);
        }
        w.array(1);
        w.array(0);
        w.array(1);
        w.array(0);
        for &v in tail {
            w.uint(v);
        }
        out
    }

    #[test]
    fn older_and_newer_layouts_decode() {
        let b9 = batch(9, &[]);
        let b = decode_batch(&b9).unwrap();
        assert_eq!((b.engine_index, b.load), (0, None));
        assert_eq!(b.outputs[0].1.finish, Some(FinishReason::Length));
        assert_eq!(b.outputs[0].1.cached_tokens, Some(2));
        assert_eq!(decode_batch(&batch(10, &[5])).unwrap().engine_index, 5);
        let no_snapshot = batch(14, &[1, 9, 9, 9, 0]);
        assert_eq!(decode_batch(&no_snapshot).unwrap().load, None, "kv_total_pages 0 means no snapshot");
        let mut newer = batch(16, &[1, 2, 3, 4, 5]);
        newer.extend_from_slice(&[0xc0, 0x91, 0x01]);
        let b = decode_batch(&newer).unwrap();
        assert_eq!(b.load, Some(LoadSnapshot { running: 2, waiting: 3, kv_active_pages: 4, kv_total_pages: 5 }));
    }

    #[test]
    fn unknown_finish_reasons_stop_and_error_is_error() {
        assert_eq!(finish_reason("timeout"), Some(FinishReason::Stop));
        assert_eq!(finish_reason("error"), Some(FinishReason::Error));
        assert_eq!(finish_reason("abort"), Some(FinishReason::Abort));
        assert_eq!(finish_reason(""), None);
    }

    #[test]
    fn malformed_batches_are_errors() {
        let mut ragged = hex(REFERENCE_BATCH);
        // finished_reasons with one entry for two ids.
        let at = ragged.windows(2).position(|w| w == [0x92, 0xa0]).unwrap();
        ragged[at] = 0x91;
        let mut sglang = batch(14, &[0, 0, 0, 0, 0]);
        sglang[2..21].copy_from_slice(b"BatchTokenIDSlimOut");
        let cases: Vec<Vec<u8>> = vec![
            b"ENGINE_CORE_DEAD".to_vec(),
            vec![],
            vec![0x90],
            batch(8, &[]),
            ragged,
            sglang,
            [batch(14, &[0, 0, 0, 0, 0]), vec![0xc0]].concat(),
            batch(14, &[0, 1 << 40, 0, 0, 1]),
        ];
        for c in cases {
            assert!(decode_batch(&c).is_err(), "{c:02x?}");
        }
    }
}
