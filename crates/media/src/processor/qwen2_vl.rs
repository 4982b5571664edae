//! Qwen2-VL's image processor (also Qwen2.5-VL's and Qwen3-VL's, with their configs' patch
//! size, pixel bounds, mean and std): `smart_resize` to a multiple of `patch_size *
//! merge_size`, bicubic resize in the arithmetic of the chosen backend (torchvision's or
//! PIL's), rescale and normalise, the frame
//! repeated `temporal_patch_size` times, then cut into patches laid out as the vision tower
//! reads them: rows `(grid_t * grid_h * grid_w)`, each `C * T * P * P` long, merge blocks
//! contiguous. A video (`Qwen2VLVideoProcessor`) is the same per frame, its frames taken
//! `temporal_patch_size` at a time instead of one image repeated.

use super::normalize::Normalize;
use super::Processed;
use crate::decode::RgbImage;
use crate::error::MediaError;
use crate::limits;
use crate::resize::{resize, Backend, Filter};

#[derive(Debug, Clone, PartialEq)]
pub struct QwenVl {
    pub patch_size: u32,
    pub temporal_patch_size: u32,
    pub merge_size: u32,
    pub min_pixels: u64,
    pub max_pixels: u64,
    /// `None` when the config turns `do_resize` off (then the image's sides must already be
    /// multiples of `patch_size * merge_size`).
    pub resize: Option<Filter>,
    pub normalize: Normalize,
    pub backend: Backend,
}

/// `smart_resize(height, width, factor, min_pixels, max_pixels)`: the sides, multiples of
/// `factor`, closest to the image's whose product is within the bounds. Python's `round`
/// (half to even) and `float` arithmetic, as the reference.
pub fn smart_resize(
    height: u32,
    width: u32,
    factor: u32,
    min_pixels: u64,
    max_pixels: u64,
) -> Result<(u32, u32), MediaError> {
    let (h, w, f) = (height as f64, width as f64, factor as f64);
    let ratio = h.max(w) / h.min(w);
    if ratio > limits::qwen_aspect_ratio_max as f64 {
        return Err(MediaError::AspectRatio { width, height, max: limits::qwen_aspect_ratio_max });
    }
    let mut h_bar = (h / f).round_ties_even() * f;
    let mut w_bar = (w / f).round_ties_even() * f;
    if h_bar * w_bar > max_pixels as f64 {
        let beta = (h * w / max_pixels as f64).sqrt();
        h_bar = f.max((h / beta / f).floor() * f);
        w_bar = f.max((w / beta / f).floor() * f);
    } else if h_bar * w_bar < min_pixels as f64 {
        let beta = (min_pixels as f64 / (h * w)).sqrt();
        h_bar = (h * beta / f).ceil() * f;
        w_bar = (w * beta / f).ceil() * f;
    }
    Ok((h_bar as u32, w_bar as u32))
}

impl QwenVl {
    fn factor(&self) -> u32 {
        self.patch_size * self.merge_size
    }

    /// The `(height, width)` the image is resized to.
    pub fn target_size(&self, height: u32, width: u32) -> Result<(u32, u32), MediaError> {
        match self.resize {
            Some(_) => smart_resize(height, width, self.factor(), self.min_pixels, self.max_pixels),
            None => Ok((height, width)),
        }
    }

    /// `image_grid_thw` for an image of this size, without processing it.
    pub fn grid_thw(&self, height: u32, width: u32) -> Result<[u32; 3], MediaError> {
        let (h, w) = self.target_size(height, width)?;
        Ok([1, h / self.patch_size, w / self.patch_size])
    }

    /// The size `image` is resized to, refused unless whole patch blocks tile it.
    fn checked_target(&self, image: &RgbImage) -> Result<(u32, u32), MediaError> {
        self.checked(image, self.target_size(image.height, image.width)?)
    }

    /// `(height, width)`, refused (naming `image`) unless whole patch blocks tile it.
    pub(super) fn checked(&self, image: &RgbImage, (height, width): (u32, u32)) -> Result<(u32, u32), MediaError> {
        let factor = self.factor();
        if height == 0 || width == 0 || height % factor != 0 || width % factor != 0 {
            let detail = format!("its sides are not multiples of {factor} after resizing (to {width}x{height})");
            return Err(MediaError::Unprocessable { width: image.width, height: image.height, detail });
        }
        Ok((height, width))
    }

    /// One image or frame resized to `(height, width)`, rescaled and normalised: `(3, height,
    /// width)` planes.
    pub(super) fn planes(&self, image: &RgbImage, (height, width): (u32, u32)) -> Vec<f32> {
        match self.resize {
            Some(filter) => self.normalize.planes(&resize(image, width, height, filter, self.backend), self.backend),
            None => self.normalize.planes(image, self.backend),
        }
    }

