#![allow(non_upper_case_globals)]

//! Every bound and default of image decoding and the image processors, in one place.
//!
//! Names carry their unit last (`_bytes`, `_px`) and their qualifier after it (`_max`), so
//! related limits line up. Nothing else in the crate hard-codes a limit; `DecodeLimits::default()`
//! is made of these.

/// Decoding: encoded bytes of one image (OpenAI's own limit for an image input is 20 MB).
pub const image_bytes_max: usize = 20 << 20;

/// Decoding: pixels of one image, read from its header before any pixel is decoded
/// (decompression bombs). 32 Mi pixels holds a 24-megapixel photo and costs 96 MiB as RGB.
pub const image_pixels_max: u64 = 32 << 20;

/// Decoding: either side of one image. WebP's own format stops at 16383.
pub const image_side_px_max: u32 = 16384;

/// Decoding: bytes a codec may allocate beyond the output image (PNG's text and ICC chunks,
/// GIF's LZW tables), so metadata cannot cost more than the pixels it describes.
pub const codec_scratch_bytes_max: usize = 8 << 20;

/// Decoding: bytes libjpeg may allocate per output pixel beyond `codec_scratch_bytes_max`. A
/// progressive or multi-scan JPEG keeps every DCT coefficient until its last scan: two bytes
/// per sample, four components at most.
pub const jpeg_codec_bytes_per_px_max: u64 = 8;

/// Decoding: scans of one JPEG. Each progressive scan is a pass over the whole image, so a
/// small file of many tiny scans costs scans x pixels; encoders write about ten. (PIL sets no
/// such bound.)
pub const jpeg_scans_max: i32 = 1000;

/// Qwen2-VL's `smart_resize`: the largest ratio of the long side to the short one it takes
/// (the Hugging Face processor raises an error above it).
pub const qwen_aspect_ratio_max: u32 = 200;

/// Qwen2-VL video sampling (vLLM's `qwen2_vl` loader): the fewest frames taken, the most, and
/// the highest sampling rate in frames per second it honours.
pub const qwen_video_frames_min: usize = 4;
pub const qwen_video_frames_max: usize = 768;
pub const qwen_video_fps_max: f64 = 30.0;

/// Processor configs: the largest patch or merge size taken from a `preprocessor_config.json`
/// (real models use 14 or 16, and 2); a bigger one is a broken config, not a model.
pub const config_patch_px_max: u32 = 1024;

/// Processor configs: the largest target side (`shortest_edge`, `crop_size`) taken from a
/// `preprocessor_config.json`.
pub const config_side_px_max: u32 = 8192;

const _: () = assert!(image_side_px_max as u64 * image_side_px_max as u64 >= image_pixels_max);
const _: () = assert!(image_pixels_max * 4 <= isize::MAX as u64);
const _: () = assert!(config_side_px_max <= image_side_px_max);
