//! `shardgate_media::decode_video` on malformed MP4 / H.264 bytes (seeded with real files made
//! by the OpenH264 encoder), sampled as Qwen2-VL's loader samples.
//!
//! Oracles:
//! - No panic (in our demuxer and SPS reader, or OpenH264 behind them), and memory bounded:
//!   the limits here allow 64 Ki-pixel frames, 300 frames and 16 MiB of sampled frames, and
//!   tools/fuzz.sh runs this target with `-malloc_limit_mb`, so an allocation sized by a box
//!   or SPS the limits should have refused is a crash.
//! - Decoded frames are as many as their indices, ascending within the file, each of the one
//!   frame size, its pixels exactly what the size says, within the pixel limit.
//! - Every refusal reads as a sentence.

use shardgate_media::processor::qwen2_vl_frame_indices;
use shardgate_media::{decode_video, VideoLimits};

const LIMITS: VideoLimits = VideoLimits {
    bytes_max: 1 << 20,
    frame_pixels_max: 1 << 16,
    frames_max: 300,
    duration_s_max: 600,
    frame_bytes_max: 16 << 20,
    time_max_ms: 10_000,
};

/// One input: panics (an oracle failed) or returns.
pub fn run(bytes: &[u8]) {
    let result = decode_video(bytes, &LIMITS, |total, fps| qwen2_vl_frame_indices(total, fps, 2.0, 2));
    match result {
        Ok(video) => {
            assert_eq!(video.frames.len(), video.indices.len());
            assert!(video.indices.windows(2).all(|w| w[0] < w[1]), "{:?}", video.indices);
            assert!(video.indices.last().is_some_and(|&i| i < video.total_frames));
            let first = &video.frames[0];
            assert!(first.width as u64 * first.height as u64 <= LIMITS.frame_pixels_max);
            for frame in &video.frames {
                assert_eq!((frame.width, frame.height), (first.width, first.height));
                assert_eq!(frame.pixels.len(), frame.width as usize * frame.height as usize * 3);
            }
        }
        Err(error) => assert!(error.to_string().len() > 10, "{error:?}"),
    }
}
