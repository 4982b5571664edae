//! The engine's side of `mm_features`: a generic walk of the `MultiModalFeatureSpec`s an ADD
//! carries (independent of the gateway's encoder), with the checks vLLM's decoder and input
//! processing make: every tensor's bytes (inline ext 3 or an aux frame) match its dtype and
//! shape, and every placeholder range lies in the prompt with its embedding positions (all of
//! it, or those its `is_embed` mask marks) on one repeated token.

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
    /// Each range's `is_embed` mask, where it has one.
    pub is_embed: Vec<Option<Vec<bool>>>,
    /// Embedding positions of all items (`placeholder_tokens` less what masks leave out).
    pub embed_tokens: usize,
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
                "mm_position" => {
                    let (range, mask) = decode_range(r, aux)?;
                    s.ranges.push(range);
                    s.is_embed.push(mask);
                }
                _ => r.skip()?,
            }
        }
        s.items += 1;
    }
    s.placeholder_tokens = s.ranges.iter().map(|&(_, len)| len).sum();
    s.embed_tokens = s
        .ranges
        .iter()
        .zip(&s.is_embed)
        .map(|(&(_, len), mask)| mask.as_ref().map_or(len, |m| m.iter().filter(|&&b| b).count()))
        .sum();
    Ok(Some(s))
}

/// Checks the ranges against the prompt as vLLM's input processing does before scheduling.
pub fn check_ranges(s: &MmSummary, prompt: &[u32]) -> Result<(), DecodeError> {
    for (&(offset, len), mask) in s.ranges.iter().zip(&s.is_embed) {
        let Some(span) = prompt.get(offset..offset + len) else {
            return Err(DecodeError(format!("placeholder range {offset}+{len} beyond a prompt of {}", prompt.len())));
        };
        if mask.as_ref().is_some_and(|m| m.len() != len) {
            return Err(DecodeError(format!(
                "placeholder range {offset}+{len} has an is_embed mask of another length"
            )));
        }
        let mut embeds = span.iter().enumerate().filter(|(i, _)| mask.as_ref().is_none_or(|m| m[*i])).map(|(_, t)| t);
        let first = embeds.next();
        if first.is_none() || embeds.any(|t| Some(t) != first) {
            return Err(DecodeError(format!(
                "placeholder range {offset}+{len}: its embedding positions are not one repeated token"
            )));
        }
    }
    Ok(())
}

type Range = ((usize, usize), Option<Vec<bool>>);

fn decode_range(r: &mut Reader<'_>, aux: &[Vec<u8>]) -> DecodeResult<Range> {
    let (mut offset, mut length, mut mask) = (None, None, None);
    for _ in 0..r.map_len()? {
        match r.str()? {
            "offset" => offset = Some(r.u64()? as usize),
            "length" => length = Some(r.u64()? as usize),
            "is_embed" if r.peek_kind()? != Kind::Nil => mask = Some(decode_mask(r, aux)?),
            _ => r.skip()?,
        }
    }
    let range = offset.zip(length).ok_or_else(|| DecodeError("PlaceholderRange without offset or length".into()))?;
    Ok((range, mask))
}

/// An `is_embed` mask: a `bool` tensor, inline or in an aux frame.
fn decode_mask(r: &mut Reader<'_>, aux: &[Vec<u8>]) -> DecodeResult<Vec<bool>> {
    let mask = tensor(r, aux, |dtype, data| (dtype == "bool").then(|| data.iter().map(|&b| b != 0).collect()))?;
    mask.ok_or_else(|| DecodeError("is_embed is not a bool tensor".into()))
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
                "data" => bytes += decode_value(r, aux).map_err(|e| DecodeError(format!("{key}: {}", e.0)))?,
                _ => r.skip()?,
            }
        }
    }
    Ok((bytes, keys))
}

/// A field's data: a tensor (its byte count) or a list of numbers (Qwen3-VL's `timestamps`:
/// no tensor bytes).
fn decode_value(r: &mut Reader<'_>, aux: &[Vec<u8>]) -> DecodeResult<usize> {
    let n = r.array_len()?;
    if n == 3 && r.peek_kind()? == Kind::Str {
        return tensor_body(r, aux, |_, data| data.len());
    }
    for _ in 0..n {
        match r.peek_kind()? {
            Kind::Float | Kind::Int => r.skip()?,
            other => return Err(DecodeError(format!("a list of {other:?}, not of numbers"))),
        }
    }
    Ok(0)
}

/// `[dtype, shape, data]`, its data (inline or in an aux frame) checked against the shape and
/// handed to `take` with the dtype.
fn tensor<T>(r: &mut Reader<'_>, aux: &[Vec<u8>], take: impl FnOnce(&str, &[u8]) -> T) -> DecodeResult<T> {
    if r.array_len()? != 3 {
        return Err(DecodeError("a tensor is [dtype, shape, data]".into()));
    }
    tensor_body(r, aux, take)
}

fn tensor_body<T>(r: &mut Reader<'_>, aux: &[Vec<u8>], take: impl FnOnce(&str, &[u8]) -> T) -> DecodeResult<T> {
    let dtype = r.str()?;
    let width = match dtype {
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
    let checked = |data: &[u8]| match data.len() == elements.saturating_mul(width) {
        true => Ok(take(dtype, data)),
        false => Err(DecodeError(format!("{} bytes for {elements} elements of {width}", data.len()))),
    };
    match r.peek_kind()? {
        Kind::Int => {
            let i = r.u64()? as usize;
            checked(aux.get(i.wrapping_sub(1)).ok_or_else(|| DecodeError(format!("aux frame {i} missing")))?)
        }
        _ => {
            let (code, data) = r.ext()?;
            if code != 3 {
                return Err(DecodeError(format!("tensor data as ext type {code}")));
            }
            checked(data)
        }
    }
}
