//! `rescale` then `normalize`, in the Hugging Face processors' arithmetic: the sample times the
//! factor in `f64`, cast to `f32`, then `(x - mean) / std` in `f32`, planes in channel order.

use crate::decode::RgbImage;

/// The per-channel affine steps a config turns on.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalize {
    pub rescale_factor: Option<f64>,
    pub mean_std: Option<([f32; 3], [f32; 3])>,
}

impl Normalize {
    fn sample(&self, channel: usize, value: u8) -> f32 {
        let x = match self.rescale_factor {
            Some(factor) => (value as f64 * factor) as f32,
            None => value as f32,
        };
        match self.mean_std {
            Some((mean, std)) => (x - mean[channel]) / std[channel],
            None => x,
        }
    }

    /// The image as `(3, height, width)` `f32` planes.
    pub fn planes(&self, image: &RgbImage) -> Vec<f32> {
        // 256 values per channel: a table is exact and spares the division per sample.
        let table: Vec<[f32; 3]> =
            (0..=255u8).map(|v| [self.sample(0, v), self.sample(1, v), self.sample(2, v)]).collect();
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
