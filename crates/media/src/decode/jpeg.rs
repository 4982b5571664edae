//! JPEG through `zune-jpeg`, out as RGB whatever the stored colour space.

use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

use super::{malformed, DecodeLimits, Decoded, RgbImage};
use crate::error::{ImageFormat, MediaError};

const FORMAT: ImageFormat = ImageFormat::Jpeg;

pub(super) fn decode(bytes: &[u8], limits: &DecodeLimits) -> Result<Decoded, MediaError> {
    let options = DecoderOptions::new_safe()
        .jpeg_set_out_colorspace(ColorSpace::RGB)
        .set_max_width(usize::MAX)
        .set_max_height(usize::MAX);
    let mut decoder = JpegDecoder::new_with_options(ZCursor::new(bytes), options);
    decoder.decode_headers().map_err(|e| malformed(FORMAT, e))?;
    let info = decoder.info().ok_or_else(|| malformed(FORMAT, "no frame header"))?;
    let (width, height) = (info.width as u32, info.height as u32);
    // PIL opens grey JPEGs as L and four-component ones as CMYK.
    let converted = info.components != 3;
    limits.check_size(FORMAT, width, height)?;
    let size = decoder.output_buffer_size().ok_or_else(|| malformed(FORMAT, "its size overflows"))?;
    let mut pixels = vec![0; size];
    decoder.decode_into(&mut pixels).map_err(|e| malformed(FORMAT, e))?;
    Ok(Decoded { image: RgbImage { width, height, pixels }, converted })
}
