//! 4:2:0 YUV to RGB exactly as FFmpeg's swscale converts a stream without colour metadata for
//! OpenCV (what vLLM's default video loader reads frames through) on x86: the unscaled
//! `yuv420_bgr24` path (taken for an even height at the same size), BT.601 limited range, each
//! chroma sample used for its 2x2 block of luma samples (no interpolation), in 16-bit fixed
//! point with `pmulhw`'s truncation. The real-valued formula rounded once differs from it by up
//! to 3 levels in about 80% of samples, which moves a model's answers; this matches it
//! sample for sample (tools/goldens/video_colour.py checks against OpenCV).

use crate::decode::RgbImage;

/// One decoded picture's planes, each row `stride` bytes apart.
pub(super) struct Planes<'a> {
    pub y: (&'a [u8], usize),
    pub u: (&'a [u8], usize),
    pub v: (&'a [u8], usize),
    pub width: u32,
    pub height: u32,
}

/// A 16.16 coefficient as swscale keeps it for its SIMD code: times 2^13, rounded to 16 bits
/// (`roundToInt16`), so that a sample scaled by 8 (`psllw 3`) times it, high half
/// (`pmulhw`), is the product.
const fn simd_coeff(c16: i64) -> i32 {
    ((c16 * (1 << 13) + (1 << 15)) >> 16) as i32
}

/// BT.601's inverse matrix in 16.16 (`ff_yuv2rgb_coeffs`, SMPTE 170M / ITU-R 601: crv, cbu,
/// cgu, cgv), luma stretched from 16..235 to 0..255.
const Y_GAIN: i32 = simd_coeff((1 << 16) * 255 / 219);
const V_TO_R: i32 = simd_coeff(104_597);
const U_TO_B: i32 = simd_coeff(132_201);
const U_TO_G: i32 = simd_coeff(-25_675);
const V_TO_G: i32 = simd_coeff(-53_279);
/// 16 (luma) and 128 (chroma) in the samples' 8x scale.
const Y_OFFSET: i32 = 16 << 3;
const C_OFFSET: i32 = 128 << 3;

/// `pmulhw`: the high 16 bits of the 32-bit product, rounded toward minus infinity.
fn mul_high(sample: i32, coeff: i32) -> i32 {
    (sample * coeff) >> 16
}

/// One pixel: none of the 16-bit sums can saturate for 8-bit inputs, so plain `i32` adds
/// are swscale's `paddsw` here.
fn pixel(luma: u8, cb: u8, cr: u8) -> [u8; 3] {
    let y = mul_high(((luma as i32) << 3) - Y_OFFSET, Y_GAIN);
    let (u, v) = (((cb as i32) << 3) - C_OFFSET, ((cr as i32) << 3) - C_OFFSET);
    let clamp = |c: i32| c.clamp(0, 255) as u8;
    [
        clamp(y + mul_high(v, V_TO_R)),
        clamp(y + mul_high(u, U_TO_G) + mul_high(v, V_TO_G)),
        clamp(y + mul_high(u, U_TO_B)),
    ]
}

/// The picture as RGB; `None` if a plane is shorter than its size says.
pub(super) fn to_rgb(p: &Planes<'_>) -> Option<RgbImage> {
    let (w, h) = (p.width as usize, p.height as usize);
    let mut pixels = Vec::with_capacity(w * h * 3);
    for row in 0..h {
        let y_row = p.y.0.get(row * p.y.1..)?.get(..w)?;
        let u_row = p.u.0.get(row / 2 * p.u.1..)?.get(..w.div_ceil(2))?;
        let v_row = p.v.0.get(row / 2 * p.v.1..)?.get(..w.div_ceil(2))?;
        for (col, &luma) in y_row.iter().enumerate() {
            pixels.extend_from_slice(&pixel(luma, u_row[col / 2], v_row[col / 2]));
        }
    }
    Some(RgbImage { width: p.width, height: p.height, pixels })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// swscale's SIMD constants as its init computes them for BT.601 limited range.
    #[test]
    fn coefficients_are_swscales() {
        assert_eq!((Y_GAIN, V_TO_R, U_TO_B, U_TO_G, V_TO_G), (9539, 13075, 16525, -3209, -6660));
    }

    /// Samples OpenCV 5.0 (FFmpeg swscale 9.5, x86) gave for these YUV triples, where the
    /// rounded real-valued formula gives other values.
    #[test]
    fn pixels_match_opencv() {
        let table: &[([u8; 3], [u8; 3])] = &[
            ([16, 128, 128], [0, 0, 0]),
            ([18, 128, 128], [2, 2, 2]),
            ([29, 128, 128], [15, 15, 15]),
            ([235, 128, 128], [255, 255, 255]),
            ([24, 100, 136], [21, 12, 0]),
            ([34, 105, 141], [40, 18, 0]),
            ([42, 106, 142], [52, 26, 0]),
            ([152, 141, 114], [135, 163, 184]),
            ([155, 143, 116], [141, 164, 191]),
        ];
        for &(yuv, rgb) in table {
            assert_eq!(pixel(yuv[0], yuv[1], yuv[2]), rgb, "{yuv:?}");
        }
    }
}
