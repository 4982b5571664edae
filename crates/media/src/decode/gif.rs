//! GIF's first frame through the `gif` crate, as palette indices mapped here: PIL opens a GIF
//! as a palette image the size of the logical screen, the first frame drawn into it, the rest
//! its transparent index (else index 0); vLLM lays a GIF with a transparent index over white.

use std::num::NonZeroU64;

use gif::{ColorOutput, DecodeOptions, MemoryLimit};

use super::{malformed, DecodeLimits, Decoded, RgbImage};
use crate::error::{ImageFormat, MediaError};

const FORMAT: ImageFormat = ImageFormat::Gif;

pub(super) fn decode(bytes: &[u8], limits: &DecodeLimits) -> Result<Decoded, MediaError> {
    let mut options = DecodeOptions::new();
    options.set_color_output(ColorOutput::Indexed);
    // The frame's own size is only known at its descriptor: the limit bounds its buffer too.
    options.set_memory_limit(MemoryLimit::Bytes(NonZeroU64::new(limits.pixels_max).unwrap_or(NonZeroU64::MIN)));
    let mut decoder = options.read_info(bytes).map_err(|e| malformed(FORMAT, e))?;
    let (width, height) = (decoder.width() as u32, decoder.height() as u32);
    limits.check_size(FORMAT, width, height)?;
    let global = decoder.global_palette().map(<[u8]>::to_vec);
    let frame = decoder
        .read_next_frame()
        .map_err(|e| malformed(FORMAT, e))?
        .ok_or_else(|| malformed(FORMAT, "it has no frame"))?;
    let palette = frame.palette.as_deref().or(global.as_deref()).unwrap_or(&[]);
    let colour = |index: u8| -> [u8; 3] {
        if Some(index) == frame.transparent {
            return [255; 3];
        }
        let at = index as usize * 3;
        palette.get(at..at + 3).map_or([0; 3], |c| [c[0], c[1], c[2]])
    };
    let fill = colour(frame.transparent.unwrap_or(0));
    let mut pixels = Vec::with_capacity(width as usize * height as usize * 3);
    let (left, top) = (frame.left as usize, frame.top as usize);
    let frame_width = frame.width as usize;
    for y in 0..height as usize {
        for x in 0..width as usize {
            let inside = x >= left && y >= top && x - left < frame_width;
            let index = inside.then(|| frame.buffer.get((y - top) * frame_width + (x - left))).flatten();
            pixels.extend_from_slice(&index.map_or(fill, |&i| colour(i)));
        }
    }
    // PIL opens a GIF as a palette (or grey) image: always converted.
    Ok(Decoded { image: RgbImage { width, height, pixels }, converted: true })
}
