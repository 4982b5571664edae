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

/// Qwen-VL video sampling (vLLM's `qwen2_vl` and `qwen3_vl` loaders alike): the fewest frames taken, the most, and
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

/// Video: encoded bytes of one video.
pub const video_bytes_max: usize = 64 << 20;

/// Video: pixels of one frame, from the stream's parameter sets before any frame is decoded
/// (vLLM's `VLLM_MAX_IMAGE_PIXELS` bounds frames only at 178,956,970).
pub const video_frame_pixels_max: u64 = image_pixels_max;

/// Video: coded frames in the file (ten minutes at 30 fps), read from the sample table before
/// it is; every frame up to the last sampled one is decoded.
pub const video_frames_max: usize = 18_000;

/// Video: length in seconds (frames over the frame rate).
pub const video_duration_s_max: u64 = 600;

/// Video: the sampled frames as RGB together, checked before decoding (768 frames of 1080p
/// would take 4.7 GB).
pub const video_frame_bytes_max: usize = 1 << 30;

/// Video: wall-clock time of decoding one video on a media pool thread.
pub const video_decode_time_max_ms: u64 = 30_000;

const _: () = assert!(video_frame_pixels_max * 3 <= video_frame_bytes_max as u64);