    /// `frames` (each `(3, height, width)` planes, a multiple of `temporal_patch_size` of them)
    /// cut into patches: rows `(grid_t, grid_h, grid_w)` with merge blocks contiguous, each row
    /// `(3, temporal_patch_size, patch_size, patch_size)`.
    pub(super) fn patches(&self, frames: &[&[f32]], (height, width): (u32, u32)) -> Processed {
        let [p, t, m] = [self.patch_size, self.temporal_patch_size, self.merge_size].map(|v| v as usize);
        let (grid_t, grid_h, grid_w) = (frames.len() / t, height as usize / p, width as usize / p);
        let row_len = 3 * t * p * p;
        let mut pixel_values = Vec::with_capacity(grid_t * grid_h * grid_w * row_len);
        let plane = height as usize * width as usize;
        for group in frames.chunks_exact(t) {
            for block_y in 0..grid_h / m {
                for block_x in 0..grid_w / m {
                    for my in 0..m {
                        for mx in 0..m {
                            let (top, left) = ((block_y * m + my) * p, (block_x * m + mx) * p);
                            for c in 0..3 {
                                for frame in group {
                                    for y in top..top + p {
                                        let at = c * plane + y * width as usize + left;
                                        pixel_values.extend_from_slice(&frame[at..at + p]);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        let grid = [grid_t as u32, grid_h as u32, grid_w as u32];
        let tokens = grid_t * grid_h * grid_w / (m * m);
        Processed { shape: vec![grid_t * grid_h * grid_w, row_len], pixel_values, grid_thw: Some(grid), tokens }
    }

    /// The image as a clip of `temporal_patch_size` copies of itself.
    pub fn process(&self, image: &RgbImage) -> Result<Processed, MediaError> {
        let size = self.checked_target(image)?;
        let planes = self.planes(image, size);
        Ok(self.patches(&vec![planes.as_slice(); self.temporal_patch_size as usize], size))
    }

    /// A video's frames (all of one size, as vLLM stacks them), each resized and normalised as
    /// an image, the last repeated up to a multiple of `temporal_patch_size`
    /// (`Qwen2VLVideoProcessor`; `grid_t` is the number of frame groups).
    pub fn process_video(&self, frames: &[RgbImage]) -> Result<Processed, MediaError> {
        self.process_frames(frames, |first| self.checked_target(first))
    }

    /// A video's frames resized to the size `target` gives for the first (checked to tile),
    /// normalised, padded and cut into patches as `process_video` says.
    pub(super) fn process_frames(
        &self,
        frames: &[RgbImage],
        target: impl FnOnce(&RgbImage) -> Result<(u32, u32), MediaError>,
    ) -> Result<Processed, MediaError> {
        // Refusals name the first frame's size: a new `MediaError` variant would break the
        // gateway's exhaustive mapping of them.
        let no_frames = || MediaError::Unprocessable { width: 0, height: 0, detail: "a video needs a frame".into() };
        let first = frames.first().ok_or_else(no_frames)?;
        if let Some(other) = frames.iter().find(|f| (f.width, f.height) != (first.width, first.height)) {
            let detail =
                format!("a frame of the same video is {}x{} (frames share one size)", other.width, other.height);
            return Err(MediaError::Unprocessable { width: first.width, height: first.height, detail });
        }
        let size = self.checked(first, target(first)?)?;
        let planes: Vec<Vec<f32>> = frames.iter().map(|frame| self.planes(frame, size)).collect();
        let t = self.temporal_patch_size as usize;
        let mut frames: Vec<&[f32]> = planes.iter().map(Vec::as_slice).collect();
        let last = frames[frames.len() - 1];
        frames.resize(frames.len().div_ceil(t) * t, last);
        Ok(self.patches(&frames, size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smart_resize_matches_the_reference() {
        // (height, width, factor, min, max) -> transformers' smart_resize
        let cases = [
            ((224, 224, 28, 3136, 12845056), (224, 224)),
            ((1080, 1920, 28, 3136, 12845056), (1092, 1932)),
            ((10, 10, 28, 3136, 12845056), (56, 56)),
            ((42, 14, 28, 3136, 12845056), (112, 56)),
            ((8000, 6000, 28, 3136, 12845056), (4116, 3080)),
            ((4000, 20, 28, 3136, 12845056), (4004, 28)),
            ((500, 375, 32, 65536, 16777216), (512, 384)),
            ((70, 70, 28, 3136, 1003520), (56, 56)),
        ];
        for ((h, w, f, min, max), expected) in cases {
            assert_eq!(smart_resize(h, w, f, min, max).unwrap(), expected, "{h}x{w}");
        }
    }

    #[test]
    fn smart_resize_refuses_extreme_ratios() {
        for (h, w) in [(1, 201), (10000, 49)] {
            assert!(matches!(smart_resize(h, w, 28, 3136, 12845056), Err(MediaError::AspectRatio { .. })));
        }
    }
}
