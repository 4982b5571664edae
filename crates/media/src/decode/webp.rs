//! WebP (lossy, lossless, animated: the first frame) through `image-webp`.

use std::io::Cursor;

use image_webp::WebPDecoder;

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
    // PIL opens a WebP with alpha as RGBA, one without as RGB.
    Ok(Decoded { image: RgbImage::from_interleaved(width, height, channels, &samples), converted: channels == 4 })
}
