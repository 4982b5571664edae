//! PNG through the `png` crate: palette, low bit depths and `tRNS` expanded, 16-bit samples cut
//! to their high byte as PIL reads 16-bit colour, except 16-bit grey: PIL opens that as `I;16`
//! and its conversion to RGB clips each value to 255. An `eXIf` chunk's orientation (or an XMP
//! `iTXt` one's) before the image data turns it.

use std::io::Cursor;

use super::orientation::{apply, orientation};
use super::{malformed, DecodeLimits, Decoded, RgbImage};
use crate::error::{ImageFormat, MediaError};
use crate::limits;

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
    let image = if grey16 {
        let clipped: Vec<u8> =
            samples.chunks_exact(2).map(|v| u16::from_be_bytes([v[0], v[1]]).min(255) as u8).collect();
        RgbImage::from_interleaved(width, height, 1, &clipped)
    } else {
        RgbImage::from_interleaved(width, height, channels, &samples)
    };
    let info = reader.info();
    // PIL keeps an `eXIf` chunk behind the JPEG segment's header.
    let exif = info.exif_metadata.as_ref().map(|chunk| [b"Exif\0\0", chunk.as_ref()].concat());
    let xmp = info.utf8_text.iter().find(|chunk| chunk.keyword == "XML:com.adobe.xmp").and_then(|chunk| {
        // A compressed packet inflates within the codec scratch bound, or counts as absent.
        let mut chunk = chunk.clone();
        chunk.decompress_text_with_limit(limits::codec_scratch_bytes_max).ok()?;
        chunk.get_text().ok()
    });
    Ok(Decoded { image: apply(image, orientation(exif.as_deref(), xmp.as_deref().map(str::as_bytes))), converted })
}
