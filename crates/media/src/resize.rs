//! Resampling exactly as PIL's `Image.resize` does it on 8-bit images (Pillow 13's
//! `libImaging/Resample.c`): a separable convolution, each pass rounded and clipped to `u8`;
//! the filter's support is widened by the scale when downsampling; weights are normalised in
//! `f64`, then held as integers with 22 fractional bits. The horizontal pass runs first unless
//! the height shrinks by more than twice what the width does (Pillow 13's order; earlier
//! Pillows always ran it first, and results differ by a level or so where the order changes).
//! The Hugging Face processors resize through PIL, so matching it to the bit makes their
//! tensors reproducible here.

use crate::decode::RgbImage;

/// PIL's resampling filters that the supported processors name (`resample` 2 and 3).
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
            // Keys' cubic with a = -0.5, in PIL's evaluation order.
            Filter::Bicubic if x < 1.0 => ((-0.5 + 2.0) * x - (-0.5 + 3.0)) * x * x + 1.0,
            Filter::Bicubic if x < 2.0 => (((x - 5.0) * x + 8.0) * x - 4.0) * -0.5,
            Filter::Bicubic => 0.0,
        }
    }
}

const PRECISION_BITS: u32 = 32 - 8 - 2;

/// One output position's source window and fixed-point weights.
struct Taps {
    first: usize,
    weights: Vec<i32>,
}

fn taps(in_size: u32, out_size: u32, filter: Filter) -> Vec<Taps> {
    // PIL computes the scale from a float box, exact for every size the limits allow.
    let scale = in_size as f32 as f64 / out_size as f64;
    let filter_scale = scale.max(1.0);
    let inverse_scale = 1.0 / filter_scale;
    let support = filter.support() * filter_scale;
    (0..out_size)
        .map(|out| {
            let centre = (out as f64 + 0.5) * scale;
            // C's (int) casts truncate towards zero, then clamp.
            let first = ((centre - support + 0.5) as i64).max(0) as usize;
            let end = ((centre + support + 0.5) as i64).min(in_size as i64) as usize;
            let raw: Vec<f64> =
                (first..end).map(|x| filter.weight((x as f64 - centre + 0.5) * inverse_scale)).collect();
            let total: f64 = raw.iter().sum();
            let weights = raw
                .iter()
                .map(|&w| {
                    let w = if total != 0.0 { w / total } else { w };
                    let fixed = w * (1u32 << PRECISION_BITS) as f64;
                    (if w < 0.0 { fixed - 0.5 } else { fixed + 0.5 }) as i32
                })
                .collect();
            Taps { first, weights }
        })
        .collect()
}

fn clip8(sum: i64) -> u8 {
    (sum >> PRECISION_BITS).clamp(0, 255) as u8
}

/// The weighted sum of `len` samples `stride` apart, as PIL rounds it.
fn convolve(samples: &[u8], start: usize, stride: usize, taps: &Taps) -> u8 {
    let mut sum = 1i64 << (PRECISION_BITS - 1);
    for (i, &w) in taps.weights.iter().enumerate() {
        sum += samples[start + i * stride] as i64 * w as i64;
    }
    clip8(sum)
}

fn horizontal(image: &RgbImage, width: u32, filter: Filter) -> RgbImage {
    let taps = taps(image.width, width, filter);
    let row_in = image.width as usize * 3;
    let mut pixels = Vec::with_capacity(width as usize * image.height as usize * 3);
    for row in image.pixels.chunks_exact(row_in) {
        for tap in &taps {
            for c in 0..3 {
                pixels.push(convolve(row, tap.first * 3 + c, 3, tap));
            }
        }
    }
    RgbImage { width, height: image.height, pixels }
}

fn vertical(image: &RgbImage, height: u32, filter: Filter) -> RgbImage {
    let taps = taps(image.height, height, filter);
    let row = image.width as usize * 3;
    let mut pixels = Vec::with_capacity(row * height as usize);
    for tap in &taps {
        for i in 0..row {
            pixels.push(convolve(&image.pixels, tap.first * row + i, row, tap));
        }
    }
    RgbImage { width: image.width, height, pixels }
}

/// `image.resize((width, height), resample)`, both sizes at least 1.
pub fn resize(image: &RgbImage, width: u32, height: u32, filter: Filter) -> RgbImage {
    let shrink_y = image.height as i64 - height as i64;
    let shrink_x = image.width as i64 - width as i64;
    let vertical_first = shrink_y > 0 && shrink_y > shrink_x * 2;
    let pass_x = |image: &RgbImage| if width != image.width { horizontal(image, width, filter) } else { image.clone() };
    let pass_y =
        |image: &RgbImage| if height != image.height { vertical(image, height, filter) } else { image.clone() };
    if vertical_first {
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
        for (from, to) in [(1, 7), (7, 1), (100, 37), (37, 100), (640, 448), (3, 2)] {
            for filter in [Filter::Bilinear, Filter::Bicubic] {
                for tap in taps(from, to, filter) {
                    let sum: i64 = tap.weights.iter().map(|&w| w as i64).sum();
                    assert!((sum - (1 << PRECISION_BITS)).abs() <= tap.weights.len() as i64, "{from}->{to}");
                }
            }
        }
    }

    #[test]
    fn matches_pil_on_small_images() {
        // Image.frombytes("L", (w, 1), values).resize((to, 1), resample) in Pillow 13.
        let cases: [(&[u8], u32, Filter, &[u8]); 4] = [
            (&[0, 255], 4, Filter::Bicubic, &[0, 53, 202, 255]),
            (&[0, 255], 4, Filter::Bilinear, &[0, 64, 191, 255]),
            (&[0, 255, 0, 255, 0, 255], 3, Filter::Bicubic, &[109, 128, 146]),
            (&[10, 20, 30, 40, 50, 60, 70, 80], 3, Filter::Bicubic, &[19, 45, 71]),
        ];
        for (values, to, filter, expected) in cases {
            let out = resize(&grey(values.len() as u32, 1, values), to, 1, filter);
            let got: Vec<u8> = out.pixels.chunks_exact(3).map(|p| p[0]).collect();
            assert_eq!(got, expected, "{values:?} -> {to} {filter:?}");
        }
    }

    #[test]
    fn the_pass_order_is_pillows() {
        // A 4x6 image to 5x2: the height shrinks by more than twice the width's change, so the
        // vertical pass runs first; the other order rounds differently on this pattern.
        let values: Vec<u8> = (0..24).map(|i| [0, 255, 30, 200, 90, 10, 250][i % 7]).collect();
        let out = resize(&grey(4, 6, &values), 5, 2, Filter::Bicubic);
        let got: Vec<u8> = out.pixels.chunks_exact(3).map(|p| p[0]).collect();
        // Image.frombytes("L", (4, 6), values).resize((5, 2), BICUBIC) in Pillow 13.
        assert_eq!(got, [96, 105, 132, 138, 108, 112, 131, 135, 114, 86]);
    }

    #[test]
    fn same_size_is_a_copy() {
        let image = grey(3, 2, &[1, 2, 3, 4, 5, 6]);
        assert_eq!(resize(&image, 3, 2, Filter::Bicubic), image);
    }
}
