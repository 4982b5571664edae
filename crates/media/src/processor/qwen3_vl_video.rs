//! Qwen3-VL's video processor (`Qwen3VLVideoProcessor`) and the frames vLLM's `qwen3_vl` video
//! loader hands it. The loader samples `int(total / source_fps * min(fps, 30))` frames, clamped
//! to at least 4 and at most 768 and the video's length, evenly spaced from the first frame to
//! the last (`np.linspace(...).round()`, ties to even), with no rounding to the temporal patch.
//! The processor is Qwen2-VL's per frame (`QwenVl`'s resize, normalisation, padding to the
//! temporal patch and patch layout) except for its size: its `smart_resize` bounds the whole
//! clip, `frames * height * width`, and scales frames smaller than one patch block up first.
//! Each frame group is announced in the prompt by its time (`timestamps`).

use super::qwen2_vl::QwenVl;
use super::Processed;
use crate::decode::RgbImage;
use crate::error::MediaError;
use crate::limits;

/// Qwen3-VL's video processor: `frames` holds the patch sizes, the normalisation and the pixel
/// bounds, which here bound `frames * height * width` (the config's `size`).
#[derive(Debug, Clone, PartialEq)]
pub struct Qwen3VlVideo {
    pub frames: QwenVl,
}

fn refuse(width: u32, height: u32, detail: String) -> MediaError {
    MediaError::Unprocessable { width, height, detail }
}

/// The frame indices vLLM's `qwen3_vl` loader decodes from a video of `total` frames at
/// `source_fps`, sampled at `fps` (its default is 2).
pub fn qwen3_vl_frame_indices(total: usize, source_fps: f64, fps: f64) -> Result<Vec<usize>, MediaError> {
    // vLLM reads an unknown rate as 0 and then divides the frame indices by it for the
    // timestamps: refused here with a reason instead.
    if source_fps.is_nan() || source_fps <= 0.0 {
        return Err(refuse(0, 0, "Qwen3-VL video timestamps need a known source fps".into()));
    }
    if total == 0 {
        return Err(refuse(0, 0, "a video needs a frame".into()));
    }
    let wanted = (total as f64 / source_fps * fps.min(limits::qwen_video_fps_max)) as usize;
    let n = wanted.clamp(limits::qwen_video_frames_min, limits::qwen_video_frames_max).min(total);
    if n == 1 {
        return Ok(vec![0]);
    }
    // numpy's linspace: `i * step`, its last value the end itself.
    let step = (total - 1) as f64 / (n - 1) as f64;
    let mut indices: Vec<usize> = (0..n).map(|i| (i as f64 * step).round_ties_even() as usize).collect();
    indices[n - 1] = total - 1;
    Ok(indices)
}

/// Each frame group's time in seconds, as the prompt announces it: the mean of its first and
/// last frame's (the last frame repeated up to the temporal patch, as the processor pads).
pub fn qwen3_vl_timestamps(indices: &[usize], source_fps: f64, temporal_patch_size: u32) -> Vec<f64> {
    let t = temporal_patch_size.max(1) as usize;
    let Some(&last) = indices.last() else { return Vec::new() };
    let mut padded = indices.to_vec();
    padded.resize(indices.len().div_ceil(t) * t, last);
    padded
        .chunks_exact(t)
        .map(|group| (group[0] as f64 / source_fps + group[t - 1] as f64 / source_fps) / 2.0)
        .collect()
}

/// The prompt text announcing a frame group at `seconds` (Python's `f"<{seconds:.1f} seconds>"`:
/// both round the exact binary value, ties to even).
pub fn qwen3_vl_timestamp_text(seconds: f64) -> String {
    format!("<{seconds:.1} seconds>")
}

impl Qwen3VlVideo {
    /// `(height, width)` of every frame of a clip of `num_frames` frames of this size (the
    /// video processor's `smart_resize`, Python's `round` and float arithmetic as there).
    pub fn target_size(&self, num_frames: usize, height: u32, width: u32) -> Result<(u32, u32), MediaError> {
        let p = &self.frames;
        if p.resize.is_none() {
            return Ok((height, width));
        }
        let t = p.temporal_patch_size as usize;
        if num_frames < t {
            return Err(refuse(
                width,
                height,
                format!("a clip of {num_frames} frames is shorter than the {t} of one temporal patch"),
            ));
        }
        let f = (p.patch_size * p.merge_size) as f64;
        let (mut h, mut w) = (height as f64, width as f64);
        if h < f || w < f {
            let scale = (f / h).max(f / w);
            (h, w) = ((h * scale).trunc(), (w * scale).trunc());
        }
        if h.max(w) / h.min(w) > limits::qwen_aspect_ratio_max as f64 {
            return Err(MediaError::AspectRatio { width, height, max: limits::qwen_aspect_ratio_max });
        }
        let mut h_bar = (h / f).round_ties_even() * f;
        let mut w_bar = (w / f).round_ties_even() * f;
        let t_bar = (num_frames as f64 / t as f64).round_ties_even() * t as f64;
        let volume = num_frames as f64 * h * w;
        if t_bar * h_bar * w_bar > p.max_pixels as f64 {
            let beta = (volume / p.max_pixels as f64).sqrt();
            h_bar = f.max((h / beta / f).floor() * f);
            w_bar = f.max((w / beta / f).floor() * f);
        } else if t_bar * h_bar * w_bar < p.min_pixels as f64 {
            let beta = (p.min_pixels as f64 / volume).sqrt();
            h_bar = (h * beta / f).ceil() * f;
            w_bar = (w * beta / f).ceil() * f;
        }
        Ok((h_bar as u32, w_bar as u32))
    }

    /// A video's frames (all of one size), resized together to `target_size`, then as
    /// `QwenVl::process_video`; `grid_t` frame groups of `grid_h * grid_w / merge_size²` tokens.
    pub fn process_video(&self, frames: &[RgbImage]) -> Result<Processed, MediaError> {
        self.frames.process_frames(frames, |first| self.target_size(frames.len(), first.height, first.width))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_pad_the_last_group() {
        // (indices, source fps) -> vLLM's `_calculate_timestamps` with merge size 2
        let cases: [(&[usize], f64, &[f64]); 3] =
            [(&[0, 5, 10, 14, 19], 10.0, &[0.25, 1.2, 1.9]), (&[0, 1, 2, 3], 2.0, &[0.25, 1.25]), (&[], 30.0, &[])];
        for (indices, fps, expected) in cases {
            assert_eq!(qwen3_vl_timestamps(indices, fps, 2), expected, "{indices:?}");
        }
        let texts: Vec<String> = [0.25, 1.25, 0.05, 10.0].into_iter().map(qwen3_vl_timestamp_text).collect();
        assert_eq!(texts, ["<0.2 seconds>", "<1.2 seconds>", "<0.1 seconds>", "<10.0 seconds>"]);
    }

    #[test]
    fn refusals() {
        for (total, source_fps) in [(100, 0.0), (100, f64::NAN), (0, 30.0)] {
            assert!(qwen3_vl_frame_indices(total, source_fps, 2.0).is_err(), "{total} at {source_fps}");
        }
    }
}
