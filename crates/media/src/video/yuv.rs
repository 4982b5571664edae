//! 4:2:0 YUV to RGB as FFmpeg's swscale converts a stream without colour metadata for OpenCV
//! (what vLLM's default video loader reads frames through): BT.601 coefficients, limited range
//! (16..235 luma), each chroma sample used for its 2x2 block of luma samples (no chroma
//! interpolation). swscale does this in 16-bit fixed point and its SIMD paths round
//! differently; this is the exact real-valued formula rounded once, so a sample may differ
//! from OpenCV's by a level or two (docs/images.md gives the measured difference).

use crate::decode::RgbImage;

/// One decoded picture's planes, each row `stride` bytes apart.
pub(super) struct Planes<'a> {
    pub y: (&'a [u8], usize),
    pub u: (&'a [u8], usize),
    pub v: (&'a [u8], usize),
    pub width: u32,
    pub height: u32,
}

/// BT.601's limited-range matrix, scaled to 8 bits.
const Y_SCALE: f32 = 255.0 / 219.0;
const CR_R: f32 = 255.0 / 224.0 * 1.402;
const CB_G: f32 = 255.0 / 224.0 * 1.772 * 0.114 / 0.587;
const CR_G: f32 = 255.0 / 224.0 * 1.402 * 0.299 / 0.587;
const CB_B: f32 = 255.0 / 224.0 * 1.772;

/// The picture as RGB; `None` if a plane is shorter than its size says.
pub(super) fn to_rgb(p: &Planes<'_>) -> Option<RgbImage> {
    let (w, h) = (p.width as usize, p.height as usize);
    let mut pixels = Vec::with_capacity(w * h * 3);
    let clamp = |v: f32| v.round().clamp(0.0, 255.0) as u8;
    for row in 0..h {
        let y_row = p.y.0.get(row * p.y.1..)?.get(..w)?;
        let u_row = p.u.0.get(row / 2 * p.u.1..)?.get(..w.div_ceil(2))?;
        let v_row = p.v.0.get(row / 2 * p.v.1..)?.get(..w.div_ceil(2))?;
        for (col, &luma) in y_row.iter().enumerate() {
            let y = (luma as f32 - 16.0) * Y_SCALE;
            let (cb, cr) = (u_row[col / 2] as f32 - 128.0, v_row[col / 2] as f32 - 128.0);
            pixels.extend_from_slice(&[clamp(y + CR_R * cr), clamp(y - CB_G * cb - CR_G * cr), clamp(y + CB_B * cb)]);
        }
    }
    Some(RgbImage { width: p.width, height: p.height, pixels })
}
