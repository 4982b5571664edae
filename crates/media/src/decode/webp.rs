//! WebP (lossy, lossless, animated: the first frame) through `image-webp`, turned by the
//! orientation of its `EXIF` (or `XMP `) chunk.

use std::io::Cursor;

use image_webp::WebPDecoder;

use super::orientation::{apply, orientation};
use super::{malformed, DecodeLimits, Decoded, RgbImage};
use crate::error::{ImageFormat, MediaError};
use crate::limits;

const FORMAT: ImageFormat = ImageFormat::WebP;

pub(super) fn decode(bytes: &[u8], limits: &DecodeLimits) -> Result<Decoded, MediaError> {
    let mut decoder = WebPDecoder::new(Cursor::new(bytes)).map_err(|e| malformed(FORMAT, e))?;
    let (width, height) = decoder.dimensions();
    limits.check_size(FORMAT, width, height)?;
    decoder.set_memory_limit(limits::codec_scratch_bytes_max);
    let size = decoder.output_buffer_size().ok_or_else(|| malformed(FORMAT, "its size overflows"))?;
    let channels = if decoder.has_alpha() { 4 } else { 3 };
    let mut samples = vec![0; size];
    decoder.read_image(&mut samples).map_err(|e| malformed(FORMAT, e))?;
    let image = RgbImage::from_interleaved(width, height, channels, &samples);
    // A chunk that cannot be read is no orientation (the memory limit bounds each).
    let exif = decoder.exif_metadata().ok().flatten();
    let xmp = decoder.xmp_metadata().ok().flatten();
    let image = apply(image, orientation(exif.as_deref(), xmp.as_deref()));
    // PIL opens a WebP with alpha as RGBA, one without as RGB.
    Ok(Decoded { image, converted: channels == 4 })
}
