//! `rescale` then `normalize`, in the arithmetic of the processor's backend, planes in channel
//! order:
//!
//! - PIL backend (numpy): the sample times the factor in `f64`, cast to `f32`, then
//!   `(x - mean) / std` in `f32`;
//! - torchvision backend: rescale is folded into normalise (`mean / factor` and `std / factor`
//!   as `f32` tensors times the `f32` of `1 / factor`), so `(x - mean') / std'` on the sample as
//!   `f32`; rescale alone is the `f32` sample times the `f32` factor.

use crate::decode::RgbImage;
use crate::resize::Backend;

/// The per-channel affine steps a config turns on.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalize {
    pub rescale_factor: Option<f64>,
    pub mean_std: Option<([f32; 3], [f32; 3])>,
}

impl Normalize {
    fn sample(&self, channel: usize, value: u8, backend: Backend) -> f32 {
        match (backend, self.rescale_factor, self.mean_std) {
            (Backend::Pil, factor, mean_std) => {
                let x = factor.map_or(value as f32, |factor| (value as f64 * factor) as f32);
                mean_std.map_or(x, |(mean, std)| (x - mean[channel]) / std[channel])
            }
            (Backend::Torchvision, Some(factor), Some((mean, std))) => {
                let inverse = (1.0 / factor) as f32;
                (value as f32 - mean[channel] * inverse) / (std[channel] * inverse)
            }
            (Backend::Torchvision, None, Some((mean, std))) => (value as f32 - mean[channel]) / std[channel],
            (Backend::Torchvision, Some(factor), None) => value as f32 * factor as f32,
            (Backend::Torchvision, None, None) => value as f32,
        }
    }

    /// The image as `(3, height, width)` `f32` planes.
    pub fn planes(&self, image: &RgbImage, backend: Backend) -> Vec<f32> {
        // 256 values per channel: a table is exact and spares the division per sample.
        let table: Vec<[f32; 3]> = (0..=255u8)
            .map(|v| [self.sample(0, v, backend), self.sample(1, v, backend), self.sample(2, v, backend)])
            .collect();
        let plane = image.width as usize * image.height as usize;
        let mut out = vec![0f32; plane * 3];
        for (i, pixel) in image.pixels.chunks_exact(3).enumerate() {
            for c in 0..3 {
                out[c * plane + i] = table[pixel[c] as usize][c];
            }
        }
        out
    }
}
