//! The decoded image, and the conversions to it that PIL makes (`convert("RGB")`, and vLLM's
//! paste of a transparent image onto white).

/// 8-bit RGB, rows top to bottom, no padding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RgbImage {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
}

/// The background vLLM lays transparent images on (`rgba_background_color`'s default).
const BACKGROUND: u8 = 255;

/// PIL's `paste` with an alpha mask: `DIV255(background * (255 - a) + colour * a)`, rounded
/// the way its integer blend rounds.
pub(crate) fn over_white(colour: u8, alpha: u8) -> u8 {
    let blended = BACKGROUND as u32 * (255 - alpha as u32) + colour as u32 * alpha as u32 + 128;
    (((blended >> 8) + blended) >> 8) as u8
}

/// A decoded image, and whether vLLM's loader would have converted it: PIL opened it in a
/// mode other than RGB (grey, palette, alpha, 16-bit grey, CMYK). vLLM's item hash covers the
/// conversion settings exactly then (`MediaWithBytes.io_config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub image: RgbImage,
    pub converted: bool,
}

impl RgbImage {
    /// From interleaved samples of 1 (grey), 2 (grey, alpha), 3 (RGB) or 4 (RGBA) channels.
    pub(crate) fn from_interleaved(width: u32, height: u32, channels: usize, samples: &[u8]) -> RgbImage {
        let mut pixels = Vec::with_capacity(width as usize * height as usize * 3);
        match channels {
            1 => samples.iter().for_each(|&l| pixels.extend_from_slice(&[l, l, l])),
            2 => samples.chunks_exact(2).for_each(|p| {
                let l = over_white(p[0], p[1]);
                pixels.extend_from_slice(&[l, l, l]);
            }),
            3 => pixels.extend_from_slice(samples),
            _ => samples.chunks_exact(4).for_each(|p| {
                pixels.extend_from_slice(&[over_white(p[0], p[3]), over_white(p[1], p[3]), over_white(p[2], p[3])])
            }),
        }
        RgbImage { width, height, pixels }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpha_blend_matches_pil_paste() {
        // (colour, alpha, what PIL's Image.new("RGB", ..., white).paste(rgba, mask=alpha) gives)
        let cases = [(0, 0, 255), (0, 255, 0), (0, 128, 127), (100, 1, 254), (10, 254, 11), (200, 100, 233)];
        for (colour, alpha, expected) in cases {
            assert_eq!(over_white(colour, alpha), expected, "colour {colour} alpha {alpha}");
        }
    }
}
