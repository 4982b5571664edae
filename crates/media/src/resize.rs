//! Resampling exactly as the two image backends of the Hugging Face processors do it on 8-bit
//! images: PIL's `Image.resize` (Pillow 13's `libImaging/Resample.c`) and torchvision's
//! `resize` with `antialias=True` on a `uint8` tensor (torch's CPU kernel for bilinear and
//! bicubic, `_upsample_*2d_aa`, which follows PIL's design). Both are a separable convolution,
//! each pass rounded and clipped to `u8`, with the filter's support widened by the scale when
//! downsampling and the weights normalised in `f64`; they differ in two places, each worth a
//! level or more on some pixels:
//!
//! - the weights' fixed point: PIL holds them with 22 fractional bits in an `i32`; torch in an
//!   `i16`, with the most fractional bits (at most 22) that keep the largest weight of the axis
//!   below 2^15 (14 bits when a weight is near 1), so a weight can lose up to 8 bits;
//! - the pass order: torch always runs the horizontal pass first; Pillow 13 runs the vertical
//!   one first when the height shrinks by more than twice what the width does (earlier Pillows
//!   always went horizontal first). With bicubic's negative lobes the first pass's clipping
//!   then differs too (17 levels next to a sharp edge on a 1500x60 image resized to 1512x56).
//!
//! Which backend a processor uses decides which one its tensors must match to the bit.

use crate::decode::RgbImage;

/// Which library the Hugging Face processor resizes with. transformers 5 gives the torchvision
/// one wherever torchvision is installed (as in vLLM's images), so that is the default; the PIL
/// one is what it gives without torchvision (`...ImageProcessorPil`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    Pil,
    #[default]
    Torchvision,
}

impl Backend {
    /// Fractional bits of the fixed-point weights of one axis, whose largest weight is `max`.
    fn precision(self, max: f64) -> u32 {
        match self {
            Backend::Pil => PIL_PRECISION_BITS,
            // The first precision whose next one would put the largest weight at 2^15 or above.
            Backend::Torchvision => (0..PIL_PRECISION_BITS)
                .find(|&bits| (0.5 + max * (1u32 << (bits + 1)) as f64) as i64 >= 1 << 15)
                .unwrap_or(PIL_PRECISION_BITS),
        }
    }

    fn vertical_first(self, from: (u32, u32), to: (u32, u32)) -> bool {
        let shrink_x = from.0 as i64 - to.0 as i64;
        let shrink_y = from.1 as i64 - to.1 as i64;
        self == Backend::Pil && shrink_y > 0 && shrink_y > shrink_x * 2
    }
}

/// The resampling filters that the supported processors name (PIL's `resample` 2 and 3,
/// torchvision's `InterpolationMode` `BILINEAR` and `BICUBIC`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    Bilinear,
    Bicubic,
}

impl Filter {
    /// From PIL's enum value as a `preprocessor_config.json` writes it.
    pub fn from_pil(resample: u64) -> Option<Filter> {
        match resample {
            2 => Some(Filter::Bilinear),
            3 => Some(Filter::Bicubic),
            _ => None,
        }
    }

    fn support(self) -> f64 {
        match self {
            Filter::Bilinear => 1.0,
            Filter::Bicubic => 2.0,
        }
    }

    fn weight(self, x: f64) -> f64 {
        let x = x.abs();
        match self {
            Filter::Bilinear if x < 1.0 => 1.0 - x,
            Filter::Bilinear => 0.0,
            // Keys' cubic with a = -0.5, in PIL's evaluation order (torch's order scales each
            // term by a = -0.5 instead, a power of two, so it rounds identically).
            Filter::Bicubic if x < 1.0 => ((-0.5 + 2.0) * x - (-0.5 + 3.0)) * x * x + 1.0,
            Filter::Bicubic if x < 2.0 => (((x - 5.0) * x + 8.0) * x - 4.0) * -0.5,
            Filter::Bicubic => 0.0,
        }
    }
}

const PIL_PRECISION_BITS: u32 = 32 - 8 - 2;

/// One output position's source window and fixed-point weights.
struct Taps {
    first: usize,
    weights: Vec<i32>,
}

