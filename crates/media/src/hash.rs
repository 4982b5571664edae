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

/// What vLLM's default loader records of a video beside its frames (its metadata dict, in
/// the order it builds it), part of the video's hash.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoSource<'a> {
    pub total_frames: usize,
    pub fps: f64,
    /// The decoded frames' indices.
    pub indices: &'a [usize],
    /// `(frames, height, width)` of the decoded RGB frames.
    pub shape: [usize; 3],
}

/// The hash vLLM computes for one video loaded from `encoded` by its OpenCV loader
/// (`video=(MediaWithBytes(frames, encoded), metadata)`): the encoded bytes stand for the
/// frames unless the frames are the smaller (then the frames array is hashed, `frames`).
pub fn video_hash(
    model_id: &str,
    encoded: &[u8],
    source: &VideoSource<'_>,
    frames: impl FnOnce() -> Vec<u8>,
) -> String {
    let mut d = Digest(blake3::Hasher::new());
    d.framed(b"model_id").leaf(model_id.as_bytes());
    d.framed(b"video").tag(TAG_SEQUENCE, Some(2));
    let [n, h, w] = source.shape;
    let frame_bytes = n * h * w * 3;
    d.tag(TAG_LEAF, None).framed(b"video");
    if frame_bytes < encoded.len() {
        d.tag(TAG_LEAF, None).framed(b"ndarray").tag(TAG_MAPPING, Some(3));
        d.framed(b"dtype").leaf(b"|u1");
        d.framed(b"shape").tag(TAG_SEQUENCE, Some(4));
        for dim in [n, h, w, 3] {
            d.leaf(&(dim as i64).to_le_bytes());
        }
        d.framed(b"data").leaf(&frames());
    } else {
        d.leaf(encoded);
    }
    let duration = source.total_frames as f64 / source.fps;
    d.tag(TAG_MAPPING, Some(6));
    d.framed(b"total_num_frames").leaf(&(source.total_frames as i64).to_le_bytes());
    d.framed(b"fps").leaf(&source.fps.to_le_bytes());
    d.framed(b"duration").leaf(&duration.to_le_bytes());
    d.framed(b"video_backend").leaf(b"opencv");
    d.framed(b"frames_indices").tag(TAG_SEQUENCE, Some(source.indices.len()));
    for &i in source.indices {
        d.leaf(&(i as i64).to_le_bytes());
    }
    // A Python bool hashes as a one-byte numpy bool.
    d.framed(b"do_sample_frames").leaf(&[u8::from(source.indices.len() == source.total_frames)]);
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

    #[test]
    fn videos_match_vllm() {
        // MultiModalHasher.hash_kwargs("blake3", model_id=m, video=(MediaWithBytes(frames,
        // data), metadata)) in vLLM 0.32, frames (2, 4, 6, 3) of `i % 251`: hashed as the bytes
        // (18 and 1 of them) or, where smaller, as the array (512 bytes).
        let frames = || (0..144u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>();
        let big: Vec<u8> = (0..512u32).map(|i| (i % 256) as u8).collect();
        // (model, encoded bytes, total frames, fps, indices, vLLM's hash)
        type Case<'a> = (&'a str, &'a [u8], usize, f64, &'a [usize], &'a str);
        let cases: [Case<'_>; 3] = [
            (
                "Qwen/Qwen2-VL-2B-Instruct",
                b"not really a video",
                20,
                10.0,
                &[0, 10],
                "fdb380e693f5efd1a69fa848fa7747439d74027d750bc31f29b1b91901f35734",
            ),
            ("/m", &big, 20, 10.0, &[0, 10], "e7805d186c430bbd76f3d3dac1f5bea58635eda608471990c1d0db4e34edf3c6"),
            ("/m", b"x", 2, 2.5, &[0, 1], "05391a46291ec56e1c63f1ea503d16876da68232294a2dc7c56f8746bf05ff72"),
        ];
        for (model, bytes, total_frames, fps, indices, expected) in cases {
            let source = VideoSource { total_frames, fps, indices, shape: [2, 4, 6] };
            assert_eq!(video_hash(model, bytes, &source, frames), expected, "{model} {}", bytes.len());
        }
    }
}
