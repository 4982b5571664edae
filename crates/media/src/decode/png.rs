//! PNG through the `png` crate: palette, low bit depths and `tRNS` expanded, 16-bit samples cut
//! to their high byte as PIL reads 16-bit colour, except 16-bit grey: PIL opens that as `I;16`
//! and its conversion to RGB clips each value to 255.

use std::io::Cursor;

use super::{malformed, DecodeLimits, Decoded, RgbImage};
use crate::error::{ImageFormat, MediaError};

const FORMAT: ImageFormat = ImageFormat::Png;

pub(super) fn decode(bytes: &[u8], limits: &DecodeLimits) -> Result<Decoded, MediaError> {
    let mut decoder = png::Decoder::new(Cursor::new(bytes));
    let (width, height, grey16, rgb) = {
        let header = decoder.read_header_info().map_err(|e| malformed(FORMAT, e))?;
        let grey16 = header.color_type == png::ColorType::Grayscale && header.bit_depth == png::BitDepth::Sixteen;
        (header.width, header.height, grey16, header.color_type == png::ColorType::Rgb)
    };
    limits.check_size(FORMAT, width, height)?;
    decoder.set_limits(png::Limits { bytes: limits.codec_bytes(width, height, 8) });
    decoder.set_transformations(match grey16 {
        true => png::Transformations::IDENTITY,
        false => png::Transformations::normalize_to_color8(),
    });
    let mut reader = decoder.read_info().map_err(|e| malformed(FORMAT, e))?;
    // PIL's mode is RGB for RGB samples (8 or 16 bits) without a transparent colour.
    let converted = !rgb || reader.info().trns.is_some();
    let size = reader.output_buffer_size().ok_or_else(|| malformed(FORMAT, "its size overflows"))?;
    let mut samples = vec![0; size];
    let frame = reader.next_frame(&mut samples).map_err(|e| malformed(FORMAT, e))?;
    let channels = frame.color_type.samples();
    samples.truncate(frame.buffer_size());
    if grey16 {
        let clipped: Vec<u8> =
            samples.chunks_exact(2).map(|v| u16::from_be_bytes([v[0], v[1]]).min(255) as u8).collect();
        let image = RgbImage::from_interleaved(width, height, 1, &clipped);
        return Ok(Decoded { image, converted });
    }
    Ok(Decoded { image: RgbImage::from_interleaved(width, height, channels, &samples), converted })
}
