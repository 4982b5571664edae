//! The engine's side of `mm_features`: a generic walk of the `MultiModalFeatureSpec`s an ADD
//! carries (independent of the gateway's encoder), with the checks vLLM's decoder and input
//! processing make: every tensor's bytes (inline ext 3 or an aux frame) match its dtype and
//! shape, and every placeholder range lies in the prompt on one repeated token.

use shardgate_wire::msgpack::{DecodeError, DecodeResult, Kind, Reader};

/// What the simulator reports of a request's multimodal items.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MmSummary {
    pub items: usize,
    /// Placeholder tokens of all items (the sum of the ranges' lengths).
    pub placeholder_tokens: usize,
    /// Tensor bytes of all items, inline and out of band.
    pub tensor_bytes: usize,
    pub hashes: Vec<String>,
    /// `(offset, length)` per item, in order.
    pub ranges: Vec<(usize, usize)>,
    /// Each item's modality and its tensors' keys (`video`: `pixel_values_videos`, ...).
    pub modalities: Vec<String>,
    pub keys: Vec<Vec<String>>,
}

/// Decodes the `mm_features` element (`r` at it); `aux` are the message's frames after the
/// main one (aux index 1 is `aux[0]`).
pub fn decode_features(r: &mut Reader<'_>, aux: &[Vec<u8>]) -> DecodeResult<Option<MmSummary>> {
    if r.try_nil()? {
        return Ok(None);
    }
    let n = r.array_len()?;
    let mut s = MmSummary::default();
    for _ in 0..n {
        let fields = r.map_len()?;
        for _ in 0..fields {
            match r.str()? {
                "data" if r.peek_kind()? != Kind::Nil => {
                    let (bytes, keys) = decode_item(r, aux)?;
                    s.tensor_bytes += bytes;
                    s.keys.push(keys);
                }
                "modality" => s.modalities.push(r.str()?.to_string()),
                "identifier" => s.hashes.push(r.str()?.to_string()),
                "mm_position" => s.ranges.push(decode_range(r)?),
                _ => r.skip()?,
            }
        }
        s.items += 1;
    }
    s.placeholder_tokens = s.ranges.iter().map(|&(_, len)| len).sum();
    Ok(Some(s))
}

/// Checks the ranges against the prompt as vLLM's input processing does before scheduling.
pub fn check_ranges(s: &MmSummary, prompt: &[u32]) -> Result<(), DecodeError> {
    for &(offset, len) in &s.ranges {
        let Some(span) = prompt.get(offset..offset + len) else {
            return Err(DecodeError(format!("placeholder range {offset}+{len} beyond a prompt of {}", prompt.len())));
        };
        if len == 0 || span.iter().any(|&t| t != span[0]) {
            return Err(DecodeError(format!("placeholder range {offset}+{len} is not one repeated token")));
        }
    }
    Ok(())
}

fn decode_range(r: &mut Reader<'_>) -> DecodeResult<(usize, usize)> {
    let (mut offset, mut length) = (None, None);
    for _ in 0..r.map_len()? {
        match r.str()? {
            "offset" => offset = Some(r.u64()? as usize),
            "length" => length = Some(r.u64()? as usize),
            _ => r.skip()?,
        }
    }
    offset.zip(length).ok_or_else(|| DecodeError("PlaceholderRange without offset or length".into()))
}

/// One item: `{key: {"data": tensor, "field": [kind, kwargs]}}`; returns its tensor bytes and
/// keys.
fn decode_item(r: &mut Reader<'_>, aux: &[Vec<u8>]) -> DecodeResult<(usize, Vec<String>)> {
    let mut bytes = 0;
    let mut keys = Vec::new();
    for _ in 0..r.map_len()? {
        let key = r.str()?.to_string();
        keys.push(key.clone());
        for _ in 0..r.map_len()? {
            match r.str()? {
                "data" => bytes += decode_tensor(r, aux).map_err(|e| DecodeError(format!("{key}: {}", e.0)))?,
                _ => r.skip()?,
            }
        }
    }
    Ok((bytes, keys))
}

fn decode_tensor(r: &mut Reader<'_>, aux: &[Vec<u8>]) -> DecodeResult<usize> {
    if r.array_len()? != 3 {
        return Err(DecodeError("a tensor is [dtype, shape, data]".into()));
    }
    let width = match r.str()? {
        "float32" | "int32" => 4,
        "int64" | "float64" => 8,
        "float16" | "bfloat16" => 2,
        "uint8" | "bool" => 1,
        other => return Err(DecodeError(format!("unknown dtype {other}"))),
    };
    let mut elements = 1usize;
    for _ in 0..r.array_len()? {
        elements = elements.saturating_mul(r.u64()? as usize);
    }
    let data_len = match r.peek_kind()? {
        Kind::Int => {
            let i = r.u64()? as usize;
            aux.get(i.wrapping_sub(1)).map(Vec::len).ok_or_else(|| DecodeError(format!("aux frame {i} missing")))?
        }
        _ => {
            let (code, data) = r.ext()?;
            if code != 3 {
                return Err(DecodeError(format!("tensor data as ext type {code}")));
            }
            data.len()
        }
    };
    if data_len != elements.saturating_mul(width) {
        return Err(DecodeError(format!("{data_len} bytes for {elements} elements of {width}")));
    }
    Ok(data_len)
}
