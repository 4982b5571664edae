//! vLLM's multimodal item hash (`MultiModalHasher.hash_kwargs(model_id=..., image=item)` with
//! its default blake3), which keys the engine's encoder cache: a request whose hash the engine
//! has seen may leave the tensors out, and the engine answers a miss it can no longer serve
//! (`mm_cache_miss_hashes`). The digest's input is vLLM's framing: each chunk preceded by its
//! length (u64 little-endian), each value by a tag, keys in sorted order (`image` before
//! `model_id`). A loaded image is hashed by its encoded bytes, with the conversion settings
//! when the loader changed its mode (`Decoded::converted`).

const TAG_SEQUENCE: u8 = 1;
const TAG_MAPPING: u8 = 2;
const TAG_LEAF: u8 = 3;

/// The loader's settings as vLLM records them (`io_config`): RGB, on white.
const IMAGE_MODE: &str = "RGB";
const BACKGROUND: [i64; 3] = [255, 255, 255];

struct Digest(blake3::Hasher);

impl Digest {
    fn framed(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.update(&(bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
        self
    }

    fn tag(&mut self, tag: u8, len: Option<usize>) -> &mut Self {
        self.0.update(&[tag]);
        if let Some(len) = len {
            self.0.update(&(len as u64).to_le_bytes());
        }
        self
    }

    fn leaf(&mut self, bytes: &[u8]) -> &mut Self {
        self.tag(TAG_LEAF, None).framed(bytes)
    }
}

/// The hash vLLM computes for one image loaded from `encoded` for the model `model_id` (the
/// engine's `--model` value), as lowercase hex.
pub fn image_hash(model_id: &str, encoded: &[u8], converted: bool) -> String {
    let mut d = Digest(blake3::Hasher::new());
    // `image=MediaWithBytes`: a leaf that serialises as the item `image` -> its payload.
    d.framed(b"image").tag(TAG_LEAF, None).framed(b"image");
    if converted {
        d.tag(TAG_MAPPING, Some(2)).framed(b"io_config").tag(TAG_MAPPING, Some(2));
        d.framed(b"image_mode").leaf(IMAGE_MODE.as_bytes());
        d.framed(b"rgba_background_color").tag(TAG_SEQUENCE, Some(BACKGROUND.len()));
        for channel in BACKGROUND {
            // Python ints serialise as `np.array(v).tobytes()`: int64.
            d.leaf(&channel.to_le_bytes());
        }
        d.framed(b"data").leaf(encoded);
    } else {
        d.leaf(encoded);
    }
    d.framed(b"model_id").leaf(model_id.as_bytes());
    d.0.finalize().to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_vllm() {
        // MultiModalHasher.hash_kwargs("blake3", model_id=m, image=MediaWithBytes(img, b, io))
        // in vLLM 0.32, io_config None when not converted, else RGB on white.
        let cases = [
            (
                "Qwen/Qwen2-VL-2B-Instruct",
                &b"not really an image"[..],
                false,
                "08da84bcc777cb1549c56098a44d96618e9fa08d0d2c3705294a5ac340257320",
            ),
            (
                "Qwen/Qwen2-VL-2B-Instruct",
                &b"not really an image"[..],
                true,
                "56943c5d2d028ce030fe348f6b175549f5221eba35027d68e296fbcbc36c78d7",
            ),
            ("/models/llava", &b""[..], false, "39a18d1e186ba8fbc0ab3d057dac66be705a87c663855783d1335f4630ec57c1"),
        ];
        for (model, bytes, converted, expected) in cases {
            assert_eq!(image_hash(model, bytes, converted), expected, "{model} {converted}");
        }
    }
}
