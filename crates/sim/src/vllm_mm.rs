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
                "data" if r.peek_kind()? != Kind::Nil => s.tensor_bytes += decode_item(r, aux)?,
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

/// One item: `{key: {"data": tensor, "field": [kind, kwargs]}}`; returns its tensor bytes.
fn decode_item(r: &mut Reader<'_>, aux: &[Vec<u8>]) -> DecodeResult<usize> {
    let mut bytes = 0;
    for _ in 0..r.map_len()? {
        let key = r.str()?.to_string();
        for _ in 0..r.map_len()? {
            match r.str()? {
                "data" => bytes += decode_tensor(r, aux).map_err(|e| DecodeError(format!("{key}: {}", e.0)))?,
                _ => r.skip()?,
            }
        }
    }
    Ok(bytes)
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

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use shardgate_wire::mm::{Feature, Field, Layout, Modality, Tensor};
    use shardgate_wire::vllm::request::encode_add;
    use shardgate_wire::{EngineRequest, SamplingParams};

    use crate::vllm_wire::decode_add;

    /// A request with one image of 16 patch rows (4 placeholders at offset 1) as the gateway
    /// encodes it: the main frame and its aux frames.
    fn encoded(offset: u32, prompt: Vec<u32>) -> (Vec<u8>, Vec<Vec<u8>>) {
        let pixels = Field {
            key: "pixel_values",
            data: Tensor::f32(vec![16, 1176], &vec![0.5; 16 * 1176]),
            layout: Layout::Flat { slices: vec![(0, 16)], dim: 0 },
            keep_on_cpu: false,
        };
        let grid = Field {
            key: "image_grid_thw",
            data: Tensor::i64(vec![3], &[1, 4, 4]),
            layout: Layout::Batched,
            keep_on_cpu: true,
        };
        let image = Feature {
            modality: Modality::Image,
            fields: Some(vec![pixels, grid].into()),
            hash: "h".into(),
            offset,
            length: 4,
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