/// One axis's windows and weights, and the weights' fractional bits.
fn taps(in_size: u32, out_size: u32, filter: Filter, backend: Backend) -> (Vec<Taps>, u32) {
    // PIL computes the scale from a float box and torch in `f64`: the same for every size the
    // limits allow.
    let scale = in_size as f64 / out_size as f64;
    let filter_scale = scale.max(1.0);
    let inverse_scale = 1.0 / filter_scale;
    let support = filter.support() * filter_scale;
    let windows: Vec<(usize, Vec<f64>)> = (0..out_size)
        .map(|out| {
            let centre = (out as f64 + 0.5) * scale;
            // C's (int) casts truncate towards zero, then clamp.
            let first = ((centre - support + 0.5) as i64).max(0) as usize;
            let end = ((centre + support + 0.5) as i64).min(in_size as i64) as usize;
            let raw: Vec<f64> =
                (first..end).map(|x| filter.weight((x as f64 - centre + 0.5) * inverse_scale)).collect();
            let total: f64 = raw.iter().sum();
            (first, raw.iter().map(|&w| if total != 0.0 { w / total } else { w }).collect())
        })
        .collect();
    let max = windows.iter().flat_map(|(_, w)| w.iter().copied()).fold(0.0, f64::max);
    let precision = backend.precision(max);
    let taps = windows
        .into_iter()
        .map(|(first, weights)| {
            let weights = weights
                .iter()
                .map(|&w| {
                    let fixed = w * (1u32 << precision) as f64;
                    (if w < 0.0 { fixed - 0.5 } else { fixed + 0.5 }) as i32
                })
                .collect();
            Taps { first, weights }
        })
        .collect();
    (taps, precision)
}

/// A weighted sum shifted back to a sample, clipped, as both backends do. Sums are `i32`, as
/// in both (no overflow: a window's weights sum to under 1.3 in magnitude, so at most 2^22 ×
/// 1.3 × 255 < 2^31); the rounding half is the sum's starting value.
fn clip(sum: i32, precision: u32) -> u8 {
    (sum >> precision).clamp(0, 255) as u8
}

fn horizontal(image: &RgbImage, width: u32, filter: Filter, backend: Backend) -> RgbImage {
    let (taps, precision) = taps(image.width, width, filter, backend);
    let half = (1i32 << precision) >> 1;
    let row_in = image.width as usize * 3;
    let mut pixels = Vec::with_capacity(width as usize * image.height as usize * 3);
    for row in image.pixels.chunks_exact(row_in) {
        for tap in &taps {
            let window = &row[tap.first * 3..(tap.first + tap.weights.len()) * 3];
            let mut sums = [half; 3];
            for (pixel, &w) in window.chunks_exact(3).zip(&tap.weights) {
                for c in 0..3 {
                    sums[c] += pixel[c] as i32 * w;
                }
            }
            pixels.extend(sums.map(|sum| clip(sum, precision)));
        }
    }
    RgbImage { width, height: image.height, pixels }
}

/// Whole rows at a time: each source row of a window adds its weight times the row to the
/// output row's sums (the inner loop vectorises).
fn vertical(image: &RgbImage, height: u32, filter: Filter, backend: Backend) -> RgbImage {
    let (taps, precision) = taps(image.height, height, filter, backend);
    let half = (1i32 << precision) >> 1;
    let row = image.width as usize * 3;
    let mut pixels = Vec::with_capacity(row * height as usize);
    let mut sums = vec![0i32; row];
    for tap in &taps {
        sums.fill(half);
        for (k, &w) in tap.weights.iter().enumerate() {
            let source = &image.pixels[(tap.first + k) * row..][..row];
            for (sum, &sample) in sums.iter_mut().zip(source) {
                *sum += sample as i32 * w;
            }
        }
        pixels.extend(sums.iter().map(|&sum| clip(sum, precision)));
    }
    RgbImage { width: image.width, height, pixels }
}

