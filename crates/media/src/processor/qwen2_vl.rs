//! Qwen2-VL's image processor (also Qwen2.5-VL's and Qwen3-VL's, with their configs' patch
//! size, pixel bounds, mean and std): `smart_resize` to a multiple of `patch_size *
//! merge_size`, bicubic resize in the arithmetic of the chosen backend (torchvision's or
//! PIL's), rescale and normalise, the frame
//! repeated `temporal_patch_size` times, then cut into patches laid out as the vision tower
//! reads them: rows `(grid_t * grid_h * grid_w)`, each `C * T * P * P` long, merge blocks
//! contiguous.

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

    pub fn process(&self, image: &RgbImage) -> Result<Processed, MediaError> {
        let (height, width) = self.target_size(image.height, image.width)?;
        let factor = self.factor();
        if height == 0 || width == 0 || height % factor != 0 || width % factor != 0 {
            let detail = format!("its sides are not multiples of {factor} after resizing (to {width}x{height})");
            return Err(MediaError::Unprocessable { width: image.width, height: image.height, detail });
        }
        let resized;
        let image = match self.resize {
            Some(filter) => {
                resized = resize(image, width, height, filter, self.backend);
                &resized
            }
            None => image,
        };
        let planes = self.normalize.planes(image, self.backend);
        let [p, t, m] = [self.patch_size, self.temporal_patch_size, self.merge_size].map(|v| v as usize);
        let (grid_h, grid_w) = (height as usize / p, width as usize / p);
        let row_len = 3 * t * p * p;
        let mut pixel_values = Vec::with_capacity(grid_h * grid_w * row_len);
        let plane = height as usize * width as usize;
        for block_y in 0..grid_h / m {
            for block_x in 0..grid_w / m {
                for my in 0..m {
                    for mx in 0..m {
                        let (top, left) = ((block_y * m + my) * p, (block_x * m + mx) * p);
                        for c in 0..3 {
                            let start = pixel_values.len();
                            for y in top..top + p {
                                let at = c * plane + y * width as usize + left;
                                pixel_values.extend_from_slice(&planes[at..at + p]);
                            }
                            // The temporal copies of one channel follow each other.
                            for _ in 1..t {
                                pixel_values.extend_from_within(start..start + p * p);
                            }
                        }
                    }
                }
            }
        }
        let grid = [1, grid_h as u32, grid_w as u32];
        let tokens = grid_h * grid_w / (m * m);
        Ok(Processed { shape: vec![grid_h * grid_w, row_len], pixel_values, grid_thw: Some(grid), tokens })
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