/// `image.resize((width, height), resample)` (PIL) or `resize(tensor, [height, width],
/// interpolation, antialias=True)` (torchvision), both sizes at least 1.
pub fn resize(image: &RgbImage, width: u32, height: u32, filter: Filter, backend: Backend) -> RgbImage {
    let pass_x = |image: &RgbImage| {
        if width != image.width {
            horizontal(image, width, filter, backend)
        } else {
            image.clone()
        }
    };
    let pass_y = |image: &RgbImage| {
        if height != image.height {
            vertical(image, height, filter, backend)
        } else {
            image.clone()
        }
    };
    if backend.vertical_first((image.width, image.height), (width, height)) {
        pass_x(&pass_y(image))
    } else {
        pass_y(&pass_x(image))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grey(width: u32, height: u32, values: &[u8]) -> RgbImage {
        RgbImage { width, height, pixels: values.iter().flat_map(|&v| [v, v, v]).collect() }
    }

    #[test]
    fn weights_sum_to_one_in_fixed_point() {
        for (from, to) in [(1, 7), (7, 1), (100, 37), (37, 100), (640, 448), (3, 2), (3000, 28)] {
            for filter in [Filter::Bilinear, Filter::Bicubic] {
                for backend in [Backend::Pil, Backend::Torchvision] {
                    let (taps, precision) = taps(from, to, filter, backend);
                    for tap in taps {
                        let sum: i64 = tap.weights.iter().map(|&w| w as i64).sum();
                        assert!((sum - (1 << precision)).abs() <= tap.weights.len() as i64, "{from}->{to}");
                        // torch holds each weight in an i16.
                        let fits = tap.weights.iter().all(|&w| i16::try_from(w).is_ok());
                        assert!(backend == Backend::Pil || fits, "{from}->{to} {filter:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn torchvision_precision_keeps_the_largest_weight_in_an_i16() {
        // (largest weight, bits): the largest weight times 2^(bits + 1), rounded, would reach
        // 2^15; tiny weights stop at PIL's 22 bits.
        let cases = [(1.0, 14), (0.5, 15), (0.6, 15), (0.4, 16), (0.25, 16), (1e-9, 22)];
        for (max, bits) in cases {
            assert_eq!(Backend::Torchvision.precision(max), bits, "{max}");
            assert_eq!(Backend::Pil.precision(max), 22, "{max}");
        }
    }

    /// (values, size, target, filter, Pillow's result, torchvision's result)
    type Case<'a> = (&'a [u8], (u32, u32), (u32, u32), Filter, &'a [u8], &'a [u8]);

    #[test]
    fn matches_the_references_on_small_images() {
        // Image.frombytes("L", (w, h), values).resize((to_w, to_h), resample) in Pillow 13, and
        // torchvision's resize(tensor, [to_h, to_w], interpolation, antialias=True) on the same
        // values as a uint8 tensor (torch 2.13, torchvision 0.28).
        let seven: Vec<u8> = (0..24).map(|i| [0, 255, 30, 200, 90, 10, 250][i % 7]).collect();
        let ramp: Vec<u8> = (0..100).map(|i| (i * 2) as u8).collect();
        let cases: [Case; 6] = [
            (&[0, 255], (2, 1), (4, 1), Filter::Bicubic, &[0, 53, 202, 255], &[0, 53, 202, 255]),
            (&[0, 255], (2, 1), (4, 1), Filter::Bilinear, &[0, 64, 191, 255], &[0, 64, 191, 255]),
            (&[0, 255, 0, 255, 0, 255], (6, 1), (3, 1), Filter::Bicubic, &[109, 128, 146], &[109, 128, 146]),
            (&[10, 20, 30, 40, 50, 60, 70, 80], (8, 1), (3, 1), Filter::Bicubic, &[19, 45, 71], &[19, 45, 71]),
            (&ramp, (100, 1), (3, 1), Filter::Bicubic, &[34, 99, 164], &[34, 99, 164]),
            // The height shrinks by more than twice the width's change: Pillow 13 runs the
            // vertical pass first, torch the horizontal one, and the clipping in between differs.
            (
                &seven,
                (4, 6),
                (5, 2),
                Filter::Bicubic,
                &[96, 105, 132, 138, 108, 112, 131, 135, 114, 86],
                &[97, 105, 132, 138, 110, 109, 131, 135, 114, 83],
            ),
        ];
        for (values, (w, h), (to_w, to_h), filter, pil, torchvision) in cases {
            for (backend, expected) in [(Backend::Pil, pil), (Backend::Torchvision, torchvision)] {
                let out = resize(&grey(w, h, values), to_w, to_h, filter, backend);
                let got: Vec<u8> = out.pixels.chunks_exact(3).map(|p| p[0]).collect();
                assert_eq!(got, expected, "{w}x{h} -> {to_w}x{to_h} {filter:?} {backend:?}");
            }
        }
    }

    #[test]
    fn same_size_is_a_copy() {
        let image = grey(3, 2, &[1, 2, 3, 4, 5, 6]);
        for backend in [Backend::Pil, Backend::Torchvision] {
            assert_eq!(resize(&image, 3, 2, Filter::Bicubic, backend), image);
        }
    }
}
